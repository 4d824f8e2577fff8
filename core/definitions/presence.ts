/**
 * What one transaction already knows about its tenants' definitions (issue 19: fewer statements
 * per pipeline batch). The pipeline reads, with the batch's tenants' rows, how many definitions
 * each tenant has of the features that react to facts (tiers, level systems, achievements:
 * migration 016 keeps the counts in the transaction of every definition write; webhook endpoints,
 * for the outbox: migration 018), and records them here for its transaction; a fact subscriber
 * running in that transaction asks `mayHave` before reading its definitions (or, the outbox,
 * before writing an event), and skips it when the tenant has none.
 *
 * Semantics: the counts are those committed when the batch read its tenants' rows; a definition
 * created after that read applies from the next batch on (the same as a definition created after a
 * batch's load read before). A transaction that recorded nothing (API requests, jobs, tests) reads
 * as before: `mayHave` answers true when it does not know.
 */
import type { Queryable } from '../../adapters/sql/types';

/** `webhooks`: the tenant's webhook endpoints (migration 018), read by the outbox. */
export type CountedFeature = 'achievements' | 'tiers' | 'level_systems' | 'webhooks';

/** Per tenant: its number of definitions of each counted feature. */
export type DefinitionCounts = Readonly<Record<CountedFeature, number>>;

const known = new WeakMap<Queryable, ReadonlyMap<string, DefinitionCounts>>();

/** Records, for the transaction `q`, the counts it read (tenants missing from the map: unknown). */
export function rememberCounts(q: Queryable, counts: ReadonlyMap<string, DefinitionCounts>): void {
  known.set(q, counts);
}

/** False only when the transaction read that the tenant has no definition of the feature. */
export function mayHave(q: Queryable, tenantId: string, feature: CountedFeature): boolean {
  const c = known.get(q)?.get(tenantId);
  return c === undefined || c[feature] > 0;
}

/** Forgets what `q` recorded (the pipeline, once its steps ran). */
export function forgetCounts(q: Queryable): void {
  known.delete(q);
}
