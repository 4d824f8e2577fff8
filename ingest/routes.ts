/**
 * The Ingestion Gateway's event routes. An event is accepted (202, or 200 on the signed variant)
 * only once the event log holds it durably; processing happens in the pipeline.
 */
import type { EventLog } from '../adapters/eventlog/types';
import type { Clock } from '../core/clock';
import { EVENTS_TOPIC, eventKey, type EventRecord } from '../schemas/topics';
import { ApiError, errors } from '../http/errors';
import { route, type RouteRequest, type RouteSpec } from '../http/route';
import { signedErrors } from '../http/auth/authenticator';
import { parseEvent } from './events';

export interface IngestDeps {
  eventLog: EventLog;
  clock: Clock;
}

const auth = { kind: 'tenant', signed: true } as const;

function isSigned(req: RouteRequest<unknown, unknown>): boolean {
  return req.principal?.kind === 'tenant' && req.principal.via === 'signature';
}

async function append(deps: IngestDeps, records: EventRecord[]): Promise<void> {
  try {
    await deps.eventLog.append(
      EVENTS_TOPIC,
      records.map((r) => ({ key: eventKey(r.tenant_id, r.user_id), value: r })),
    );
  } catch (err) {
    throw new ApiError(
      503,
      'SERVICE_UNAVAILABLE',
      `The event log did not accept the events; retry (${(err as Error).message})`,
    );
  }
}

export function ingestRoutes(deps: IngestDeps): RouteSpec[] {
  return [
    route({
      gateway: 'ingest',
      method: 'POST',
      path: '/v1/events',
      summary: 'Send one event; 202 once the event log holds it (200 on the signed-request variant)',
      tag: 'Events',
      auth,
      bodyRule: 'handler',
      accepts: ['event', 'event.flat'],
      status: 202,
      response: 'event.accepted.view',
      alsoAnswers: { 200: 'event.accepted.view' },
      errors: [503],
      handler: async (req) => {
        const signed = isSigned(req);
        // An empty body: VAL_001 on the signed variant (http/route.ts), 400 otherwise.
        if (req.body === undefined) throw errors.validation('Request body is required');
        const parsed = parseEvent(req.body, {
          tenantId: req.tenant.id,
          principal: req.principal!,
          now: deps.clock.now(),
          allowFlat: signed,
        });
        if (!parsed.ok) {
          if (parsed.forbidden) throw errors.forbidden(parsed.reason);
          if (signed)
            throw signedErrors.invalid(
              /is required/.test(parsed.reason) ? 'VAL_001' : 'VAL_002',
              parsed.reason,
            );
          throw errors.validation(parsed.reason);
        }
        await append(deps, [parsed.record]);
        req.ctx.status = signed ? 200 : 202;
        return { status: 'accepted', event_id: parsed.record.event_id };
      },
    }),
    route({
      gateway: 'ingest',
      method: 'POST',
      path: '/v1/events/bulk',
      summary: 'Send 1 to 100 events, each validated on its own; results per event',
      tag: 'Events',
      auth,
      body: 'event.bulk',
      bodyRule: 'handler',
      status: 202,
      response: 'event.bulk.view',
      alsoAnswers: { 200: 'event.bulk.view' },
      errors: [503],
      handler: async (req) => {
        const signed = isSigned(req);
        const now = deps.clock.now();
        const { events } = req.body;
        const results: Array<{ event_id: string | null; status: 'accepted' | 'failed'; error?: string }> = [];
        const accepted: EventRecord[] = [];
        for (const raw of events) {
          const p = parseEvent(raw, {
            tenantId: req.tenant.id,
            principal: req.principal!,
            now,
            allowFlat: signed,
          });
          if (p.ok) {
            accepted.push(p.record);
            results.push({ event_id: p.record.event_id, status: 'accepted' });
          } else {
            results.push({ event_id: p.event_id, status: 'failed', error: `Validation failed: ${p.reason}` });
          }
        }
        if (accepted.length > 0) await append(deps, accepted);
        req.ctx.status = signed ? 200 : 202;
        const failed = events.length - accepted.length;
        return {
          status: failed === 0 ? 'accepted' : accepted.length === 0 ? 'failed' : 'partial',
          total: events.length,
          accepted: accepted.length,
          failed,
          results,
        };
      },
    }),
  ];
}
