/** The types the HTTP kit's modules share (kept apart so that they import no module of the kit). */
import type Koa from 'koa';
import type Router from '@koa/router';
import type { Logger } from '../shared/logger';

export type GatewayName = 'ingest' | 'admin' | 'query';
/** A gateway, or the operations listener (runtime/ops.ts). */
export type ListenerName = GatewayName | 'ops';

/** A dependency a gateway needs to serve traffic; /ready answers 503 when one fails. */
export interface ReadinessCheck {
  /** Key in the /ready body, e.g. database, message_queue, rank_index. */
  name: string;
  check(): Promise<void>;
}

export interface GatewayState {
  requestId: string;
  log: Logger;
}

export interface Gateway {
  name: GatewayName;
  app: Koa<GatewayState>;
  /** Feature routers mount here. */
  router: Router<GatewayState>;
}
