/**
 * The batch's one read of its tenants (./definitions.ts) and what it saves (issue 19): the
 * per-tenant definition versions and counts kept by migration 016's triggers, the steps' loads
 * kept by version (none for a tenant whose version did not move, none for a tenant without
 * definitions), and the semantics under a concurrent definition write: a batch applies what was
 * committed when it read its tenants' rows, the next batch what was committed after.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import { forgetCounts, mayHave, rememberCounts } from '../../core/definitions/presence';
import { createBoard } from '../../core/leaderboards/store';
import { openTestPglite } from '../../tests/support/stack';
import { matchBatch, matchBoard } from '../../tests/support/step-batch';
import { AchievementStep } from './achievements';
import { markAndReadTenants, readTenants, VersionedLoads, type TenantDefinitions } from './definitions';
import { ScoringStep } from './scoring';
import { runSteps } from './step';

const T0 = Date.parse('2026-11-20T10:00:00Z');
const batchOf = (tenant: string, n: number, definitions?: ReadonlyMap<string, TenantDefinitions>) =>
  matchBatch(tenant, n, { at: T0, definitions });

/** A Queryable that records the statements it runs. */
function logging(q: Queryable, log: string[]): Queryable {
  return {
    query: (text, params) => {
      log.push(text.replace(/\s+/g, ' ').trim());
      return q.query(text, params);
    },
    exec: (s) => q.exec(s),
  };
}

async function addTenant(sql: Sql, id: string) {
  await sql.query(
    `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at) VALUES ($1, $1, 'x', 'x', now(), now())`,
    [id],
  );
}

describe('tenant definition versions and counts (migration 016) [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
    await addTenant(sql, 'acme');
    await addTenant(sql, 'other');
  });
  afterAll(() => sql.close());

  const defsOf = async (t: string) => (await readTenants(sql, [t])).get(t)!;

  it('every write of a definition moves its tenant’s version or count, in its transaction, and no other tenant’s', async () => {
    expect((await defsOf('acme')).versions).toEqual({
      leaderboards: 0,
      earning_rules: 0,
      streak_definitions: 0,
    });
    await createBoard(sql, matchBoard('acme', 'b1'), T0);
    expect((await defsOf('acme')).versions.leaderboards).toBe(1);
    await sql.query(`UPDATE leaderboards SET status = 'archived' WHERE tenant_id = 'acme' AND id = 'b1'`);
    expect((await defsOf('acme')).versions.leaderboards).toBe(2);
    await sql.query(`DELETE FROM leaderboards WHERE tenant_id = 'acme' AND id = 'b1'`);
    expect((await defsOf('acme')).versions.leaderboards).toBe(3);
    // Rolled back with the write.
    await expect(
      sql.tx(async (q) => {
        await createBoard(q, matchBoard('acme', 'b2'), T0);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect((await defsOf('acme')).versions.leaderboards).toBe(3);

    await sql.query(
      `INSERT INTO achievements (tenant_id, id, name, criteria, created_at, updated_at)
       VALUES ('acme', 'a1', 'a1', '{}', now(), now()), ('acme', 'a2', 'a2', '{}', now(), now())`,
    );
    await sql.query(
      `INSERT INTO level_systems (tenant_id, id, name, currency_id, levels, created_at, updated_at)
       VALUES ('acme', 'l1', 'l1', 'xp', '[]', now(), now())`,
    );
    expect((await defsOf('acme')).counts).toEqual({
      achievements: 2,
      tiers: 0,
      level_systems: 1,
      webhooks: 0,
    });
    await sql.query(`UPDATE achievements SET active = false WHERE tenant_id = 'acme' AND id = 'a1'`);
    await sql.query(`DELETE FROM achievements WHERE tenant_id = 'acme' AND id = 'a2'`);
    expect((await defsOf('acme')).counts).toEqual({
      achievements: 1,
      tiers: 0,
      level_systems: 1,
      webhooks: 0,
    });
    // Webhook endpoints count whatever their state; the count follows inserts and deletes.
    const hook = (id: string) =>
      sql.query(
        `INSERT INTO webhooks (id, tenant_id, url, event_types, active, secret_enc, created_at, updated_at)
         VALUES ($1, 'acme', 'https://example.com/h', '{currency.earned}', false, 'x', 0, 0)`,
        [id],
      );
    await hook('w1');
    await hook('w2');
    expect((await defsOf('acme')).counts.webhooks).toBe(2);
    await sql.query(`DELETE FROM webhooks WHERE id = 'w1'`);
    expect((await defsOf('acme')).counts.webhooks).toBe(1);
    const other = await defsOf('other');
    expect(other.versions).toEqual({ leaderboards: 0, earning_rules: 0, streak_definitions: 0 });
    expect(other.counts).toEqual({ achievements: 0, tiers: 0, level_systems: 0, webhooks: 0 });
  });

  it('a tenant row inserted after its definitions starts with their counts', async () => {
    await sql.query(
      `INSERT INTO tiers (tenant_id, id, tier_name, tier_level, min_lifetime_points, currency_id, created_at, updated_at)
       VALUES ('early', 't1', 'bronze', 1, 0, 'xp', now(), now())`,
    );
    await sql.query(
      `INSERT INTO webhooks (id, tenant_id, url, event_types, secret_enc, created_at, updated_at)
       VALUES ('w-early', 'early', 'https://example.com/h', '{*}', 'x', 0, 0)`,
    );
    await addTenant(sql, 'early');
    expect((await defsOf('early')).counts).toEqual({
      achievements: 0,
      tiers: 1,
      level_systems: 0,
      webhooks: 1,
    });
  });

  it('dedupe and tenants read in one statement: first occurrences only, every record’s tenant', async () => {
    const ev = (tenant_id: string, event_id: string) => ({ tenant_id, event_id, received_at: T0 });
    const log: string[] = [];
    await sql.tx((q) => markAndReadTenants(logging(q, log), [ev('acme', 'm0')]));
    const r = await sql.tx((q) =>
      markAndReadTenants(logging(q, log), [
        ev('acme', 'm1'),
        ev('acme', 'm0'), // seen by an earlier transaction
        ev('other', 'm1'), // same id, another tenant: new
        ev('acme', 'm1'), // twice in the list: the first one only
        ev('nobody', 'm2'), // no tenant row: new, and missing from the tenants
      ]),
    );
    expect(r.fresh).toEqual([0, 2, 4]);
    expect([...r.definitions.keys()].sort()).toEqual(['acme', 'other']);
    expect(r.definitions.get('acme')).toEqual(await defsOf('acme'));
    expect(log).toHaveLength(2);
    expect(await sql.tx((q) => markAndReadTenants(q, []))).toEqual({ fresh: [], definitions: new Map() });
    // Every event new (their identities are not sent back), then every one seen before.
    const fresh = await sql.tx((q) => markAndReadTenants(q, [ev('acme', 'a1'), ev('other', 'a1')]));
    expect(fresh.fresh).toEqual([0, 1]);
    expect([...fresh.definitions.keys()].sort()).toEqual(['acme', 'other']);
    const again = await sql.tx((q) => markAndReadTenants(q, [ev('other', 'a1'), ev('acme', 'a1')]));
    expect(again.fresh).toEqual([]);
    expect(again.definitions.size).toBe(2);
  });

  it('a tenant without a row is missing from the read (its steps load as before)', async () => {
    expect((await readTenants(sql, ['nobody', 'other'])).has('nobody')).toBe(false);
  });

  it('scoring reads its boards only when the version moved, and nothing for a tenant without boards', async () => {
    await addTenant(sql, 'quiet');
    const step = new ScoringStep();
    const run = async (tenant: string) => {
      const log: string[] = [];
      const r = await sql.tx(async (q) => {
        const lq = logging(q, log);
        const definitions = await readTenants(lq, [tenant]);
        return runSteps(lq, [step], batchOf(tenant, 2, definitions));
      });
      return { log, kinds: r.outcomes.map((o) => o.kind) };
    };
    // First batch: the (empty) boards are read once; then no statement but the tenants' read.
    expect((await run('quiet')).log).toHaveLength(2);
    expect((await run('quiet')).log).toEqual([expect.stringMatching(/^SELECT id, timezone.*FOR KEY SHARE$/)]);
    // A board created between batches applies to the next batch.
    await createBoard(sql, matchBoard('quiet', 'games'), T0);
    const after = await run('quiet');
    expect(after.kinds).toEqual(['ok', 'ok']);
    expect(after.log.some((s) => s.startsWith('SELECT * FROM leaderboards'))).toBe(true);
    expect((await run('quiet')).log.some((s) => s.startsWith('SELECT * FROM leaderboards'))).toBe(false);
  });

  it('a board committed after a batch read its tenants applies from the next batch on', async () => {
    await addTenant(sql, 'racy');
    const step = new ScoringStep();
    const read = () => readTenants(sql, ['racy']);
    const runWith = (definitions: Map<string, TenantDefinitions>) =>
      sql.tx((q) => runSteps(q, [step], batchOf('racy', 1, definitions)));
    const before = await read();
    await runWith(before); // caches "no boards" at this version
    // The batch read its tenants' rows, then a board was committed before its steps ran.
    const stale = await read();
    await createBoard(sql, matchBoard('racy', 'late'), T0);
    expect((await runWith(stale)).outcomes[0]!.kind).toBe('skip');
    // The next batch reads the new version and applies the board.
    expect((await runWith(await read())).outcomes[0]!.kind).toBe('ok');
  });

  it('achievements: no statement for a tenant without achievements; the tenants lock is the pipeline’s', async () => {
    const engine = { advance: jest.fn(async () => ({ changed: [] })) };
    const step = new AchievementStep(engine as never);
    const log: string[] = [];
    await sql.tx(async (q) => {
      const lq = logging(q, log);
      const definitions = await readTenants(lq, ['other']);
      await runSteps(lq, [step], batchOf('other', 1, definitions));
    });
    expect(log).toHaveLength(1);
    // Without `definitions` (a batch built elsewhere), the step locks and reads as before.
    log.length = 0;
    await sql.tx((q) => runSteps(logging(q, log), [step], batchOf('other', 1)));
    expect(log[0]).toMatch(/FROM tenants .*FOR KEY SHARE$/);
    expect(log.length).toBeGreaterThan(1);
  });
});

describe('VersionedLoads', () => {
  it('loads a tenant again only when its version moved; unknown versions are never kept', async () => {
    const cache = new VersionedLoads<string>(2);
    const versions = new Map<string, number>([
      ['a', 1],
      ['b', 1],
    ]);
    const loads: string[][] = [];
    const load = async (ts: string[]) => {
      loads.push(ts);
      return new Map(ts.filter((t) => t !== 'b').map((t) => [t, [`${t}@${versions.get(t) ?? '?'}`]]));
    };
    const get = (ts: string[]) => cache.get(ts, (t) => versions.get(t), load);
    expect(await get(['a', 'b'])).toEqual(new Map([['a', ['a@1']]]));
    expect(await get(['a', 'b'])).toEqual(new Map([['a', ['a@1']]])); // 'b' has none: kept as none
    versions.set('a', 2);
    expect(await get(['a', 'b'])).toEqual(new Map([['a', ['a@2']]]));
    expect(await get(['x'])).toEqual(new Map([['x', ['x@?']]]));
    expect(await get(['x'])).toEqual(new Map([['x', ['x@?']]]));
    expect(loads).toEqual([['a', 'b'], ['a'], ['x'], ['x']]);
    // Bounded: a third tenant evicts the least recently used.
    versions.set('c', 1);
    await get(['c']);
    await get(['a', 'b', 'c']);
    expect(loads.slice(5)).toEqual([['b']]);
  });
});

describe('presence of counted definitions in a transaction', () => {
  it('answers "may have" unless the transaction recorded a count of 0, until it is forgotten', () => {
    const q = {} as Queryable;
    expect(mayHave(q, 'acme', 'tiers')).toBe(true);
    rememberCounts(q, new Map([['acme', { achievements: 0, tiers: 0, level_systems: 2, webhooks: 0 }]]));
    expect(mayHave(q, 'acme', 'tiers')).toBe(false);
    expect(mayHave(q, 'acme', 'level_systems')).toBe(true);
    expect(mayHave(q, 'other', 'tiers')).toBe(true);
    expect(mayHave({} as Queryable, 'acme', 'tiers')).toBe(true);
    forgetCounts(q);
    expect(mayHave(q, 'acme', 'tiers')).toBe(true);
  });
});
