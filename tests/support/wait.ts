/**
 * Waiting for a condition instead of sleeping: tests poll what they expect and fail with a message
 * that says what was still missing.
 */
export interface WaitOptions {
  /** Give up after this long. Default 20 s. */
  timeoutMs?: number;
  /** Pause between two checks. Default 25 ms. */
  intervalMs?: number;
  /** What is awaited, for the error message. */
  what?: string;
  /** Extra state to print on timeout (e.g. counts seen so far, recent log lines). */
  describe?: () => string | Promise<string>;
}

/**
 * Resolves with the first truthy value `check` returns; rejects after `timeoutMs` (with the last
 * error `check` threw, if any, and `describe()`).
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  opts: WaitOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  let detail = '';
  if (opts.describe) {
    try {
      detail = `\n${await opts.describe()}`;
    } catch (err) {
      detail = `\n(describe failed: ${String(err)})`;
    }
  }
  const cause = lastError
    ? `; last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`
    : '';
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}${cause}${detail}`,
  );
}

/**
 * Rate limits count in fixed windows (adapters/ratelimit): a test that counts hits against a
 * per-minute budget must not straddle a minute boundary, or the budget restarts mid-test. Waits
 * until at least `marginMs` are left in the current window.
 */
export async function clearOfWindowEdge(windowMs = 60_000, marginMs = 5_000): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 50));
}
