/**
 * Counters the platform's workers report to `/metrics` (http/metrics.ts implements them when
 * METRICS_TOKEN is set; otherwise they are no-ops). Labels are bounded: outcomes, event types,
 * channels and statuses, never ids or addresses.
 */
export type DeliveryOutcome = 'success' | 'retry' | 'dead' | 'cancelled' | 'gone';

export type Instruments = {
  /** One webhook delivery attempt (or a cancellation without one); `seconds` is the POST's duration, when one was made. */
  webhookDelivery(outcome: DeliveryOutcome, seconds: number | null): void;
  /** One event handed to the consumers by the outbox relay (`message.*` events also count messages by channel and status). */
  eventDispatched(type: string, data: Record<string, unknown>): void;
};

export const NO_INSTRUMENTS: Instruments = { webhookDelivery: () => {}, eventDispatched: () => {} };
