/**
 * The live leaderboard WebSocket with a real client: first page on connect, pushed updates as
 * scores move, configure and request_page, errors for bad messages, authentication on upgrade.
 */
import { WebSocket } from 'ws';
import { call, createKey, createTenant, startTestApp, tenantToken, type TestApp } from '../support/app';
import { waitFor } from '../support/wait';

describe('live leaderboard over WebSocket [embedded]', () => {
  let app: TestApp;
  let tenant: Awaited<ReturnType<typeof createTenant>>;
  let token: string;
  let n = 0;

  beforeAll(async () => {
    app = await startTestApp('embedded', {
      roles: 'all',
      env: { LUDUS_LIVE_THROTTLE_MS: '100', LUDUS_LIVE_PING_MS: '300' },
    });
    tenant = await createTenant(app);
    token = await tenantToken(tenant);
    const key = (await createKey(app, [tenant.id])).key;
    const r = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body: {
        leaderboard_id: 'live',
        name: 'Live',
        config: {
          timeframe: { type: 'all_time' },
          scoring: { rules: [{ event_type: 'hit', points_expression: 'attrs.p' }], aggregation: 'sum' },
        },
      },
    });
    expect(r.status).toBe(201);
  });
  afterAll(() => app.stop());

  const send = (user: string, p: number) =>
    call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${token}` },
      body: {
        event_id: `live-${++n}`,
        type: 'hit',
        actor: { user_id: user },
        occurred_at: new Date().toISOString(),
        attrs: { p },
      },
    });

  function open(path: string, headers: Record<string, string> = { authorization: `Bearer ${token}` }) {
    const ws = new WebSocket(`${app.url.query.replace('http', 'ws')}${path}`, { headers });
    const messages: any[] = [];
    ws.on('message', (d) => messages.push(JSON.parse(d.toString())));
    return { ws, messages };
  }

  it('sends the first page, pushes changes, and answers configure and request_page', async () => {
    await send('ann', 5);
    await send('bo', 3);
    // A 202 means accepted, not yet ranked: the first page is the board as the socket opens.
    await waitFor(
      async () =>
        (
          await call('GET', `${app.url.query}/v1/leaderboards/live`, {
            headers: { authorization: `Bearer ${token}` },
          })
        ).body.total_entries === 2,
      { what: 'both scores ranked' },
    );
    const { ws, messages } = open('/v1/leaderboards/live/ws');
    try {
      await waitFor(() => messages.some((m) => m.type === 'page' && m.total_entries === 2), {
        what: 'first page',
      });
      const first = messages.find((m) => m.type === 'page');
      expect(first).toMatchObject({
        leaderboard_id: 'live',
        window_key: 'all_time',
        page: 1,
        page_size: 100,
      });
      expect(first.entries).toEqual([
        { user_id: 'ann', score: 5, rank: 1 },
        { user_id: 'bo', score: 3, rank: 2 },
      ]);
      await send('bo', 10);
      const update = await waitFor(
        () => messages.find((m) => m.type === 'update' && m.entries[0]?.user_id === 'bo'),
        { what: 'update' },
      );
      expect(update.entries).toEqual([
        { user_id: 'bo', score: 13, rank: 1 },
        { user_id: 'ann', score: 5, rank: 2 },
      ]);
      ws.send(JSON.stringify({ type: 'configure', page_size: 1 }));
      await waitFor(() => messages.find((m) => m.type === 'page' && m.page_size === 1), {
        what: 'configured page',
      });
      ws.send(JSON.stringify({ type: 'request_page', page: 2 }));
      const p2 = await waitFor(() => messages.find((m) => m.type === 'page' && m.page === 2), {
        what: 'page 2',
      });
      expect(p2.entries).toEqual([{ user_id: 'ann', score: 5, rank: 2 }]);
      ws.send('not json');
      ws.send(JSON.stringify({ type: 'request_page' }));
      ws.send(JSON.stringify({ type: 'configure', page_size: 5000 }));
      ws.send(JSON.stringify({ type: 'subscribe' }));
      await waitFor(() => messages.filter((m) => m.type === 'error').length === 4, { what: 'four errors' });
      expect(messages.filter((m) => m.type === 'error').map((m) => m.message)).toEqual([
        'message must be JSON',
        'page is required',
        'page_size must be an integer from 1 to 1000',
        'type must be "configure" or "request_page"',
      ]);
    } finally {
      ws.close();
    }
  });

  it('pings idle connections', async () => {
    const { ws } = open('/v1/leaderboards/live/ws');
    let pings = 0;
    ws.on('ping', () => pings++);
    try {
      await waitFor(() => pings >= 2, { what: 'two pings' });
    } finally {
      ws.close();
    }
  });

  it('accepts the token as access_token and refuses bad credentials, other tenants and unknown boards', async () => {
    const ok = open(`/v1/leaderboards/live/ws?access_token=${token}`, {});
    await waitFor(() => ok.messages.length > 0, { what: 'a page' });
    ok.ws.close();
    const status = (path: string, headers: Record<string, string>) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`${app.url.query.replace('http', 'ws')}${path}`, { headers });
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('open', () => {
          ws.close();
          resolve(101);
        });
        ws.on('error', () => undefined);
      });
    expect(await status('/v1/leaderboards/live/ws', {})).toBe(401);
    expect(await status('/v1/leaderboards/live/ws', { authorization: 'Bearer nope' })).toBe(401);
    const other = await createTenant(app);
    expect(
      await status('/v1/leaderboards/live/ws', { authorization: `Bearer ${await tenantToken(other)}` }),
    ).toBe(404);
    expect(await status('/v1/leaderboards/ghost/ws', { authorization: `Bearer ${token}` })).toBe(404);
  });
});
