/**
 * Micro-benchmark of the wallet's own CPU for a batch of credits (issue 19: `core/wallet/wallet.ts`
 * was 9 % of the distributed processor's profile): `creditMany` of 1,000 keyed credits (the
 * pipeline's earning rules: one currency, 1,000 users out of 10,000), with a stand-in SQL
 * connection that answers each statement as a store holding the balances would (no keys seen
 * before), so only the wallet's JavaScript is timed. Prints milliseconds per batch; compare
 * commits by running it on each, one right after the other.
 *
 *   npx tsx bench/wallet-credits.ts [batches]
 */
import type { Queryable, QueryResult } from '../adapters/sql/types';
import { FactBus } from '../core/facts';
import { Wallet } from '../core/wallet/wallet';

async function main(): Promise<void> {
  const batches = Number(process.argv[2] ?? 300);
  const currency = { tenant_id: 'bench', id: 'coins', active: true, accumulate_only: false };
  const answer = (text: string, params: unknown[] = []): QueryResult<Record<string, unknown>> => {
    if (text.includes('FROM currencies')) return { rows: [currency], rowCount: 1 };
    if (text.includes('FROM balances b')) {
      const [t, u, c] = params as string[][];
      const rows = t.map((_, i) => ({
        tenant_id: t[i],
        user_id: u[i],
        currency_id: c[i],
        available: '100',
        lifetime_earned: '100',
      }));
      return { rows, rowCount: rows.length };
    }
    return { rows: [], rowCount: 0 };
  };
  const q: Queryable = {
    query: async <R>(text: string, params?: unknown[]) => answer(text, params) as QueryResult<R>,
    exec: async () => undefined,
  };
  const wallet = new Wallet(new FactBus());
  let seed = 1;
  const rand = () => (seed = (seed * 48271) % 0x7fffffff) / 0x7fffffff;
  const batch = () =>
    Array.from({ length: 1000 }, (_, i) => {
      const user = `user-${Math.floor(rand() * 10_000)}`;
      const id = `${seed}-${i}`;
      return {
        tenant_id: 'bench',
        user_id: user,
        currency_id: 'coins',
        amount: 5,
        source_type: 'earning_rule',
        source_ref: `rule-1:${id}`,
        description: 'Bench rule',
        idempotency_key: `earning:rule-1:${id}`,
        now: Date.now(),
      };
    });
  const inputs = Array.from({ length: 20 }, batch);
  for (let i = 0; i < 50; i++) await wallet.creditMany(q, inputs[i % inputs.length]!); // warm-up (JIT)
  const t = performance.now();
  for (let i = 0; i < batches; i++) await wallet.creditMany(q, inputs[i % inputs.length]!);
  const ms = (performance.now() - t) / batches;
  process.stdout.write(`wallet: ${ms.toFixed(2)} ms per batch of 1,000 credits (${batches} batches)\n`);
}

void main();
