/**
 * Warm-up of the ingest gateway before it listens (issue 19). Synthetic bulk bodies of a synthetic
 * tenant go through the bulk route's own steps: JSON parsing, the bulk schema, each event's
 * validation and record (parseEvent), the Avro encoding, the key partitioner and the producer, and
 * are appended to a topic of their own (WARM_UP_TOPIC, `ludus.warm-up`) that nothing consumes and
 * Kafka keeps for an hour. What gets warm: this code, ajv's and avsc's, kafkajs's producer and its
 * connection, and the broker's produce path, so that the first real load does not find a cold
 * process that takes a whole core for its first second (docs/performance.md, twentieth pass).
 *
 * What stays untouched: the events topic, every tenant's data, the metrics (no request is served).
 * A failed warm-up is logged and the gateway starts cold: it is an optimisation, never a gate.
 */
import type { EventLog } from '../adapters/eventlog/types';
import type { Principal } from '../http/auth/authenticator';
import { schemas } from '../http/validate';
import { eventKey, WARM_UP_TOPIC, type EventRecord } from '../schemas/topics';
import type { Logger } from '../shared/logger';
import { parseEvent } from './events';

/** The synthetic tenant of the warm-up's events (they reach no tenant's topic or store). */
export const WARM_UP_TENANT = 'ludus-warm-up';

/** Bulk requests the warm-up has in flight at once, as concurrent clients would. */
const CONCURRENCY = 8;
/** Events per synthetic bulk body: the most a bulk request takes. */
const PER_BULK = 100;

export interface IngestWarmUpResult {
  /** Synthetic events appended to WARM_UP_TOPIC. */
  events: number;
  ms: number;
  /** Why the warm-up stopped early, if it did. */
  failed?: string;
}

/** A bulk body as a client sends it: varied users, types and attributes. */
function syntheticBody(n: number, now: number): string {
  const events = Array.from({ length: PER_BULK }, (_, i) => {
    const k = n * PER_BULK + i;
    return {
      event_id: `warm-up-${n}-${i}`,
      type: k % 3 === 0 ? 'purchase_completed' : 'match_finished',
      actor: {
        user_id: `warm-up-user-${k % 5000}`,
        ...(k % 7 === 0 ? { metadata: { platform: 'ios' } } : {}),
      },
      occurred_at: new Date(now - (k % 60) * 1000).toISOString(),
      attrs: {
        mode: k % 2 ? 'ranked' : 'casual',
        kills: k % 13,
        assists: k % 5,
        region: 'eu',
        amount: k % 100,
      },
    };
  });
  return JSON.stringify({ events });
}

/**
 * Appends synthetic bulks to WARM_UP_TOPIC, CONCURRENCY at a time, until `budgetMs` has passed
 * (at least one bulk). A budget of 0 does nothing.
 */
export async function warmUpIngest(
  deps: { eventLog: EventLog; log: Logger; now: () => number },
  o: { budgetMs: number },
): Promise<IngestWarmUpResult> {
  if (o.budgetMs <= 0) return { events: 0, ms: 0 };
  const started = performance.now();
  const principal: Principal = { kind: 'tenant', tenantId: WARM_UP_TENANT, via: 'jwt' };
  const validateBulk = schemas().get('event.bulk');
  let events = 0;
  let next = 0;
  let failed: string | undefined;
  const fail = (err: unknown) => (failed ??= err instanceof Error ? err.message : String(err));
  await deps.eventLog.ensureTopic(WARM_UP_TOPIC).catch(fail);
  // Each worker stops at its first error or when the budget is spent; none outlives this call.
  if (failed === undefined)
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        try {
          do {
            const now = deps.now();
            const body = JSON.parse(syntheticBody(next++, now)) as { events: unknown[] };
            if (!validateBulk(body)) throw new Error('a synthetic bulk body failed the bulk schema');
            const records: EventRecord[] = [];
            for (const raw of body.events) {
              const p = parseEvent(raw, { tenantId: WARM_UP_TENANT, principal, now, allowFlat: false });
              if (!p.ok) throw new Error(`a synthetic event was refused: ${p.reason}`);
              records.push(p.record);
            }
            await deps.eventLog.append(
              WARM_UP_TOPIC,
              records.map((r) => ({ key: eventKey(r.tenant_id, r.user_id), value: r })),
            );
            events += records.length;
          } while (performance.now() - started < o.budgetMs && failed === undefined);
        } catch (err) {
          fail(err);
        }
      }),
    );
  const result = { events, ms: Math.round(performance.now() - started), ...(failed ? { failed } : {}) };
  if (failed)
    deps.log.warn({ events, ms: result.ms, err: failed }, 'ingest warm-up failed; the gateway starts cold');
  else
    deps.log.info(
      { events, ms: result.ms, topic: WARM_UP_TOPIC.name },
      'ingest warmed up on synthetic events (a topic nothing consumes)',
    );
  return result;
}
