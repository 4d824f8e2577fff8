/**
 * A hand-made pipeline batch for tests of steps: `n` `match` events of user u1 of one tenant at
 * `at`, on partition 0 from `firstOffset` on, with fresh event ids, UTC as the tenant's zone and
 * the batch's clock one second after the events; `definitions` as the pipeline's tenants read
 * returns them (left out: the steps load and lock on their own).
 */
import { eventView } from '../../core/leaderboards/definition';
import type { TenantDefinitions } from '../../processors/pipeline/definitions';
import type { StepBatch } from '../../processors/pipeline/step';
import type { EventRecord } from '../../schemas/topics';

let seq = 0;

export function matchBatch(
  tenant: string,
  n: number,
  opts: { at: number; firstOffset?: number; definitions?: ReadonlyMap<string, TenantDefinitions> },
): StepBatch {
  const first = opts.firstOffset ?? 0;
  const events = Array.from({ length: n }, (_, index) => {
    const event: EventRecord = {
      tenant_id: tenant,
      event_id: `e${seq++}`,
      type: 'match',
      user_id: 'u1',
      occurred_at: opts.at,
      received_at: opts.at,
      attrs_json: '{}',
      actor_metadata_json: null,
      subject_json: null,
    };
    const record = {
      topic: 't',
      partition: 0,
      offset: first + index,
      key: `${tenant}:u1`,
      value: event,
      timestamp: 0,
    };
    return { index, record, event, view: eventView(event) };
  });
  return {
    parts: [{ partition: 0, firstOffset: first, nextOffset: first + n }],
    events,
    replayed: [],
    tenants: [tenant],
    timezones: new Map([[tenant, 'UTC']]),
    now: opts.at + 1000,
    ...(opts.definitions ? { definitions: opts.definitions } : {}),
  };
}

/** A board of `tenant` counting its `match` events over all time, in UTC (what matchBatch sends). */
export const matchBoard = (tenant: string, id: string) => ({
  tenant_id: tenant,
  leaderboard_id: id,
  name: id,
  description: null,
  reward_config_id: null,
  config: {
    timeframe: { type: 'all_time' as const, timezone: 'UTC' },
    scoring: { rules: [{ event_type: 'match' }], aggregation: 'count' as const },
  },
});
