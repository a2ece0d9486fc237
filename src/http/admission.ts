/**
 * How many API requests one process admits at once. The bound is HTTP_MAX_IN_FLIGHT; while the
 * event loop falls behind (a timer's lateness over HTTP_MAX_LOOP_DELAY_MS) it is lowered, and it
 * is raised again as soon as the loop keeps time. A process that gets less CPU than its admitted
 * work needs (more offered than it can serve, or other work on its cores) otherwise runs ever
 * longer loop turns: each turn accepts and reads what arrived during the previous one, so the
 * connections waiting to be accepted, the shed requests' 503s and the admitted requests all wait
 * seconds (fault scenario 6). Admitting fewer leaves the CPU to answering — a shed request costs
 * about a tenth of an admitted one — the way @fastify/under-pressure sheds on event-loop delay.
 *
 * The policy, checked every SAMPLE_MS: a delay over the target cuts the limit by 30 % (not below
 * `min`); a delay under half the target raises it by half plus one (up to `max`, ~1 s from the
 * floor back to the bound, so a load that drops is served normally again at once).
 */
export const SAMPLE_MS = 100;

export class AdmissionLimit {
  readonly #max: number;
  readonly #min: number;
  readonly #targetMs: number;
  #limit: number;

  /** `max`: HTTP_MAX_IN_FLIGHT (0: no bound); `targetMs`: HTTP_MAX_LOOP_DELAY_MS (0: the bound never moves). */
  constructor(o: { max: number; targetMs: number; min?: number }) {
    this.#max = o.max;
    this.#min = Math.max(1, Math.min(o.max, o.min ?? 8));
    this.#targetMs = o.targetMs;
    this.#limit = o.max;
  }

  /** Requests admitted at once now (0: no bound). */
  get limit(): number {
    return this.#limit;
  }

  /** One sample of the event loop's delay, in ms. */
  observe(delayMs: number): void {
    if (this.#max <= 0 || this.#targetMs <= 0) return;
    if (delayMs > this.#targetMs) this.#limit = Math.max(this.#min, Math.floor(this.#limit * 0.7));
    else if (delayMs < this.#targetMs / 2 && this.#limit < this.#max) this.#limit = Math.min(this.#max, Math.ceil(this.#limit * 1.5) + 1);
  }

  /** Samples the loop's delay every SAMPLE_MS (an unref'd timer's lateness) until the returned stop is called. */
  watch(): () => void {
    if (this.#max <= 0 || this.#targetMs <= 0) return () => {};
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      this.observe(now - last - SAMPLE_MS);
      last = now;
    }, SAMPLE_MS);
    timer.unref();
    return () => clearInterval(timer);
  }
}
