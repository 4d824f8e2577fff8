/**
 * The one input rule every store downstream needs, applied to every string and every free-form
 * value of every request (body, path parameters, query string) before anything else reads it:
 *
 * - Every string, and every object key, is well-formed Unicode (no lone surrogate: it has no
 *   UTF-8 form, and Postgres, Redis and ClickHouse would store it differently or refuse it) and
 *   contains no NUL character (Postgres text and jsonb cannot hold it).
 * - Objects and arrays nest at most MAX_NESTING levels, the value itself being level 1: deeper
 *   values overflow the stack of every recursive reader (JSON.stringify, the stores' JSON code).
 *
 * The walk is iterative and stops at the first problem, so a hostile value cannot overflow it.
 * The route chain (./route.ts) applies it to every request; the ingestion routes apply it per
 * event (a bad event of a bulk request is a failed result, not a refused batch); the live
 * leaderboard socket applies it to its messages.
 */

/** Deepest nesting of objects and arrays in one request value (docs/operations.md "Limits"). */
export const MAX_NESTING = 32;

/** At most this many UTF-8 bytes in one path parameter (every identifier fits: see the docs). */
export const MAX_PATH_PARAM_BYTES = 256;

const LONE_SURROGATE = /\p{Cs}/u;

/** Why one string breaks the rule, or null. */
export function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  if (LONE_SURROGATE.test(s)) return 'must be well-formed Unicode (it has a lone surrogate)';
  return null;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** `where` plus a key, readable: `body.attrs.a`, `body.items[3]`, `body.attrs["a b"]`. */
function child(where: string, key: string | number): string {
  if (typeof key === 'number') return `${where}[${key}]`;
  // JSON.stringify escapes NUL and lone surrogates, so the message itself stays clean.
  return IDENT.test(key) ? `${where}.${key}` : `${where}[${JSON.stringify(key)}]`;
}

/**
 * The first place where `value` breaks the rule, as a message naming it (for example
 * `body.attrs.a.b: nesting deeper than 32 levels`), or null when it holds. `where` names the root.
 */
export function inputProblem(value: unknown, where: string, maxNesting = MAX_NESTING): string | null {
  return breaksRule(value, maxNesting) ? locateProblem(value, where, maxNesting) : null;
}

/**
 * Whether `value` breaks the rule anywhere: the same walk as `locateProblem` without building the
 * path of every value on the way (the names are built only once a problem is known to be there;
 * building them for every key of every event was about 2 % of the ingest gateway's CPU).
 */
function breaksRule(value: unknown, maxNesting: number): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      if (stringProblem(v)) return true;
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth > maxNesting) return true;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        values.push(v[i]);
        depths.push(depth + 1);
      }
      continue;
    }
    for (const k of Object.keys(v)) {
      if (stringProblem(k)) return true;
      values.push((v as Record<string, unknown>)[k]);
      depths.push(depth + 1);
    }
  }
  return false;
}

/** The first problem in walking order, named by its path (only called when there is one). */
function locateProblem(value: unknown, where: string, maxNesting: number): string | null {
  const stack: Array<{ v: unknown; at: string; depth: number }> = [{ v: value, at: where, depth: 1 }];
  while (stack.length > 0) {
    const { v, at, depth } = stack.pop()!;
    if (typeof v === 'string') {
      const p = stringProblem(v);
      if (p) return `${at} ${p}`;
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth > maxNesting) return `${at}: nesting deeper than ${maxNesting} levels`;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], at: child(at, i), depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i]!;
      const p = stringProblem(k);
      if (p) return `${child(at, k)}: the key ${p}`;
      stack.push({ v: (v as Record<string, unknown>)[k], at: child(at, k), depth: depth + 1 });
    }
  }
  return null;
}

/** Path parameters: the string rule and at most MAX_PATH_PARAM_BYTES UTF-8 bytes each. */
export function paramsProblem(params: Record<string, string>): string | null {
  for (const [name, v] of Object.entries(params)) {
    const p = stringProblem(v);
    if (p) return `path.${name} ${p}`;
    if (Buffer.byteLength(v, 'utf8') > MAX_PATH_PARAM_BYTES)
      return `path.${name} must be at most ${MAX_PATH_PARAM_BYTES} UTF-8 bytes`;
  }
  return null;
}
