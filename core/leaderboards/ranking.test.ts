import { rankRun } from './ranking';

describe('rankRun', () => {
  const scores = [90, 80, 80, 70, 70, 70, 60];
  const none = { entries: 0, distinct: 0 };

  it('numbers unique, shared and dense ranks from the top', () => {
    expect(rankRun('unique', scores, 0, none)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(rankRun('shared', scores, 0, none)).toEqual([1, 2, 2, 4, 4, 4, 7]);
    expect(rankRun('dense', scores, 0, none)).toEqual([1, 2, 2, 3, 3, 3, 4]);
  });

  it('continues a page in the middle of a tie', () => {
    // Page starting at position 2 (the second 80): one entry (90) has a greater score.
    const page = scores.slice(2);
    expect(rankRun('unique', page, 2, { entries: 1, distinct: 1 })).toEqual([3, 4, 5, 6, 7]);
    expect(rankRun('shared', page, 2, { entries: 1, distinct: 1 })).toEqual([2, 4, 4, 4, 7]);
    expect(rankRun('dense', page, 2, { entries: 1, distinct: 1 })).toEqual([2, 3, 3, 3, 4]);
  });

  it('handles an empty run', () => {
    expect(rankRun('dense', [], 5, none)).toEqual([]);
  });
});
