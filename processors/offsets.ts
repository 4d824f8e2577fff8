import type { Queryable } from '../adapters/sql/types';

/**
 * Consumer offsets kept in SQL (table consumer_offsets), written in the same transaction as the
 * state a batch produced, and read back to resume on start and on every reassignment.
 */
export async function readOffsets(
  q: Queryable,
  group: string,
  topic: string,
  partitions: number[],
): Promise<Map<number, number>> {
  const r = await q.query<{ partition: number; next_offset: number }>(
    'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2 AND partition = ANY($3::int[])',
    [group, topic, partitions],
  );
  return new Map(r.rows.map((row) => [row.partition, Number(row.next_offset)]));
}

/** Stores the next offset to read; never moves backwards. */
export async function storeOffset(
  q: Queryable,
  group: string,
  topic: string,
  partition: number,
  nextOffset: number,
): Promise<void> {
  await q.query(
    `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, $4)
     ON CONFLICT (group_id, topic, partition) DO UPDATE
       SET next_offset = GREATEST(consumer_offsets.next_offset, EXCLUDED.next_offset), updated_at = now()`,
    [group, topic, partition, nextOffset],
  );
}
