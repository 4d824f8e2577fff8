/**
 * Micro-benchmark of the leaderboard scoring step's own CPU (issue 19): the quick profile's
 * standard boards (weekly, all_time, monthly; bench/lib/events.ts) over batches of 1,000 generated
 * events, with a stand-in SQL connection that returns no rows, so only the step's JavaScript is
 * timed (window lookups, contributions, score rows, the batch-state helper's key order and
 * arrays). Prints milliseconds per batch; compare commits by running it on each, one right after
 * the other.
 *
 *   npx tsx bench/scoring-step.ts [batches]
 */
import { compileScorer, eventView, type Leaderboard } from '../core/leaderboards/definition';
import { ScoringStep } from '../processors/pipeline/scoring';
import type { StepBatch } from '../processors/pipeline/step';
import type { Queryable } from '../adapters/sql/types';
import { eventRecord, generate, standardBoards } from './lib/events';

async function main(): Promise<void> {
  const batches = Number(process.argv[2] ?? 300);
  const boards = standardBoards().map(
    (b) => ({ ...b, tenant_id: 'bench', version: 1, status: 'active' }) as unknown as Leaderboard,
  );
  const scorers = new Map([['bench', boards.map((b) => compileScorer(b))]]);
  const now = Date.now();
  const events = generate(1000, { tenants: ['bench'], users: 10_000, seed: 1, idPrefix: 'mb' }).map(
    (e, index) => {
      const event = eventRecord(e, now);
      return {
        index,
        record: { topic: 'ludus.events', partition: 0, offset: index, key: '', value: event, timestamp: 0 },
        event,
        view: eventView(event),
      };
    },
  );
  const q: Queryable = { query: async () => ({ rows: [], rowCount: 0 }), exec: async () => undefined };
  const batch: StepBatch = {
    parts: [{ partition: 0, firstOffset: 0, nextOffset: events.length }],
    events,
    replayed: [],
    tenants: ['bench'],
    timezones: new Map([['bench', 'UTC']]),
    now,
  };
  const step = new ScoringStep();
  for (let i = 0; i < 50; i++) await step.score(q, batch, scorers); // warm-up (JIT)
  const t = performance.now();
  for (let i = 0; i < batches; i++) await step.score(q, batch, scorers);
  const ms = (performance.now() - t) / batches;
  process.stdout.write(`scoring step: ${ms.toFixed(2)} ms per batch of 1,000 events (${batches} batches)\n`);
}

void main();
