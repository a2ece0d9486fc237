/**
 * The delivery worker: every WEBHOOKS_POLL_INTERVAL_MS (and when the relay dispatched a batch whose
 * fan-out left deliveries in the table) it claims due deliveries (with the injected clock, so retry schedules are tested without
 * sleeping) in one statement, and runs each attempt on its own, up to WEBHOOKS_CONCURRENCY at once:
 * a slow endpoint occupies one slot for at most its timeout and never delays the others. Claims
 * expire, so a crashed worker's deliveries are retried. While a backlog lasts, freed slots are
 * claimed again in batches (half the slots at least) rather than one query per slot. Fresh
 * deliveries the relay fans out in this process come already claimed for free slots (reserved
 * while the relay's transaction runs) and start as soon as it commits.
 */
import type { Logger } from '../../platform/logger.ts';
import type { ClaimedDelivery, WebhookDeliveryEngine } from './webhooks.delivery.ts';
import type { LocalDeliveryWorker, WebhookFanOut } from './webhooks.fanout.ts';

export class WebhookWorker implements LocalDeliveryWorker {
  readonly #deliveries: WebhookDeliveryEngine;
  readonly #fanOut: WebhookFanOut;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #concurrency: number;
  /** While the last claim came back full, wait for this many free slots before claiming again. */
  readonly #minClaim: number;
  readonly #inFlight = new Set<Promise<void>>();
  /** Slots promised to deliveries the relay is inserting claimed (see reserve). */
  #reserved = 0;
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  #again = false;
  #backlog = false;
  /** The relay's fan-out left deliveries in the table (more than the slots it was granted): claim them after its commit. */
  #leftInTable = false;

  constructor(deps: { deliveries: WebhookDeliveryEngine; fanOut: WebhookFanOut; log: Logger; intervalMs: number; concurrency: number }) {
    this.#deliveries = deps.deliveries;
    this.#fanOut = deps.fanOut;
    this.#log = deps.log;
    this.#intervalMs = deps.intervalMs;
    this.#concurrency = deps.concurrency;
    this.#minClaim = Math.max(1, Math.floor(deps.concurrency / 2));
  }

  start(): void {
    this.#running = true;
    this.#timer = setInterval(() => void this.poll(), this.#intervalMs);
    this.#timer.unref();
    this.#fanOut.attachLocalWorker(this);
  }

  reserve(n: number): number {
    if (!this.#running) return 0;
    const granted = Math.max(0, Math.min(n, this.#concurrency - this.#inFlight.size - this.#reserved));
    this.#reserved += granted;
    // The rest wait in the table: claim them as slots free up.
    if (granted < n) {
      this.#backlog = true;
      this.#leftInTable = true;
    }
    return granted;
  }

  /**
   * The relay committed a batch: claims what its fan-out left in the table. When every fresh
   * delivery was handed over already claimed (or the batch had none: events nobody subscribed to),
   * there is nothing to claim, and no claim statement is sent; retries and other instances'
   * deliveries are found by the regular look (WEBHOOKS_POLL_INTERVAL_MS).
   */
  dispatched(): void {
    if (!this.#leftInTable) return;
    this.#leftInTable = false;
    void this.poll();
  }

  release(n: number): void {
    this.#reserved -= n;
  }

  run(deliveries: ClaimedDelivery[]): void {
    this.#reserved -= deliveries.length;
    // Stopped meanwhile: the claims expire and any worker attempts these deliveries then.
    if (!this.#running) return;
    for (const d of deliveries) this.#run(d);
  }

  /** Claims and starts due attempts while there is room. */
  async poll(): Promise<void> {
    if (this.#polling) {
      this.#again = true;
      return;
    }
    this.#polling = true;
    try {
      do {
        this.#again = false;
        const room = this.#concurrency - this.#inFlight.size - this.#reserved;
        if (room <= 0) break;
        if (this.#backlog && this.#inFlight.size > 0 && room < this.#minClaim) break;
        // Held while the claim runs, so the relay cannot promise the same slots meanwhile.
        this.#reserved += room;
        let claimed: ClaimedDelivery[];
        try {
          claimed = await this.#deliveries.claimDue(room);
        } finally {
          this.#reserved -= room;
        }
        for (const c of claimed) this.#run(c);
        this.#backlog = claimed.length === room;
      } while (this.#again);
    } catch (e) {
      this.#log.warn({ err: e }, 'webhook poll failed');
    } finally {
      this.#polling = false;
    }
  }

  #run(claimed: ClaimedDelivery): void {
    const run = this.#deliveries.deliver(claimed)
      .catch((e: unknown) => this.#log.error({ err: e, delivery_id: claimed.id }, 'webhook attempt failed'))
      .finally(() => {
        this.#inFlight.delete(run);
        // A full claim means more may be due: keep going without waiting for the timer.
        if (this.#backlog && this.#timer) void this.poll();
      });
    this.#inFlight.add(run);
  }

  /** Stops claiming and waits for attempts in flight (each bounded by the delivery timeout). */
  async stop(): Promise<void> {
    this.#running = false;
    this.#fanOut.detachLocalWorker(this);
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled([...this.#inFlight]);
    this.#deliveries.closeConnections();
  }
}
