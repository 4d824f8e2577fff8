/**
 * A field's `pattern` runs on user input, so a pattern that can backtrack without bound is refused
 * when the reward is written (docs/store.md "Field patterns"). The check is structural, in the
 * spirit of safe-regex: no backreferences; no repeated group that itself holds a quantifier or an
 * alternation (star height above one: `(a+)+`, `(a|aa)*`, the exponential cases); at most
 * MAX_UNBOUNDED unbounded quantifiers (`*`, `+`, `{n,}`), which with values capped at
 * MAX_PATTERNED_LENGTH characters limits the polynomial cases (`\d*\d*\d*x`). And since a
 * structural check cannot prove a bound, every run is time-limited too (`safeTest`): a pattern that
 * takes longer than PATTERN_TIMEOUT_MS on a value refuses that value instead of holding the
 * process.
 */

import { createContext, runInContext } from 'node:vm';

export const MAX_PATTERN_LENGTH = 200;
/** How long one pattern may run on one value before the value is refused (ms). */
export const PATTERN_TIMEOUT_MS = 50;
export const MAX_UNBOUNDED = 3;

/** Why a pattern is refused (a phrase after the field name), or null when it may be used. */
export function regexProblem(p: string): string | null {
  if (p.length > MAX_PATTERN_LENGTH) return `must be at most ${MAX_PATTERN_LENGTH} characters`;
  try {
    new RegExp(p, 'u');
  } catch (err) {
    return `is not a valid regular expression (${(err as Error).message})`;
  }
  if (/\\[1-9]|\\k</.test(p)) return 'must not use backreferences';
  /** One open group: whether it contains a quantifier or an alternation. */
  const stack: Array<{ quantified: boolean; alternation: boolean }> = [
    { quantified: false, alternation: false },
  ];
  let unbounded = 0;
  /** The quantifier starting at j: 'repeat' (more than once), 'optional' (?), or null. */
  const quantifierAt = (j: number): { kind: 'unbounded' | 'bounded' | 'optional'; end: number } | null => {
    const c = p[j];
    if (c === '*' || c === '+') return { kind: 'unbounded', end: j + 1 };
    if (c === '?') return { kind: 'optional', end: j + 1 };
    if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(j));
      if (!m) return null;
      const kind = m[2] === undefined ? 'bounded' : m[3] === '' ? 'unbounded' : 'bounded';
      return { kind, end: j + m[0].length };
    }
    return null;
  };
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    const top = stack[stack.length - 1]!;
    if (c === '\\') {
      // \p{...} / \P{...} / \u{...}: skip the braces too.
      if ((p[i + 1] === 'p' || p[i + 1] === 'P' || p[i + 1] === 'u') && p[i + 2] === '{')
        i = p.indexOf('}', i);
      else i++;
      continue;
    }
    if (c === '[') {
      for (i++; i < p.length && p[i] !== ']'; i++) if (p[i] === '\\') i++;
      continue;
    }
    if (c === '(') {
      stack.push({ quantified: false, alternation: false });
      if (p[i + 1] === '?') {
        // (?: (?= (?! (?<= (?<! (?<name>
        const m = /^\(\?(?::|=|!|<=|<!|<[A-Za-z_$][\w$]*>)/.exec(p.slice(i));
        if (m) i += m[0].length - 1;
      }
      continue;
    }
    if (c === '|') {
      top.alternation = true;
      continue;
    }
    if (c === ')') {
      const g = stack.length > 1 ? stack.pop()! : top;
      const q = quantifierAt(i + 1);
      if (q && q.kind !== 'optional' && (g.quantified || g.alternation))
        return g.quantified
          ? 'nests a quantifier inside a repeated group (it could backtrack without bound); refused'
          : 'repeats a group with an alternation (it could backtrack without bound); refused';
      const parent = stack[stack.length - 1]!;
      if (g.quantified || q) parent.quantified = true;
      if (q) {
        if (q.kind === 'unbounded') unbounded++;
        i = q.end - 1;
        if (p[i + 1] === '?') i++;
      }
      continue;
    }
    const q = quantifierAt(i);
    if (q) {
      top.quantified = true;
      if (q.kind === 'unbounded') unbounded++;
      i = q.end - 1;
      if (p[i + 1] === '?') i++;
    }
  }
  if (unbounded > MAX_UNBOUNDED)
    return `has more than ${MAX_UNBOUNDED} unbounded quantifiers (*, +, {n,}); use bounded ones such as {1,50}`;
  return null;
}

const sandbox = createContext({});

/**
 * Tests `value` against `pattern` (unicode, unanchored) within PATTERN_TIMEOUT_MS: true or false,
 * or 'timeout' when the run was stopped (V8 interrupts a regular expression at the vm timeout).
 */
export function safeTest(
  pattern: string,
  value: string,
  timeoutMs = PATTERN_TIMEOUT_MS,
): boolean | 'timeout' {
  try {
    return Boolean(
      runInContext('new RegExp(p, "u").test(v)', Object.assign(sandbox, { p: pattern, v: value }), {
        timeout: timeoutMs,
      }),
    );
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return 'timeout';
    return false;
  }
}
