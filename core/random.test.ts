import { SeededRandom, systemRandom, type Random } from './random';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe.each<[string, () => Random]>([
  ['system', () => systemRandom],
  ['seeded', () => new SeededRandom('t')],
])('%s random source', (_name, make) => {
  it('draws v4 uuids, bytes, floats in [0, 1) and ints in [min, max)', () => {
    const r = make();
    const ids = new Set(Array.from({ length: 200 }, () => r.uuid()));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(r.bytes(0)).toHaveLength(0);
    expect(r.bytes(37)).toHaveLength(37);
    for (let i = 0; i < 500; i++) {
      const f = r.float();
      expect(f >= 0 && f < 1).toBe(true);
      const n = r.int(-3, 4);
      expect(Number.isInteger(n) && n >= -3 && n < 4).toBe(true);
    }
    expect(r.int(5, 6)).toBe(5);
  });

  it('refuses empty, reversed or too wide int ranges', () => {
    const r = make();
    expect(() => r.int(1, 1)).toThrow(RangeError);
    expect(() => r.int(2, 1)).toThrow(RangeError);
    expect(() => r.int(0, 2 ** 48)).toThrow(RangeError);
    expect(() => r.int(0.5, 2)).toThrow(RangeError);
    expect(r.int(0, 2 ** 48 - 1)).toBeLessThan(2 ** 48 - 1);
  });

  it('spreads ints evenly (every value of a small range, none far off its share)', () => {
    const r = make();
    const counts = new Array<number>(6).fill(0);
    for (let i = 0; i < 6000; i++) counts[r.int(0, 6)]!++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(200);
  });
});

describe('SeededRandom', () => {
  it('repeats its sequence for one seed and differs for another', () => {
    const draw = (r: Random) => [r.uuid(), r.bytes(5).toString('hex'), r.float(), r.int(0, 1000), r.uuid()];
    expect(draw(new SeededRandom(42))).toEqual(draw(new SeededRandom(42)));
    expect(draw(new SeededRandom(42))).not.toEqual(draw(new SeededRandom(43)));
    expect(draw(new SeededRandom('a'))).not.toEqual(draw(new SeededRandom('b')));
  });

  it('gives the same bytes however they are split across calls', () => {
    const a = new SeededRandom('split');
    const b = new SeededRandom('split');
    const whole = a.bytes(100);
    const parts = Buffer.concat([b.bytes(1), b.bytes(31), b.bytes(33), b.bytes(35)]);
    expect(parts.equals(whole)).toBe(true);
  });
});
