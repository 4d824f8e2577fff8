/** What every workload gets: the profile's parameters, the stack, cleanup, results, noise. */
import type { NoiseSampler } from './machine';
import type { Results } from './results';
import type { Cleanup, StackSettings } from './stack';

export interface Profile {
  name: 'quick' | 'full';
  /** Runs per figure (median of these). */
  runs: number;
  ingest: {
    warmupS: number;
    durationS: number;
    connections: number;
    kafkaDurationS: number;
    perfRecords: number;
  };
  pipeline: {
    events: number;
    users: number;
    latencyS: number;
    probesPerS: number;
    /** Other users' rows in each table of the grown-store drain (bench/lib/grow.ts). */
    grownUsers: number;
  };
  embedded: { events: number; e2eS: number; latencyS: number };
  query: {
    sizes: number[];
    embeddedSizes: number[];
    durationS: number;
    connections: number;
    redisRequests: number;
  };
  scaling: { defs: number[]; tenants: number[]; events: number; ingestS: number };
  profile: boolean;
}

export const PROFILES: Record<'quick' | 'full', Profile> = {
  quick: {
    name: 'quick',
    runs: 3,
    ingest: { warmupS: 1, durationS: 3, connections: 16, kafkaDurationS: 3, perfRecords: 200_000 },
    pipeline: { events: 20_000, users: 10_000, latencyS: 8, probesPerS: 10, grownUsers: 200_000 },
    embedded: { events: 10_000, e2eS: 3, latencyS: 6 },
    query: {
      sizes: [10_000, 1_000_000],
      embeddedSizes: [10_000],
      durationS: 3,
      connections: 32,
      redisRequests: 100_000,
    },
    scaling: { defs: [1, 10, 100], tenants: [1, 100], events: 10_000, ingestS: 2 },
    profile: false,
  },
  full: {
    name: 'full',
    runs: 3,
    ingest: { warmupS: 3, durationS: 10, connections: 16, kafkaDurationS: 10, perfRecords: 1_000_000 },
    pipeline: { events: 100_000, users: 10_000, latencyS: 20, probesPerS: 10, grownUsers: 200_000 },
    embedded: { events: 30_000, e2eS: 8, latencyS: 15 },
    query: {
      sizes: [10_000, 1_000_000, 10_000_000],
      embeddedSizes: [10_000, 1_000_000],
      durationS: 6,
      connections: 32,
      redisRequests: 300_000,
    },
    scaling: { defs: [1, 10, 100], tenants: [1, 100], events: 30_000, ingestS: 5 },
    profile: true,
  },
};

export interface Bench {
  profile: Profile;
  stack: StackSettings;
  cleanup: Cleanup;
  results: Results;
  noise: NoiseSampler;
  /** Scratch directory of this run (data dirs, logs, Lua scripts, profiles); removed at the end. */
  tmp: string;
  rootKey: string;
  secretKey: string;
  /** Median peak rates measured earlier in this run (the latency runs load at half of them). */
  peaks: Record<string, number>;
  /** Fixed rates of the latency runs per shape (`--latency-rate`), instead of half the peak. */
  latencyRates: Partial<Record<'embedded' | 'distributed', number>>;
}

/**
 * The rate of a shape's acceptance-to-visible runs, and the words the figure's name gives it: half
 * the peak measured earlier in the run (issue 19's definition), or the rate `--latency-rate` fixed.
 */
export function latencyRate(
  b: Bench,
  shape: 'embedded' | 'distributed',
  peak: number,
): { rate: number; label: string } {
  const fixed = b.latencyRates[shape];
  const rate = fixed ?? Math.max(100, Math.round(peak / 2));
  return {
    rate,
    label: `acceptance → visible rank at ${rate.toLocaleString('en-US')} events/s (${fixed ? 'fixed rate' : 'half the peak'})`,
  };
}
