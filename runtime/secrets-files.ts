/**
 * Embedded shape: the server key and the root key live in the data directory when the
 * configuration gives none, generated on first start (files readable by the owner only).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { newSecret } from '../core/tenancy/secrets';

export interface LocalSecrets {
  secretKey: Buffer;
  rootKey: string | null;
  /** True when the root key was generated now: print it once. */
  rootKeyCreated: boolean;
}

export function localSecrets(
  dataDir: string,
  configured: { secretKey: Buffer | null; rootKey: string | null },
  generateRootKey: boolean,
): LocalSecrets {
  mkdirSync(dataDir, { recursive: true });
  let secretKey = configured.secretKey;
  if (!secretKey) {
    const file = join(dataDir, 'server.key');
    if (!existsSync(file))
      writeFileSync(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
    secretKey = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
  }
  let rootKey = configured.rootKey;
  let rootKeyCreated = false;
  if (!rootKey && generateRootKey) {
    const file = join(dataDir, 'root.key');
    if (!existsSync(file)) {
      writeFileSync(file, newSecret('ldr') + '\n', { mode: 0o600, flag: 'wx' });
      rootKeyCreated = true;
    }
    rootKey = readFileSync(file, 'utf8').trim();
  }
  return { secretKey, rootKey, rootKeyCreated };
}
