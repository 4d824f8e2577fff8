/**
 * The embedded event log (adapters/eventlog/file.ts) across a process crash: a child appends from
 * 16 concurrent callers and prints each append's event ids once the append resolved; it is killed
 * with SIGKILL mid-stream, several times over the same directory. After each kill the log opens
 * (cutting an unfinished write off if the kill hit one) and holds every acknowledged record exactly
 * once, at contiguous offsets; the next child appends after them. Segments are small (16 KiB), so
 * that partitions move to new segment files all through the run and kills land around those moves
 * too. (A SIGKILL keeps what reached the
 * page cache; a power cut is what the fdatasync before each acknowledgement is for, and cannot be
 * simulated here.)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileEventLog } from '../../adapters/eventlog/file';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import { waitFor } from '../support/wait';

const ROOT = join(__dirname, '..', '..');
const SEGMENT_BYTES = 16 * 1024;

/** Runs the writer until it acknowledged at least `acks` appends, then SIGKILLs it. */
async function runAndKill(dir: string, acks: number): Promise<string[]> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'tests/support/filelog-writer.ts', dir, String(SEGMENT_BYTES)],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const acked: string[] = [];
  let lines = 0;
  let stderr = '';
  let rest = '';
  child.stdout.on('data', (d: Buffer) => {
    const text = rest + d.toString();
    const parts = text.split('\n');
    rest = parts.pop()!;
    for (const line of parts) {
      if (line.startsWith('ACK ')) {
        acked.push(...line.slice(4).split(' '));
        lines++;
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  try {
    await waitFor(() => lines >= acks || child.exitCode !== null, {
      timeoutMs: 90_000,
      what: `${acks} acknowledged appends`,
      describe: () => `acks: ${lines}\n${stderr}`,
    });
    expect(child.exitCode).toBeNull();
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
  return acked;
}

async function readEverything(dir: string): Promise<{ ids: string[]; total: number }> {
  const log = new FileEventLog({ dir, segmentBytes: SEGMENT_BYTES });
  try {
    await log.ensureTopic(EVENTS_TOPIC);
    const ends = await log.endOffsets(EVENTS_TOPIC);
    const total = [...ends.values()].reduce((a, b) => a + b, 0);
    const ids: string[] = [];
    const offsets = new Map<number, number[]>();
    const c = await log.consume<EventRecord>(
      EVENTS_TOPIC,
      { group: 'check', maxBatchSize: 500 },
      {
        resumeFrom: async () => new Map(),
        handleBatch: async (b) => {
          for (const r of b.records) {
            ids.push(r.value.event_id);
            offsets.set(b.partition, [...(offsets.get(b.partition) ?? []), r.offset]);
          }
        },
      },
    );
    await waitFor(() => ids.length >= total, { what: `${total} records`, describe: () => `${ids.length}` });
    await c.stop();
    for (const list of offsets.values()) expect(list).toEqual(list.map((_, i) => i));
    return { ids, total };
  } finally {
    await log.close();
  }
}

describe('the embedded event log across SIGKILLs [embedded]', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ludus-filelog-fault-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps every acknowledged append, exactly once, through three kills', async () => {
    const acked: string[] = [];
    for (const n of [30, 60, 90]) {
      acked.push(...(await runAndKill(dir, n)));
      const { ids, total } = await readEverything(dir);
      expect(ids.length).toBe(total);
      expect(new Set(ids).size).toBe(ids.length); // no record twice
      const present = new Set(ids);
      expect(acked.filter((id) => !present.has(id))).toEqual([]); // none acknowledged is missing
    }
    // The run went through many segment files.
    const files = readdirSync(join(dir, EVENTS_TOPIC.name)).filter((n) => n.endsWith('.log'));
    expect(files.length).toBeGreaterThan(EVENTS_TOPIC.partitions * 2);
  }, 400_000);
});
