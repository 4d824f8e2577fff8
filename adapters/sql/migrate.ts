import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Sql } from './types';

const MIGRATIONS_DIR = join(__dirname, 'migrations');
/** Any constant: serialises concurrent migrators (two processes starting at once). */
const MIGRATION_LOCK = 7_461_001;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migration set: files named NNN_name.sql in adapters/sql/migrations, in version order. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({
      version: Number(f.slice(0, 3)),
      name: f.slice(4, -4),
      sql: readFileSync(join(dir, f), 'utf8'),
    }));
}

/**
 * Applies every migration not yet recorded in schema_migrations, each in its own transaction,
 * under an advisory lock. Idempotent; returns the names it applied.
 */
export async function migrate(sql: Sql, migrations = loadMigrations()): Promise<string[]> {
  await sql.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const applied: string[] = [];
  for (const m of migrations) {
    const done = await sql.tx(async (q) => {
      await q.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      const seen = await q.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version]);
      if (seen.rowCount > 0) return false;
      await q.exec(m.sql);
      await q.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      return true;
    });
    if (done) applied.push(`${String(m.version).padStart(3, '0')}_${m.name}`);
  }
  return applied;
}
