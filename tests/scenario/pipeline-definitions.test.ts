/**
 * The pipeline's one read of its tenants (processors/pipeline/definitions.ts, migration 016) on
 * the real Postgres, under concurrency: a definition written while a batch holds its tenants'
 * rows FOR KEY SHARE is not blocked by it (the trigger's update of the tenant's row takes FOR NO
 * KEY UPDATE), the running batch applies what was committed when it read its tenants, and the
 * next batch applies the new definition. A backfill's FOR UPDATE of the tenant's row still waits
 * for the batch (the achievement backfill's seam).
 */
import type { PgSql } from '../../adapters/sql/pg';
import type { Queryable } from '../../adapters/sql/types';
import { createBoard } from '../../core/leaderboards/store';
import { markAndReadTenants, readTenants } from '../../processors/pipeline/definitions';
import { ScoringStep } from '../../processors/pipeline/scoring';
import { runSteps, type StepsResult } from '../../processors/pipeline/step';
import { dropTestPg, openTestPg, uniqueName } from '../support/stack';
import { matchBatch, matchBoard } from '../support/step-batch';

const T0 = Date.now();
let offset = 0;
const batchOf = (definitions: Awaited<ReturnType<typeof readTenants>>) =>
  matchBatch('acme', 1, { at: T0, firstOffset: offset++, definitions });

const board = (id: string) => matchBoard('acme', id);

describe('tenant definitions read under concurrency [Postgres]', () => {
  const schema = uniqueName('defs');
  let sql: PgSql;
  beforeAll(async () => {
    sql = await openTestPg(schema);
    await sql.query(
      `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at) VALUES ('acme', 'acme', 'x', 'x', now(), now())`,
    );
    await createBoard(sql, board('first'), T0);
  });
  afterAll(() => dropTestPg(sql, schema));

  it('a board created while a batch runs is not blocked by it and applies from the next batch on', async () => {
    const step = new ScoringStep();
    // Warm the step's cache at the current version.
    await sql.tx(async (q) => runSteps(q, [step], batchOf(await readTenants(q, ['acme']))));

    let release!: () => void;
    const paused = new Promise<void>((r) => (release = r));
    let readDone!: () => void;
    const hasRead = new Promise<void>((r) => (readDone = r));
    const batch: Promise<StepsResult> = sql.tx(async (q: Queryable) => {
      const defs = await readTenants(q, ['acme']);
      readDone();
      await paused; // the board is created and committed here
      return runSteps(q, [step], batchOf(defs));
    });
    await hasRead;
    // Not blocked by the batch's FOR KEY SHARE: this commits while the batch is still open.
    await sql.tx((q) => createBoard(q, board('second'), T0));
    release();
    const running = await batch;
    expect(running.outcomes[0]!.kind).toBe('ok');
    const scored = async () =>
      (
        await sql.query<{ leaderboard_id: string; score: number }>(
          `SELECT leaderboard_id, score FROM leaderboard_scores WHERE tenant_id = 'acme' ORDER BY leaderboard_id`,
        )
      ).rows.map((r) => [r.leaderboard_id, Number(r.score)]);
    // The running batch applied the boards committed when it read its tenants: 'first' only.
    expect(await scored()).toEqual([['first', 2]]);
    await sql.tx(async (q) => runSteps(q, [step], batchOf(await readTenants(q, ['acme']))));
    expect(await scored()).toEqual([
      ['first', 3],
      ['second', 1],
    ]);
  });

  it('a FOR UPDATE of the tenant’s row (a backfill starting) waits for a batch that read it', async () => {
    const order: string[] = [];
    let release!: () => void;
    const paused = new Promise<void>((r) => (release = r));
    let readDone!: () => void;
    const hasRead = new Promise<void>((r) => (readDone = r));
    const batch = sql.tx(async (q) => {
      // The pipeline's first statement: the dedupe and the tenants' rows FOR KEY SHARE.
      await markAndReadTenants(q, [{ tenant_id: 'acme', event_id: 'lock-1', received_at: T0 }]);
      readDone();
      await paused;
      order.push('batch commits');
    });
    await hasRead;
    const backfill = sql.tx(async (q) => {
      await q.query(`SELECT id FROM tenants WHERE id = 'acme' FOR UPDATE`);
      order.push('backfill locked');
    });
    await new Promise((r) => setTimeout(r, 200));
    release();
    await Promise.all([batch, backfill]);
    expect(order).toEqual(['batch commits', 'backfill locked']);
  });
});
