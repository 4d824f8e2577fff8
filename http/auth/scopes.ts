/**
 * API key scopes: one read/write pair per feature (docs/authentication.md). `write` implies
 * `read`; `<feature>:*` and `*` grant everything of a feature or of all features.
 */
export const FEATURES = [
  'coupons',
  'streaks',
  'rewards',
  'orders',
  'wallet',
  'levels',
  'achievements',
  'wheels',
  'leaderboards',
  'webhooks',
] as const;

export type Feature = (typeof FEATURES)[number];

export const ALL_SCOPES: string[] = ['*', ...FEATURES.flatMap((f) => [`${f}:read`, `${f}:write`, `${f}:*`])];

export const scope = {
  read: (f: Feature) => `${f}:read`,
  write: (f: Feature) => `${f}:write`,
};
