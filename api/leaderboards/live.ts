/**
 * Live leaderboard updates over WebSocket: `GET /v1/leaderboards/{leaderboard_id}/ws` on the query
 * gateway (protocol in docs/leaderboards.md). The JWT comes on the upgrade request
 * (`Authorization: Bearer`, or `?access_token=` for browsers, which cannot set headers).
 *
 * On connect the server sends the first page; then, at most once per `throttleMs`, it re-reads the
 * page and sends it when it changed. Reading the shared rank index (not listening to one process's
 * pipeline) makes this work with any number of processor and API instances.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { Sql } from '../../adapters/sql/types';
import type { Leaderboard } from '../../core/leaderboards/definition';
import { LeaderboardQueries, WindowNotFound } from '../../core/leaderboards/queries';
import { getBoard } from '../../core/leaderboards/store';
import type { Logger } from '../../runtime/logger';
import type { Authenticator } from '../auth/authenticator';
import { ApiError } from '../http/errors';

export interface LiveOptions {
  throttleMs: number;
  pingMs: number;
  defaultPageSize: number;
  maxPageSize: number;
  maxConnections: number;
}

export const LIVE_DEFAULTS: LiveOptions = {
  throttleMs: 1000,
  pingMs: 30_000,
  defaultPageSize: 100,
  maxPageSize: 1000,
  maxConnections: 10_000,
};

const PATH = /^\/v1\/leaderboards\/([A-Za-z0-9_.-]{1,64})\/ws$/;

interface View {
  page: number;
  pageSize: number;
  windowKey: string | undefined;
}

export function attachLiveLeaderboards(
  server: Server,
  deps: { sql: Sql; queries: LeaderboardQueries; auth: Authenticator; log: Logger },
  opts: LiveOptions = LIVE_DEFAULTS,
): { close(): void } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  const timers = new Set<NodeJS.Timeout>();

  const reject = (socket: Duplex, status: number, message: string) => {
    const body = JSON.stringify({
      error: {
        code: status === 401 ? 'UNAUTHORIZED' : status === 403 ? 'FORBIDDEN' : 'NOT_FOUND',
        message,
        status,
      },
    });
    socket.end(
      `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : 'Not Found'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const m = PATH.exec(url.pathname);
    if (!m) return reject(socket, 404, 'No WebSocket route here');
    if (wss.clients.size >= opts.maxConnections) return reject(socket, 403, 'Too many live connections');
    const token =
      req.headers.authorization ??
      (url.searchParams.get('access_token') ? `Bearer ${url.searchParams.get('access_token')}` : undefined);
    deps.auth
      .token(token)
      .then(async ({ tenant }) => {
        const board = await getBoard(deps.sql, tenant.id, m[1]!);
        if (!board) return reject(socket, 404, `Leaderboard ${m[1]} not found`);
        wss.handleUpgrade(req, socket, head, (ws) => serve(ws, board));
      })
      .catch((err) => {
        if (err instanceof ApiError) reject(socket, err.status, err.message);
        else {
          deps.log.error({ err }, 'live upgrade failed');
          reject(socket, 401, 'Invalid credential');
        }
      });
  });

  function serve(ws: WebSocket, board: Leaderboard): void {
    const view: View = { page: 1, pageSize: opts.defaultPageSize, windowKey: undefined };
    let lastSent = '';
    let alive = true;
    let busy = false;

    const send = (msg: unknown) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
    };
    const push = async (force: boolean) => {
      if (busy) return;
      busy = true;
      try {
        const w = await deps.queries.resolve(board, view.windowKey);
        const p = await deps.queries.page(board, w, (view.page - 1) * view.pageSize, view.pageSize);
        const body = {
          leaderboard_id: board.leaderboard_id,
          window_key: w.key.window_key,
          window_status: w.source === 'closed' ? 'completed' : 'live',
          page: view.page,
          page_size: view.pageSize,
          total_entries: p.total,
          entries: p.entries,
        };
        const json = JSON.stringify(body);
        if (force || json !== lastSent) {
          send({ type: force ? 'page' : 'update', ...body });
          lastSent = json;
        }
      } catch (err) {
        if (err instanceof WindowNotFound) send({ type: 'error', code: 'NOT_FOUND', message: err.message });
        else {
          deps.log.warn({ err }, 'live page read failed');
          send({
            type: 'error',
            code: 'INTERNAL_ERROR',
            message: 'Could not read the leaderboard; retrying',
          });
        }
      } finally {
        busy = false;
      }
    };

    const poll = setInterval(() => void push(false), opts.throttleMs);
    const ping = setInterval(() => {
      if (!alive) return ws.terminate();
      alive = false;
      ws.ping();
    }, opts.pingMs);
    timers.add(poll);
    timers.add(ping);
    ws.on('pong', () => (alive = true));
    ws.on('close', () => {
      clearInterval(poll);
      clearInterval(ping);
      timers.delete(poll);
      timers.delete(ping);
    });
    ws.on('message', (data) => {
      const msg = parseMessage(data.toString(), opts);
      if ('error' in msg) return send({ type: 'error', code: 'VALIDATION_ERROR', message: msg.error });
      if (msg.type === 'configure') {
        if (msg.page !== undefined) view.page = msg.page;
        if (msg.page_size !== undefined) view.pageSize = msg.page_size;
        if (msg.window_key !== undefined)
          view.windowKey = msg.window_key === null ? undefined : msg.window_key;
      } else {
        view.page = msg.page;
        if (msg.page_size !== undefined) view.pageSize = msg.page_size;
      }
      void push(true);
    });
    void push(true);
  }

  return {
    close() {
      for (const t of timers) clearInterval(t);
      for (const c of wss.clients) c.terminate();
      wss.close();
    },
  };
}

type ClientMessage =
  | { type: 'configure'; page?: number; page_size?: number; window_key?: string | null }
  | { type: 'request_page'; page: number; page_size?: number };

/** Validates a client message; unknown types and fields are errors that say what is wrong. */
export function parseMessage(text: string, opts: LiveOptions): ClientMessage | { error: string } {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { error: 'message must be JSON' };
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m))
    return { error: 'message must be a JSON object' };
  const allowed =
    m.type === 'configure'
      ? ['type', 'page', 'page_size', 'window_key']
      : m.type === 'request_page'
        ? ['type', 'page', 'page_size']
        : null;
  if (!allowed) return { error: 'type must be "configure" or "request_page"' };
  const extra = Object.keys(m).find((k) => !allowed.includes(k));
  if (extra) return { error: `${extra} is not allowed` };
  const pos = (k: string, max: number) =>
    m[k] === undefined || (Number.isInteger(m[k]) && (m[k] as number) >= 1 && (m[k] as number) <= max);
  if (!pos('page', 100_000)) return { error: 'page must be an integer from 1' };
  if (!pos('page_size', opts.maxPageSize))
    return { error: `page_size must be an integer from 1 to ${opts.maxPageSize}` };
  if (m.type === 'request_page' && m.page === undefined) return { error: 'page is required' };
  if (
    m.window_key !== undefined &&
    m.window_key !== null &&
    (typeof m.window_key !== 'string' || m.window_key.length > 64)
  ) {
    return { error: 'window_key must be a string of at most 64 characters, or null' };
  }
  return m as ClientMessage;
}
