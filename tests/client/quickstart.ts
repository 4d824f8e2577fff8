/**
 * The README's quick start as a client program would write it: typed clients generated from the
 * three gateways' OpenAPI documents (openapi-typescript, into ./generated/ by
 * tests/e2e/client.test.ts) and openapi-fetch. Creates a board (admin gateway), sends an event
 * (ingestion gateway), reads the board's page (query gateway) and prints the page as JSON.
 *
 *   node --import tsx tests/client/quickstart.ts   (env: ADMIN_URL INGEST_URL QUERY_URL API_KEY TENANT_ID TENANT_JWT)
 *
 * Type-checked on its own (tests/client/tsconfig.json): a response the document types as `never`
 * or a body it does not accept fails the check.
 */
import createClient from 'openapi-fetch';
import type { paths as AdminPaths } from './generated/admin';
import type { paths as IngestPaths } from './generated/ingest';
import type { paths as QueryPaths } from './generated/query';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

async function main(): Promise<void> {
  const tenantId = env('TENANT_ID');
  const admin = createClient<AdminPaths>({
    baseUrl: env('ADMIN_URL'),
    headers: { 'X-API-Key': env('API_KEY') },
  });
  const ingest = createClient<IngestPaths>({
    baseUrl: env('INGEST_URL'),
    headers: { Authorization: `Bearer ${env('TENANT_JWT')}` },
  });
  const query = createClient<QueryPaths>({
    baseUrl: env('QUERY_URL'),
    headers: { Authorization: `Bearer ${env('TENANT_JWT')}` },
  });

  const board = await admin.POST('/v1/leaderboards', {
    params: { query: { tenant_id: tenantId } },
    body: {
      leaderboard_id: 'weekly-kills',
      name: 'Weekly kills',
      config: {
        timeframe: { type: 'all_time' },
        scoring: {
          rules: [{ event_type: 'match_finished', points_expression: 'attrs.kills' }],
          aggregation: 'sum',
        },
      },
    },
  });
  if (!board.data) throw new Error(`create board: ${JSON.stringify(board.error)}`);
  const boardId: string = board.data.leaderboard_id;

  const sent = await ingest.POST('/v1/events', {
    body: {
      event_id: 'evt-quickstart-1',
      type: 'match_finished',
      actor: { user_id: 'alice' },
      occurred_at: new Date().toISOString(),
      attrs: { kills: 7 },
    },
  });
  if (!sent.data) throw new Error(`send event: ${JSON.stringify(sent.error)}`);
  const eventId: string = sent.data.event_id;

  // The pipeline scores the event asynchronously: read the page until alice is on it.
  for (let attempt = 0; attempt < 150; attempt++) {
    const page = await query.GET('/v1/leaderboards/{leaderboard_id}', {
      params: { path: { leaderboard_id: boardId } },
    });
    if (!page.data) throw new Error(`read page: ${JSON.stringify(page.error)}`);
    const first = page.data.entries[0];
    if (first) {
      const out: { event_id: string; user_id: string; score: number; rank: number } = {
        event_id: eventId,
        user_id: first.user_id,
        score: first.score,
        rank: first.rank,
      };
      process.stdout.write(`${JSON.stringify(out)}\n`);
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the event never showed on the page');
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
