/**
 * Warm-up of a processor before it takes load (issue 19): the processor applies synthetic records
 * of its own making (`Processor.rehearsal`), exactly as the framework applies a round (write-behind
 * included), in transactions that always roll back. What gets warm: the processor's JavaScript
 * (V8 optimises what has run), the store's code (PGlite's WebAssembly reaches V8's optimising tier
 * the same way), the store's connections (one per transaction in flight) and their plans.
 *
 * What stays untouched: nothing is committed (the synthetic tenant, its definitions and every
 * effect roll back with the transaction), no offset is read or stored, `afterCommit` never runs (so
 * derived indexes such as the rank index see nothing), and no metric counts a synthetic record.
 * A failed warm-up is logged and the process goes on cold: it is an optimisation, never a gate.
 */
import type { Queryable, Sql } from '../adapters/sql/types';
import { WriteBehind } from '../core/write-behind';
import type { Logger } from '../shared/logger';
import type { ApplyBatch, Processor } from './framework';

/** Synthetic work a processor can apply in a transaction that rolls back. */
export interface Rehearsal<T> {
  /** Writes what the synthetic records need (a tenant, its definitions) in the transaction. */
  prepare(q: Queryable): Promise<void>;
  /** Synthetic round `n` (from 0); the rounds are applied one after the other in one transaction. */
  round(n: number): ApplyBatch<T>;
}

export interface WarmUpResult {
  /** Synthetic records applied (and rolled back). */
  records: number;
  ms: number;
  /** Why the warm-up stopped early, if it did. */
  failed?: string;
}

/**
 * Rounds per rehearsal transaction. The locks a transaction takes (the wallet's one per
 * idempotency key, achievements' one per user) are held to its end, in a lock table all sessions
 * share: one transaction for the whole budget ran out of it after about 16,000 records
 * (SQLSTATE 53200) on a fast machine.
 */
const ROUNDS_PER_TRANSACTION = 4;

/** Thrown inside the transaction to roll it back; never leaves this module. */
class RollBack extends Error {}

/**
 * Runs `transactions` rehearsals at once (each with its own synthetic data and store connection),
 * round after round, a new transaction (and rehearsal) every ROUNDS_PER_TRANSACTION rounds, until
 * `budgetMs` has passed (at least one round each); every transaction rolls back.
 * A budget of 0 does nothing.
 */
export async function warmUp<T>(
  deps: { sql: Sql; log: Logger },
  p: Processor<T> & { rehearsal(): Rehearsal<T> },
  o: { budgetMs: number; transactions: number },
): Promise<WarmUpResult> {
  if (o.budgetMs <= 0) return { records: 0, ms: 0 };
  const started = performance.now();
  let records = 0;
  let failed: string | undefined;
  const spent = () => performance.now() - started >= o.budgetMs;
  await Promise.all(
    Array.from({ length: Math.max(1, o.transactions) }, async () => {
      try {
        do {
          // A new rehearsal (its own synthetic tenant) per transaction.
          const r = p.rehearsal();
          await deps.sql
            .tx(async (q) => {
              await r.prepare(q);
              for (let n = 0; n < ROUNDS_PER_TRANSACTION && (n === 0 || !spent()); n++) {
                const wq = new WriteBehind(q);
                const res = await p.apply(wq, r.round(n));
                await wq.settle();
                records += res.outcomes.length;
              }
              throw new RollBack();
            })
            .catch((err: unknown) => {
              if (!(err instanceof RollBack)) throw err;
            });
        } while (!spent());
      } catch (err) {
        failed ??= err instanceof Error ? err.message : String(err);
      }
    }),
  );
  const result = { records, ms: Math.round(performance.now() - started), ...(failed ? { failed } : {}) };
  if (failed)
    deps.log.warn(
      { processor: p.group, records, ms: result.ms, err: failed },
      'warm-up failed; the processor starts cold',
    );
  else
    deps.log.info(
      { processor: p.group, records, ms: result.ms },
      'warmed up on synthetic records (rolled back)',
    );
  return result;
}
