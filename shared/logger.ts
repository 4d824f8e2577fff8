import pino, { type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs on stdout, one object per line. */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'ludus', ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
