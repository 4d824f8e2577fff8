/**
 * An answer already serialised: a handler that renders its JSON once for several requests (the
 * leaderboard page, api/leaderboards/query.ts) returns one of these, and the route chain sends its
 * bytes as they are, with `Content-Type: application/json`, instead of serialising an object per
 * request. The bytes are shared between requests and must never be modified.
 */
export class RenderedJson {
  readonly bytes: Buffer;

  constructor(json: string) {
    this.bytes = Buffer.from(json, 'utf8');
  }

  /** An answer rendered from a value with `JSON.stringify`, as the chain would render the value. */
  static of(value: unknown): RenderedJson {
    return new RenderedJson(JSON.stringify(value));
  }
}
