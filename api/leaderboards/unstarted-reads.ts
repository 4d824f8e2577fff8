/**
 * Identical reads that arrive in the same turn of the event loop share one read (the leaderboard
 * page: one rank-index call and one rendered answer for all of them).
 *
 * A request joins only a read that has not started: the first request of a key schedules the read
 * with `setImmediate`, after the callbacks of the current turn (the other requests the server read
 * from its sockets in that turn), and the read starts only then. So the read starts after every
 * request that joined it arrived, and ends before any of them is answered: each answer reflects
 * the state at a moment between its request's arrival and its answer, as a read of its own would.
 * Whatever was visible before a request arrived (a score its client saw applied, a page it read
 * before) is in its answer: read-your-writes and monotonic reads hold as without sharing. Nothing
 * is kept after the read ends (no cache, no TTL); a request that arrives while the read runs
 * starts the next one.
 *
 * Keys are grouped per owner object (the board definition as the per-process cache returned it),
 * held weakly: requests that read different definitions of a board never share.
 */
export class UnstartedReads<O extends object, V> {
  private readonly waiting = new WeakMap<O, Map<string, Promise<V>>>();

  /** The read of (`owner`, `key`) not started yet, joined, or a new one that starts after this turn. */
  join(owner: O, key: string, read: () => Promise<V>): Promise<V> {
    let byKey = this.waiting.get(owner);
    const pending = byKey?.get(key);
    if (pending) return pending;
    if (!byKey) this.waiting.set(owner, (byKey = new Map()));
    const keys = byKey;
    const p = new Promise<V>((resolve, reject) => {
      setImmediate(() => {
        // Started: a request from now on starts a read of its own.
        keys.delete(key);
        try {
          read().then(resolve, reject);
        } catch (err) {
          reject(err);
        }
      });
    });
    keys.set(key, p);
    return p;
  }

  /** Reads of `owner` waiting to start (tests). */
  waitingFor(owner: O): number {
    return this.waiting.get(owner)?.size ?? 0;
  }
}
