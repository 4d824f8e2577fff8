/**
 * Pipeline step: earning rules (core/wallet/earning.ts). Every (event, rule) credit in order, then
 * the day and week caps over the batch's usage rows (locked once, in key order), then one batched
 * wallet call and one usage upsert: a fixed number of statements per batch. An event is applied
 * when at least one currency was credited for it.
 */
import type { Queryable } from '../../adapters/sql/types';
import {
  applyCaps,
  cappedKeys,
  earningCandidates,
  EarningRules,
  usageKey,
  type ActiveRule,
  type Candidate,
  type Usage,
} from '../../core/wallet/earning';
import { WalletError, type Wallet } from '../../core/wallet/wallet';
import { BatchState } from './batch-state';
import { VersionedLoads } from './definitions';
import {
  applied,
  nothing,
  type PipelineStep,
  type StepBatch,
  type StepEffect,
  type StepReport,
} from './step';

/** Cap usage of the batch's (tenant, rule, user, period) keys: credited amounts add up. */
export const usage = new BatchState<Usage>({
  table: 'earning_usage',
  keys: [
    { column: 'tenant_id', type: 'text' },
    { column: 'rule_id', type: 'text' },
    { column: 'user_id', type: 'text' },
    { column: 'period', type: 'text' },
  ],
  values: [{ column: 'amount', type: 'bigint', merge: 'add' }],
});

/** The wallet's idempotency key of an earning credit: one per (rule, event). */
const creditKey = (c: Candidate): string => `earning:${c.rule.rule_id}:${c.e.event_id}`;

export class EarningStep implements PipelineStep<Map<string, ActiveRule[]>> {
  readonly name = 'earning_rules';
  private readonly rules = new EarningRules();
  private readonly loaded = new VersionedLoads<ActiveRule>();

  constructor(private readonly wallet: Pick<Wallet, 'creditMany' | 'prepareCredits'>) {}

  load(q: Queryable, batch: StepBatch): Promise<Map<string, ActiveRule[]>> {
    if (batch.events.length === 0) return Promise.resolve(new Map());
    // Per tenant, again only when its rules' version moved (./definitions.ts).
    return this.loaded.get(
      batch.tenants,
      (t) => batch.definitions?.get(t)?.versions.earning_rules,
      (tenants) => this.rules.load(q, tenants),
    );
  }

  async apply(q: Queryable, batch: StepBatch, rules: Map<string, ActiveRule[]>): Promise<StepReport> {
    const effects: StepEffect[] = batch.events.map(() => nothing);
    if (rules.size === 0) return { effects };
    const candidates = earningCandidates(
      batch.events.map(({ event, view }) => ({
        tenant_id: event.tenant_id,
        event_id: event.event_id,
        user_id: event.user_id,
        occurred_at: event.occurred_at,
        view,
      })),
      rules,
      batch.timezones,
    );
    if (candidates.length === 0) return { effects };

    // The caps' usage rows, then the wallet's first reads for every candidate (whatever its caps
    // leave of it), sent together: one round trip to the store for both.
    const locking = usage.lock(q, cappedKeys(candidates));
    const prepared = this.wallet.prepareCredits(
      q,
      candidates.map((c) => ({
        tenant_id: c.e.tenant_id,
        currency_id: c.rule.currency_id,
        idempotency_key: creditKey(c),
      })),
    );
    let stored: Map<string, Usage>;
    try {
      stored = await locking;
    } catch (err) {
      await prepared.reads.catch(() => undefined);
      throw err;
    }
    const used = new Map([...stored].map(([k, row]) => [k, row.amount]));
    const granted = applyCaps(candidates, used, (k) => usage.id(k));
    const results = await this.wallet.creditMany(
      q,
      granted.map(({ c, amount }) => ({
        tenant_id: c.e.tenant_id,
        user_id: c.e.user_id,
        currency_id: c.rule.currency_id,
        amount,
        source_type: 'earning_rule',
        source_ref: `${c.rule.rule_id}:${c.e.event_id}`,
        description: c.rule.name,
        idempotency_key: creditKey(c),
        now: batch.now,
      })),
      prepared,
    );
    // An unknown or inactive currency skips the rule (the batch goes on); so does a replayed credit.
    const increments = new Map<string, Usage>();
    results.forEach((r, n) => {
      if (r instanceof WalletError || !r.created) return;
      const { c, amount } = granted[n]!;
      effects[c.i] = applied;
      for (const p of c.periods) {
        const key = usageKey(c, p);
        const k = usage.id(key);
        increments.set(k, { ...key, amount: (increments.get(k)?.amount ?? 0) + amount });
      }
    });
    await usage.upsert(q, [...increments.values()]);
    return { effects };
  }
}
