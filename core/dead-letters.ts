/**
 * Reading the dead_letters table for operators: the route `GET /v1/operator/dead-letters` and the
 * command `ludus dead-letters list` both use `listDeadLetters` (docs/operations.md "Dead letters").
 * Newest first; `next_cursor` (the id of the last row) pages on to older ones.
 */
import type { Queryable } from '../adapters/sql/types';

export interface DeadLetterFilter {
  /** The consumer group, e.g. `ludus.pipeline`. */
  consumer?: string;
  partition?: number;
  /** Page size, 1 to 1000 (default 100). */
  limit?: number;
  /** `next_cursor` of the previous page. */
  cursor?: string;
}

export interface DeadLetterView {
  id: string;
  consumer: string;
  topic: string;
  partition: number;
  offset: number;
  key: string;
  reason: string;
  /** The record as it was in the log (parsed JSON). */
  payload: unknown;
  created_at: string;
}

export interface DeadLetterPage {
  dead_letters: DeadLetterView[];
  next_cursor: string | null;
}

export const DEFAULT_DEAD_LETTER_LIMIT = 100;
export const MAX_DEAD_LETTER_LIMIT = 1000;

export async function listDeadLetters(q: Queryable, f: DeadLetterFilter = {}): Promise<DeadLetterPage> {
  const limit = Math.min(Math.max(1, f.limit ?? DEFAULT_DEAD_LETTER_LIMIT), MAX_DEAD_LETTER_LIMIT);
  if (f.cursor !== undefined && !/^[0-9]{1,18}$/.test(f.cursor))
    throw new RangeError('cursor must be the next_cursor of a previous page');
  const r = await q.query<{
    id: string | number;
    group_id: string;
    topic: string;
    partition: number;
    offset: string | number;
    key: string;
    reason: string;
    payload: string;
    created_at: Date | string;
  }>(
    `SELECT id, group_id, topic, partition, "offset", key, reason, payload, created_at FROM dead_letters
     WHERE ($1::text IS NULL OR group_id = $1) AND ($2::int IS NULL OR partition = $2)
       AND ($3::bigint IS NULL OR id < $3)
     ORDER BY id DESC LIMIT $4`,
    [f.consumer ?? null, f.partition ?? null, f.cursor ?? null, limit + 1],
  );
  const rows = r.rows.slice(0, limit);
  return {
    dead_letters: rows.map((x) => ({
      id: String(x.id),
      consumer: x.group_id,
      topic: x.topic,
      partition: Number(x.partition),
      offset: Number(x.offset),
      key: x.key,
      reason: x.reason,
      payload: parsePayload(x.payload),
      created_at: new Date(x.created_at).toISOString(),
    })),
    next_cursor: r.rows.length > limit ? String(rows[rows.length - 1]!.id) : null,
  };
}

function parsePayload(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}
