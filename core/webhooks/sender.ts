/**
 * One webhook attempt over HTTP: POST the body with its headers, within a timeout (SPEC.md: the
 * receiver answers within 5 seconds), without following redirects, reading at most
 * MAX_RESPONSE_BYTES of the answer. 2xx is a success; anything else, a timeout or a network error
 * is a failure to retry.
 *
 * Safety (core/webhooks/address.ts): the URL is checked before connecting, and the connection's
 * DNS lookup is replaced by one that resolves the name itself and refuses disallowed addresses, so
 * the socket connects only to an address that passed the check (no DNS rebinding between check
 * and connect). No proxy from the environment is used.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { AddressRefused, checkedAddresses, checkUrl, type Resolver } from './address';
import type { AttemptResult } from './queue';

/** The part of a response body kept in the delivery log. */
export const MAX_RESPONSE_BYTES = 4096;

export interface SenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  userAgent: string;
  /** Reuse connections between attempts (the dispatcher); a ping opens its own. */
  keepAlive?: boolean;
  /** DNS resolution; the system resolver by default (tests inject one). */
  resolve?: Resolver;
}

export const systemResolver: Resolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family,
  }));

export class WebhookSender {
  private readonly httpAgent: http.Agent | false;
  private readonly httpsAgent: https.Agent | false;
  private readonly resolve: Resolver;

  constructor(private readonly opts: SenderOptions) {
    this.resolve = opts.resolve ?? systemResolver;
    this.httpAgent = opts.keepAlive ? new http.Agent({ keepAlive: true, maxSockets: 4 }) : false;
    this.httpsAgent = opts.keepAlive ? new https.Agent({ keepAlive: true, maxSockets: 4 }) : false;
  }

  /** The connection's lookup: resolve, check every address, hand over only checked ones. */
  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    checkedAddresses(hostname, this.opts.allowPrivate, this.resolve).then(
      (all) => {
        const family = options.family === 4 || options.family === 6 ? options.family : 0;
        const usable = family ? all.filter((a) => a.family === family) : all;
        if (usable.length === 0) {
          callback(new AddressRefused(`${hostname} has no IPv${family} address`), '', 0);
          return;
        }
        if (options.all) callback(null, usable);
        else callback(null, usable[0]!.address, usable[0]!.family);
      },
      (err: Error) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };

  async send(url: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    const started = performance.now();
    const done = (r: Omit<AttemptResult, 'durationMs'>): AttemptResult => ({
      ...r,
      durationMs: performance.now() - started,
    });
    const checked = checkUrl(url, this.opts.allowPrivate);
    if (!checked.ok)
      return done({ ok: false, statusCode: null, error: `refused: ${checked.reason}`, responseBody: null });
    const u = checked.url;
    const secure = u.protocol === 'https:';
    const payload = Buffer.from(body, 'utf8');

    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      let status: number | null = null;
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (error: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const text = chunks.length
          ? Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8').replace(/\0/g, '\uFFFD')
          : null;
        const ok = error === null && status !== null && status >= 200 && status < 300;
        resolve(done({ ok, statusCode: status, error, responseBody: text }));
      };
      const options: https.RequestOptions = {
        method: 'POST',
        hostname: checked.hostname,
        port: u.port ? Number(u.port) : secure ? 443 : 80,
        path: `${u.pathname}${u.search}`,
        headers: {
          ...headers,
          'Content-Type': 'application/json',
          'Content-Length': String(payload.length),
          'User-Agent': this.opts.userAgent,
        },
        agent: secure ? this.httpsAgent : this.httpAgent,
        // IP literals skip DNS; they were checked above. Names resolve through the checked lookup.
        lookup: this.lookup,
        ...(secure && !checked.ip ? { servername: checked.hostname } : {}),
      };
      const req = (secure ? https : http).request(options, (res) => {
        status = res.statusCode ?? null;
        res.on('data', (c: Buffer) => {
          if (size < MAX_RESPONSE_BYTES) chunks.push(c);
          size += c.length;
          // Enough read: stop here, the status is what counts.
          if (size >= MAX_RESPONSE_BYTES) {
            res.destroy();
            finish(null);
          }
        });
        res.on('end', () => finish(null));
        res.on('error', () => finish(null));
        res.on('close', () => finish(null));
      });
      const timer = setTimeout(() => {
        if (status !== null) {
          // Headers arrived in time; the body did not finish: the status stands.
          req.destroy();
          finish(null);
          return;
        }
        req.destroy();
        finish(`timeout: no answer within ${this.opts.timeoutMs} ms`);
      }, this.opts.timeoutMs);
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (settled) return;
        if (err instanceof AddressRefused || err.name === 'AddressRefused') finish(`refused: ${err.message}`);
        else finish(describe(err));
      });
      req.end(payload);
    });
  }

  /** Closes kept-alive connections. */
  close(): void {
    if (this.httpAgent) this.httpAgent.destroy();
    if (this.httpsAgent) this.httpsAgent.destroy();
  }
}

function describe(err: NodeJS.ErrnoException): string {
  const code = err.code ? ` (${err.code})` : '';
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
      return 'host not found (DNS)';
    case 'ECONNRESET':
      return 'connection reset by the receiver';
    default:
      return `${err.message || 'network error'}${code}`.slice(0, 500);
  }
}

/** The headers of one attempt besides the signatures: event type and attempt number. */
export function deliveryHeaders(eventType: string, attempt: number): Record<string, string> {
  return { 'X-Webhook-Event': eventType, 'X-Webhook-Attempt': String(attempt) };
}
