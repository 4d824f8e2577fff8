/**
 * One extra run of a workload with `node --cpu-prof` on the service process, summarised over the
 * measured window only (start-up left out). Profiled runs are never part of the figures. The
 * process's worker threads (the embedded database thread) write profiles of their own: each is
 * summarised over the same window as `profiles.<label>.thread-<id>`.
 *
 * The caller starts the service with `nodeFlags`, marks when it spawned it and the measured
 * window, stops the service (the profile is written at exit) and returns its pid.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { profileStartUs, summarise, type ProfileSummary } from '../profile';
import type { Bench } from './context';
import { ROOT } from './stack';
import { progress } from './util';

export interface ProfileClock {
  spawned(): void;
  start(): void;
  end(): void;
}

export async function profiled(
  b: Bench,
  label: string,
  run: (nodeFlags: string[], clock: ProfileClock) => Promise<number>,
): Promise<ProfileSummary | null> {
  const dir = `${ROOT}/bench/results/tmp/profiles-${b.profile.name}/${label}`;
  mkdirSync(dir, { recursive: true });
  const t = { spawned: 0, start: 0, end: 0 };
  const pid = await run(['--cpu-prof', `--cpu-prof-dir=${dir}`], {
    spawned: () => (t.spawned = Date.now()),
    start: () => (t.start = Date.now()),
    end: () => (t.end = Date.now()),
  });
  const file = readdirSync(dir).find((f) => f.includes(`.${pid}.0.`) && f.endsWith('.cpuprofile'));
  if (!file) {
    progress(`${label}: no .cpuprofile written in ${dir}`);
    return null;
  }
  const window = { fromMs: t.start - t.spawned, toMs: t.end - t.spawned };
  const s = summarise(`${dir}/${file}`, 25, window);
  b.results.record(`profiles.${label}`, { ...s, windowMs: t.end - t.start });
  report(label, s);
  const originUs = profileStartUs(`${dir}/${file}`);
  for (const f of readdirSync(dir)) {
    const thread = new RegExp(`\\.${pid}\\.([1-9][0-9]*)\\.[0-9]+\\.cpuprofile$`).exec(f)?.[1];
    if (!thread) continue;
    const ts = summarise(`${dir}/${f}`, 25, { ...window, originUs });
    b.results.record(`profiles.${label}.thread-${thread}`, { ...ts, windowMs: t.end - t.start });
    report(`${label} thread ${thread}`, ts);
  }
  return s;
}

function report(label: string, s: ProfileSummary): void {
  progress(
    `${label} profile: ${s.busyMs} ms busy of ${s.totalMs} ms; top: ${s.topFunctions
      .slice(0, 4)
      .map((f) => `${f.name} ${f.pct}%`)
      .join(', ')}`,
  );
}
