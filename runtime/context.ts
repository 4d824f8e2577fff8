import type { Clock } from '../core/clock';
import type { Adapters } from './compose';
import type { Config } from './config';
import type { Logger } from './logger';
import type { Metrics } from './metrics';

/** What the composition root hands to every role: built once, passed explicitly. */
export interface AppContext {
  config: Config;
  log: Logger;
  metrics: Metrics;
  clock: Clock;
  adapters: Adapters;
}
