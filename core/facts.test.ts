/**
 * The fact bus on a real SQL store (PGlite): subscribers run in registration order inside the
 * emitter's transaction and roll back with it; the depth guard stops loops.
 */
import type { Queryable, Sql } from '../adapters/sql/types';
import { openTestPglite } from '../tests/support/stack';
import { FactBus, FactDepthError, type FactSpec } from './facts';

/** A catalogue of test facts: `ping` and `pong` answer nothing, `ask` answers a number. */
interface TestFacts {
  ping: FactSpec<{ n: number }>;
  pong: FactSpec<{ n: number }>;
  ask: FactSpec<{ n: number }, number>;
}

const log = (q: Queryable, what: string) => q.query('INSERT INTO fact_log (what) VALUES ($1)', [what]);
const logged = async (sql: Sql) =>
  (await sql.query<{ what: string }>('SELECT what FROM fact_log ORDER BY id')).rows.map((r) => r.what);

describe('fact bus [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
    await sql.exec('CREATE TABLE fact_log (id serial PRIMARY KEY, what text NOT NULL)');
  });
  afterAll(() => sql.close());
  beforeEach(() => sql.exec('TRUNCATE fact_log'));

  it('runs the subscribers of a fact in registration order, each with the whole batch, and answers their replies', async () => {
    const bus = new FactBus<TestFacts>().register(
      {
        feature: 'a',
        on: { ping: async (q, fs) => void (await log(q, `a:${fs.map((f) => f.n).join(',')}`)) },
      },
      { feature: 'b', on: { pong: async (q) => void (await log(q, 'b:pong')) } },
      {
        feature: 'c',
        on: {
          ping: async (q, fs) => void (await log(q, `c:${fs.map((f) => f.n).join(',')}`)),
          ask: async (_q, fs) => fs.length * 10,
        },
      },
      { feature: 'd', on: { ask: async () => undefined } },
      { feature: 'e', on: { ask: async (_q, fs) => fs[0]!.n } },
    );
    expect(bus.subscribersOf('ping')).toEqual(['a', 'c']);
    expect(bus.subscribersOf('ask')).toEqual(['c', 'd', 'e']);
    const replies = await sql.tx(async (q) => {
      await bus.emit(q, 'ping', [{ n: 1 }, { n: 2 }]);
      await bus.emit(q, 'ping', []); // an empty batch calls nobody
      await bus.emit(q, 'pong', [{ n: 3 }]);
      return bus.emit(q, 'ask', [{ n: 7 }, { n: 8 }]);
    });
    expect(await logged(sql)).toEqual(['a:1,2', 'c:1,2', 'b:pong']);
    // Replies in subscriber order; a subscriber answering nothing adds none.
    expect(replies).toEqual([20, 7]);
  });

  it('refuses a feature subscribing to one fact twice', () => {
    const bus = new FactBus<TestFacts>().register({ feature: 'a', on: { ping: async () => undefined } });
    expect(() => bus.register({ feature: 'a', on: { ping: async () => undefined } })).toThrow(
      /feature a subscribes to ping twice/,
    );
  });

  it('commits the reactions with their cause, and rolls both back when a later subscriber throws', async () => {
    let fail = false;
    const bus = new FactBus<TestFacts>().register(
      { feature: 'writer', on: { ping: async (q, [f]) => void (await log(q, `reaction ${f!.n}`)) } },
      {
        feature: 'chain',
        on: {
          ping: async (q, [f]) => void (await bus.emit(q, 'pong', [{ n: f!.n }])),
          pong: async (q, [f]) => {
            await log(q, `nested ${f!.n}`);
            if (fail) throw new Error('reaction refused');
          },
        },
      },
    );
    const cause = (n: number) =>
      sql.tx(async (q) => {
        await log(q, `cause ${n}`);
        await bus.emit(q, 'ping', [{ n }]);
      });

    await cause(1);
    expect(await logged(sql)).toEqual(['cause 1', 'reaction 1', 'nested 1']);

    fail = true;
    await expect(cause(2)).rejects.toThrow('reaction refused');
    // Nothing of the second transaction stays: not the cause, not the first reaction.
    expect(await logged(sql)).toEqual(['cause 1', 'reaction 1', 'nested 1']);
  });

  it("runs subscribers on the emitter's SQL handle", async () => {
    const seen: Queryable[] = [];
    const bus = new FactBus<TestFacts>().register({
      feature: 'a',
      on: { ping: async (q) => void seen.push(q) },
    });
    let handle: Queryable | undefined;
    await sql.tx(async (q) => {
      handle = q;
      await bus.emit(q, 'ping', [{ n: 1 }]);
    });
    expect(seen).toEqual([handle]);
  });

  it('counts depth: +1 per nesting, not per sibling emit, back to 0 after a subscriber returns', async () => {
    const depths: Array<[string, number]> = [];
    const bus: FactBus<TestFacts> = new FactBus<TestFacts>().register({
      feature: 'a',
      on: {
        ping: async (q, [f]) => {
          depths.push([`ping ${f!.n}`, bus.depth()]);
          await bus.emit(q, 'pong', [{ n: 1 }]);
          await bus.emit(q, 'pong', [{ n: 2 }]);
        },
        pong: async (_q, [f]) => void depths.push([`pong ${f!.n}`, bus.depth()]),
      },
    });
    expect(bus.depth()).toBe(0);
    await sql.tx((q) => bus.emit(q, 'ping', [{ n: 0 }]));
    expect(depths).toEqual([
      ['ping 0', 1],
      ['pong 1', 2],
      ['pong 2', 2],
    ]);
    expect(bus.depth()).toBe(0);
  });

  it('stops a loop at the depth limit with FactDepthError and rolls the transaction back', async () => {
    let calls = 0;
    const bus: FactBus<TestFacts> = new FactBus<TestFacts>({ maxDepth: 5 }).register(
      {
        feature: 'ping-to-pong',
        on: {
          ping: async (q, [f]) => {
            calls++;
            await log(q, `ping ${f!.n}`);
            await bus.emit(q, 'pong', [{ n: f!.n + 1 }]);
          },
        },
      },
      {
        feature: 'pong-to-ping',
        on: {
          pong: async (q, [f]) => {
            calls++;
            await bus.emit(q, 'ping', [{ n: f!.n + 1 }]);
          },
        },
      },
    );
    const err = await sql
      .tx(async (q) => {
        await log(q, 'cause');
        await bus.emit(q, 'ping', [{ n: 1 }]);
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FactDepthError);
    expect((err as FactDepthError).chain).toEqual(['ping', 'pong', 'ping', 'pong', 'ping', 'pong']);
    expect((err as Error).message).toMatch(/fact depth limit 5 exceeded .*: ping -> pong -> ping/);
    expect(calls).toBe(5); // depths 1..5 ran; the emit at depth 6 threw
    expect(await logged(sql)).toEqual([]);

    // A chain within the limit is fine.
    const shallow: FactBus<TestFacts> = new FactBus<TestFacts>({ maxDepth: 2 }).register({
      feature: 'a',
      on: { ping: (q) => shallow.emit(q, 'pong', [{ n: 1 }]).then(() => undefined) },
    });
    await expect(sql.tx((q) => shallow.emit(q, 'ping', [{ n: 1 }]))).resolves.toEqual([]);
  });

  it('keeps the depth of concurrent transactions apart', async () => {
    const seen: number[] = [];
    const bus: FactBus<TestFacts> = new FactBus<TestFacts>({ maxDepth: 3 }).register({
      feature: 'a',
      on: {
        ping: async (q, [f]) => {
          await new Promise((r) => setTimeout(r, 5));
          if (f!.n < 2) await bus.emit(q, 'ping', [{ n: f!.n + 1 }]);
          seen.push(bus.depth());
        },
      },
    });
    // Three chains 3 deep, interleaved (PGlite runs transactions one at a time, so the emits go
    // straight to the store's handle here): were depths shared, they would pass the limit.
    await Promise.all([0, 1, 2].map(() => bus.emit(sql, 'ping', [{ n: 0 }])));
    expect(seen.sort()).toEqual([1, 1, 1, 2, 2, 2, 3, 3, 3]);
  });
});
