/**
 * The embedded event log alone, before and after issue 19, in one process and one run:
 * LocalEventLog (a table in PGlite, on disk) against FileEventLog (files with group commit).
 * Each round appends N events in bulks of 100 with 16 appends in flight (as the ingestion gateway
 * does under wrk -c16), then drains them with one consumer group (maxBatchSize 1000, decode
 * included, no effects). Rounds alternate between the two logs; medians of 3.
 *
 *   npx tsx bench/eventlog-embedded.ts [events]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileEventLog } from '../adapters/eventlog/file';
import { LocalEventLog } from '../adapters/eventlog/local';
import type { EventLog } from '../adapters/eventlog/types';
import { migrate } from '../adapters/sql/migrate';
import { PgliteSql } from '../adapters/sql/pglite';
import { EVENTS_TOPIC, eventKey, type EventRecord } from '../schemas/topics';

const N = Number(process.argv[2] ?? 20_000);

function bulk(i: number): Array<{ key: string; value: EventRecord }> {
  return Array.from({ length: 100 }, (_, j) => {
    const n = i * 100 + j;
    const user = `user-${n % 10_000}`;
    return {
      key: eventKey('bench', user),
      value: {
        tenant_id: 'bench',
        event_id: `e-${n}`,
        type: 'match.finished',
        user_id: user,
        occurred_at: 1_700_000_000_000 + n,
        received_at: 1_700_000_000_000 + n,
        attrs_json: JSON.stringify({ points: n % 50, mode: 'ranked' }),
        actor_metadata_json: null,
        subject_json: null,
      },
    };
  });
}

async function measure(log: EventLog): Promise<{ append: number; drain: number }> {
  await log.ensureTopic(EVENTS_TOPIC);
  const bulks = N / 100;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < bulks) await log.append(EVENTS_TOPIC, bulk(next++));
    }),
  );
  const append = N / ((performance.now() - t0) / 1000);
  let seen = 0;
  const t1 = performance.now();
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  const c = await log.consume<EventRecord>(
    EVENTS_TOPIC,
    { group: 'bench', maxBatchSize: 1000 },
    {
      resumeFrom: async () => new Map(),
      handleBatch: async (b) => {
        seen += b.records.length;
        if (seen >= N) done();
      },
    },
  );
  await all;
  const drain = N / ((performance.now() - t1) / 1000);
  await c.stop();
  return { append, drain };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const results: Record<string, Array<{ append: number; drain: number }>> = { sql: [], file: [] };
  for (let round = 0; round < 3; round++) {
    for (const kind of ['sql', 'file'] as const) {
      const dir = mkdtempSync(join(tmpdir(), 'ludus-evlog-bench-'));
      try {
        if (kind === 'sql') {
          const sql = await PgliteSql.open(join(dir, 'pg'));
          await migrate(sql);
          const log = new LocalEventLog(sql);
          results.sql.push(await measure(log));
          await log.close();
          await sql.close();
        } else {
          const log = new FileEventLog({ dir: join(dir, 'log') });
          results.file.push(await measure(log));
          await log.close();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const r = results[kind].at(-1)!;
      process.stderr.write(
        `round ${round + 1} ${kind}: append ${Math.round(r.append)}/s, drain ${Math.round(r.drain)}/s\n`,
      );
    }
  }
  const fig = (k: string, f: 'append' | 'drain') => {
    const xs = results[k].map((r) => r[f]);
    return `${Math.round(median(xs))} (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))})`;
  };
  console.log(`| log | append events/s | drain events/s |\n|---|---:|---:|`);
  console.log(`| LocalEventLog on PGlite | ${fig('sql', 'append')} | ${fig('sql', 'drain')} |`);
  console.log(`| FileEventLog | ${fig('file', 'append')} | ${fig('file', 'drain')} |`);
}

void main();
