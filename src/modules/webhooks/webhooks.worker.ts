/**
 * The delivery worker: every WEBHOOKS_POLL_INTERVAL_MS it claims due deliveries (with the injected
 * clock, so retry schedules are tested without sleeping) and runs each attempt on its own, up to
 * WEBHOOKS_CONCURRENCY at once: a slow endpoint occupies one slot for at most its timeout and
 * never delays the others. Claims expire, so a crashed worker's deliveries are retried.
 */
import type { Logger } from '../../platform/logger.ts';
import type { WebhooksService } from './webhooks.service.ts';

export class WebhookWorker {
  readonly #service: WebhooksService;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #concurrency: number;
  readonly #inFlight = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  #backlog = false;

  constructor(deps: { service: WebhooksService; log: Logger; intervalMs: number; concurrency: number }) {
    this.#service = deps.service;
    this.#log = deps.log;
    this.#intervalMs = deps.intervalMs;
    this.#concurrency = deps.concurrency;
  }

  start(): void {
    this.#timer = setInterval(() => void this.poll(), this.#intervalMs);
    this.#timer.unref();
  }

  /** Claims and starts due attempts while there is room. */
  async poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    try {
      const room = this.#concurrency - this.#inFlight.size;
      if (room <= 0) return;
      const claimed = await this.#service.claimDue(room);
      for (const id of claimed) {
        const run = this.#service.attempt(id)
          .catch((e: unknown) => this.#log.error({ err: e, delivery_id: id }, 'webhook attempt failed'))
          .finally(() => {
            this.#inFlight.delete(run);
            // A full claim means more may be due: keep going without waiting for the timer.
            if (this.#backlog && this.#timer) void this.poll();
          });
        this.#inFlight.add(run);
      }
      this.#backlog = claimed.length === room;
    } catch (e) {
      this.#log.warn({ err: e }, 'webhook poll failed');
    } finally {
      this.#polling = false;
    }
  }

  /** Stops claiming and waits for attempts in flight (each bounded by the delivery timeout). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled([...this.#inFlight]);
  }
}
