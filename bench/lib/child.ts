/** Runs a helper script of the bench in its own node process and returns the line it prints. */
import { spawn } from 'node:child_process';
import { ROOT } from './stack';

export async function runChild<T>(
  script: string,
  options: unknown,
  marker: string,
  timeoutMs: number,
  nodeFlags: string[] = [],
): Promise<T> {
  const out = await new Promise<string>((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', ...nodeFlags, script, JSON.stringify(options)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    p.stdout.on('data', (d: Buffer) => (text += d.toString()));
    p.stderr.on('data', (d: Buffer) => (text += d.toString()));
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.once('error', reject);
    p.once('exit', (code) => {
      clearTimeout(t);
      if (code !== 0) reject(new Error(`${script} exited ${code}: ${text.slice(-800)}`));
      else resolve(text);
    });
  });
  const line = out.split('\n').find((l) => l.startsWith(`${marker} `));
  if (!line) throw new Error(`${script} printed no ${marker} line: ${out.slice(-800)}`);
  return JSON.parse(line.slice(marker.length + 1)) as T;
}
