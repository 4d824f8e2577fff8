/**
 * What the generated types must refuse (type-checked with quickstart.ts, never run): each line
 * below is an error the document's types must report, so an unused `@ts-expect-error` (a type that
 * went `never` or `any`) fails the check.
 */
import createClient from 'openapi-fetch';
import type { paths as IngestPaths } from './generated/ingest';
import type { paths as QueryPaths } from './generated/query';

export async function refusals(): Promise<void> {
  const ingest = createClient<IngestPaths>({ baseUrl: 'http://127.0.0.1:8080' });
  const query = createClient<QueryPaths>({ baseUrl: 'http://127.0.0.1:8082' });
  // @ts-expect-error an event needs an actor
  await ingest.POST('/v1/events', { body: { event_id: 'e', type: 't', occurred_at: 'now' } });
  const page = await query.GET('/v1/leaderboards/{leaderboard_id}', {
    params: { path: { leaderboard_id: 'b' } },
  });
  if (page.data) {
    // @ts-expect-error a page's entries carry no such field
    void page.data.entries[0]?.no_such_field;
    // @ts-expect-error a score is a number
    const s: string = page.data.entries[0]!.score;
    void s;
  }
  // @ts-expect-error the path parameter is required
  await query.GET('/v1/leaderboards/{leaderboard_id}', {});
}
