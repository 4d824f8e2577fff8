/**
 * The settings types that modules below the composition root take (runtime/config.ts reads them
 * from the environment and hands them down): a leaf, so that no layer imports runtime/.
 */

export type RateLimitSpec = Array<{ limit: number; windowMs: number }>;

export interface WebhookConfig {
  /** Delays between attempts, ms (LUDUS_WEBHOOK_RETRY_SCHEDULE); attempts = length + 1. */
  retryScheduleMs: number[];
  /** Deliver to loopback, private, link-local and other special addresses (tests, closed networks). */
  allowPrivate: boolean;
  /** Whole-attempt timeout (connect, request, response), ms; SPEC.md: 5 s. */
  timeoutMs: number;
  /** How long finished deliveries and their attempts are kept, ms. */
  retentionMs: number;
  /** An endpoint with no successful delivery for this long while failing is disabled, ms; 0 never. */
  disableAfterMs: number;
  /** Endpoints one dispatcher delivers to at once. */
  concurrency: number;
  /** How often the dispatcher looks for new outbox rows and due deliveries, ms. */
  pollMs: number;
}
