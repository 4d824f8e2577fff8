/**
 * Where a webhook may be delivered (SSRF defence). A URL must be http(s), without credentials, and
 * its host must not be (or resolve to) a loopback, private, link-local or otherwise special
 * address, unless the operator allows private addresses (LUDUS_WEBHOOK_ALLOW_PRIVATE=true).
 *
 * The check runs at registration (a clear 400; a retryable 503 when the DNS lookup cannot finish:
 * the check fails closed) and again at delivery time, on the addresses the
 * connection will actually use (the dispatcher's DNS lookup goes through `checkedAddresses`), so a
 * name that resolves to a public address at registration and to 127.0.0.1 later (DNS rebinding) is
 * still refused. Numeric host forms (`2130706433`, `0x7f000001`, `0177.1`, `127.1`) are normalised
 * by the WHATWG URL parser to dotted IPv4 before the check.
 */
import { isIP } from 'node:net';

export type AddressVerdict = { ok: true } | { ok: false; reason: string };

/** [first address as a 32-bit number, prefix length, what it is] */
const IPV4_SPECIAL: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'a "this network" address'],
  ['10.0.0.0', 8, 'a private address'],
  ['100.64.0.0', 10, 'a shared (carrier-grade NAT) address'],
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local address'],
  ['172.16.0.0', 12, 'a private address'],
  ['192.0.0.0', 24, 'an IETF protocol address'],
  ['192.0.2.0', 24, 'a documentation address'],
  ['192.88.99.0', 24, 'a 6to4 relay address'],
  ['192.168.0.0', 16, 'a private address'],
  ['198.18.0.0', 15, 'a benchmarking address'],
  ['198.51.100.0', 24, 'a documentation address'],
  ['203.0.113.0', 24, 'a documentation address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved or broadcast address'],
];

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

const V4_RANGES = IPV4_SPECIAL.map(([base, bits, what]) => ({
  base: v4ToInt(base),
  size: 2 ** (32 - bits),
  what,
}));

function checkV4(ip: string): AddressVerdict {
  const n = v4ToInt(ip);
  for (const r of V4_RANGES) {
    if (n >= r.base && n < r.base + r.size) return { ok: false, reason: `${ip} is ${r.what}` };
  }
  return { ok: true };
}

/** An IPv6 address (already validated by isIP) as 16 bytes. */
function v6Bytes(ip: string): number[] {
  let s = ip;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    tail.push(...dotted[1]!.split('.').map(Number));
    s = s.slice(0, -dotted[1]!.length);
    if (s.endsWith(':') && !s.endsWith('::')) s = s.slice(0, -1);
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  let words: number[];
  const tailWords = tail.length / 2;
  if (s.includes('::')) {
    const [head, rest] = s.split('::') as [string, string];
    const h = groups(head);
    const r = groups(rest);
    words = [...h, ...new Array<number>(8 - tailWords - h.length - r.length).fill(0), ...r];
  } else {
    words = groups(s);
  }
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  return [...bytes, ...tail];
}

function checkV6(ip: string): AddressVerdict {
  const b = v6Bytes(ip.toLowerCase());
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  // IPv4-mapped ::ffff:a.b.c.d: judged as the IPv4 address it carries.
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) {
    const v4 = b.slice(12).join('.');
    const inner = checkV4(v4);
    return inner.ok ? inner : { ok: false, reason: `${ip} maps ${inner.reason}` };
  }
  if (zeros(0, 15) && b[15] === 1) return { ok: false, reason: `${ip} is a loopback address` };
  if (zeros(0, 16)) return { ok: false, reason: `${ip} is the unspecified address` };
  // Only global unicast (2000::/3) is deliverable; within it, the special blocks are refused.
  if ((b[0]! & 0xe0) !== 0x20) {
    const what =
      b[0] === 0xfe && (b[1]! & 0xc0) === 0x80
        ? 'a link-local address'
        : (b[0]! & 0xfe) === 0xfc
          ? 'a unique local (private) address'
          : b[0] === 0xff
            ? 'a multicast address'
            : 'not a global unicast address';
    return { ok: false, reason: `${ip} is ${what}` };
  }
  if (b[0] === 0x20 && b[1] === 0x01 && (b[2]! & 0xfe) === 0x00)
    return { ok: false, reason: `${ip} is an IETF protocol address (Teredo and others)` };
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0x0d && b[3] === 0xb8)
    return { ok: false, reason: `${ip} is a documentation address` };
  if (b[0] === 0x20 && b[1] === 0x02) return { ok: false, reason: `${ip} is a 6to4 address` };
  if (b[0] === 0x3f && b[1] === 0xff && (b[2]! & 0xf0) === 0x00)
    return { ok: false, reason: `${ip} is a documentation address` };
  return { ok: true };
}

/** Whether delivery to this IP address (v4 or v6, no brackets) is allowed. */
export function checkAddress(ip: string, allowPrivate: boolean): AddressVerdict {
  const family = isIP(ip);
  if (family === 0) return { ok: false, reason: `${ip} is not an IP address` };
  if (allowPrivate) return { ok: true };
  return family === 4 ? checkV4(ip) : checkV6(ip);
}

const PRIVATE_HINT = ' (set LUDUS_WEBHOOK_ALLOW_PRIVATE=true to allow private addresses)';

export type UrlVerdict =
  { ok: true; url: URL; hostname: string; ip: boolean } | { ok: false; reason: string };

/**
 * Checks a webhook URL without resolving it: scheme, credentials, length, and the host when it is
 * an IP literal or a local name. `hostname` is the host without IPv6 brackets or a trailing dot.
 */
export function checkUrl(raw: string, allowPrivate: boolean): UrlVerdict {
  if (raw.length > 2048) return { ok: false, reason: 'url is longer than 2048 characters' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'url is not a valid absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, reason: `url must use http or https (got ${url.protocol.replace(/:$/, '')})` };
  if (url.username || url.password)
    return { ok: false, reason: 'url must not contain credentials (user:password@)' };
  let hostname = url.hostname;
  if (hostname.startsWith('[') && hostname.endsWith(']')) hostname = hostname.slice(1, -1);
  hostname = hostname.replace(/\.$/, '');
  if (hostname === '') return { ok: false, reason: 'url has no host' };
  const ip = isIP(hostname) !== 0;
  if (ip) {
    const v = checkAddress(hostname, allowPrivate);
    if (!v.ok) return { ok: false, reason: `url host ${v.reason}${PRIVATE_HINT}` };
  } else if (!allowPrivate && (hostname === 'localhost' || hostname.endsWith('.localhost'))) {
    return { ok: false, reason: `url host ${hostname} is a loopback name${PRIVATE_HINT}` };
  }
  return { ok: true, url, hostname, ip };
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/**
 * Resolves a host name and checks every address it resolves to; refuses when any of them is not
 * allowed (a name that mixes public and private answers is not trusted).
 */
export async function checkedAddresses(
  hostname: string,
  allowPrivate: boolean,
  resolve: Resolver,
): Promise<ResolvedAddress[]> {
  const addresses = await resolve(hostname);
  if (addresses.length === 0) throw new AddressRefused(`${hostname} did not resolve to any address`);
  for (const a of addresses) {
    const v = checkAddress(a.address, allowPrivate);
    if (!v.ok) throw new AddressRefused(`${hostname} resolves to ${v.reason}${PRIVATE_HINT}`);
  }
  return addresses;
}

/** Resolver errors that are a definitive answer: the name has no address (yet). */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA']);

/** How long the registration check waits for DNS by default (docs/webhooks.md). */
export const REGISTRATION_CHECK_TIMEOUT_MS = 2000;

/**
 * The registration check of a host name: resolves it within `timeoutMs` and checks every answer.
 * Fails closed: an answer naming a refused address throws AddressRefused (a 400); a lookup that
 * does not finish in time or fails for another reason than "no such name" (EAI_AGAIN, SERVFAIL,
 * a busy resolver) throws AddressCheckUnavailable (a retryable 503), so a name that cannot be
 * checked is never registered. A name that does not exist is 'unresolved': accepted, since every
 * delivery checks the addresses it connects to.
 */
export async function checkRegistrableName(
  hostname: string,
  resolve: Resolver,
  timeoutMs = REGISTRATION_CHECK_TIMEOUT_MS,
): Promise<'ok' | 'unresolved'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new AddressCheckUnavailable(`the DNS lookup of ${hostname} did not finish within ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
  });
  try {
    await Promise.race([checkedAddresses(hostname, false, resolve), timeout]);
    return 'ok';
  } catch (err) {
    if (err instanceof AddressRefused || err instanceof AddressCheckUnavailable) throw err;
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && NO_SUCH_NAME.has(code)) return 'unresolved';
    throw new AddressCheckUnavailable(
      `the DNS lookup of ${hostname} failed (${typeof code === 'string' ? code : (err as Error).message})`,
    );
  } finally {
    clearTimeout(timer);
  }
}

/** The address check could not finish: nothing was registered; the client may retry. */
export class AddressCheckUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressCheckUnavailable';
  }
}

export class AddressRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressRefused';
  }
}
