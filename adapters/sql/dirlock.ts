/**
 * An exclusive lock on an embedded store's data directory, held by one process: a lock file next
 * to the directory (`<dir>.lock`) holding the owner's pid. PGlite has no such guard, and two
 * processes on one directory each write their own copy (one's writes are lost on restart).
 *
 * - The file appears atomically with its content (written to a temporary file, then hard-linked
 *   into place: link fails when the lock exists).
 * - A lock whose pid is not running (or that cannot be read) is stale: it is taken over.
 * - The owner removes it on close; a crash leaves it stale, which the next open detects.
 */
import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';

export class DataDirInUse extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(`data directory ${dir} is in use by process ${pid}`);
    this.name = 'DataDirInUse';
  }
}

export interface DirLock {
  readonly path: string;
  release(): void;
}

interface Holder {
  pid: number;
  started_at: string;
}

function readHolder(path: string): Holder | null {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    return typeof h.pid === 'number' && Number.isSafeInteger(h.pid) && h.pid > 0 ? (h as Holder) : null;
  } catch {
    return null;
  }
}

/** Whether a process with this pid runs (EPERM: it runs under another user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock of `dir` or throws DataDirInUse naming the running owner. */
export function lockDir(dir: string): DirLock {
  const path = `${dir}.lock`;
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({ pid: process.pid, started_at: new Date().toISOString() }));
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(tmp, path);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw err;
      }
      const holder = readHolder(path);
      if (holder && running(holder.pid)) throw new DataDirInUse(dir, holder.pid);
      try {
        unlinkSync(path); // stale: its process is gone
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  } finally {
    unlinkSync(tmp);
  }
  return {
    path,
    release: () => {
      if (readHolder(path)?.pid !== process.pid) return;
      try {
        unlinkSync(path);
      } catch {
        /* already gone */
      }
    },
  };
}
