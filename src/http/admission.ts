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

  /**
   * Samples the loop's delay every SAMPLE_MS (an unref'd timer's lateness) until the returned stop
   * is called; `onSample` runs after each sample (the bound may have moved).
   */
  watch(onSample?: () => void): () => void {
    if (this.#max <= 0 || this.#targetMs <= 0) return () => {};
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      this.observe(now - last - SAMPLE_MS);
      last = now;
      onSample?.();
    }, SAMPLE_MS);
    timer.unref();
    return () => clearInterval(timer);
  }
}

type Waiter = { admit: () => void; shed: () => void; timer: NodeJS.Timeout };

/**
 * The slots of an AdmissionLimit, and the short wait before a shed: a request past the bound waits
 * (its body unread, first come first served) up to `waitMs` for a slot, and is shed with 503 only
 * when none frees in time, or at once when `maxWaiting` already wait. Without the wait, a process
 * that stalled for a few hundred milliseconds (a major collection, a busy core) shed the burst that
 * arrived meanwhile, at half its sustained load (fault scenario 7, session 14).
 *
 * A wait that ran out says the excess is not a burst but an overload: every request past the bound
 * is then shed at once, as without a wait (the way CoDel stops queueing once its queue stayed
 * long), until none came past the bound for `5 × waitMs`. Waiting through an overload held hundreds
 * of connections open for the wait, the clients opened more, and a gateway at 3× its sustained load
 * answered half as many requests with a p99 of 4.4 s (scenario 6, session 14). Shedding at once for
 * a fixed 5 × waitMs after each expired wait still let every sixth of the overload wait: its
 * admitted requests carried the wait, and the accepted p99 rose from 141 to 204 ms, past 3× the
 * 67 ms at saturation (scenario 6 on a quiet machine, session 15).
 */
export class Admission {
  readonly #limit: AdmissionLimit;
  readonly #waitMs: number;
  readonly #maxWaiting: number;
  readonly #waiting = new Set<Waiter>();
  #admitted = 0;
  /** Until when (performance.now()) requests past the bound are shed without a wait. */
  #shedUntil = 0;

  constructor(limit: AdmissionLimit, o: { waitMs: number; maxWaiting: number }) {
    this.#limit = limit;
    this.#waitMs = o.waitMs;
    this.#maxWaiting = o.maxWaiting;
  }

  get admitted(): number {
    return this.#admitted;
  }

  get waiting(): number {
    return this.#waiting.size;
  }

  /**
   * Calls `admit` at once or when a slot frees within the wait (each admitted request gives its
   * slot back with `release`), else `shed`. The returned function withdraws a waiting request (its
   * client went away); it does nothing once the request was admitted or shed.
   */
  enter(admit: () => void, shed: () => void): () => void {
    if (this.#waiting.size === 0 && this.#admitted < this.#limit.limit) {
      this.#admitted++;
      admit();
      return () => {};
    }
    if (this.#waitMs <= 0 || this.#waiting.size >= this.#maxWaiting) {
      shed();
      return () => {};
    }
    const now = performance.now();
    if (now < this.#shedUntil) {
      // Still past the bound during the overload: it goes on, and so does shedding without a wait.
      this.#shedUntil = now + 5 * this.#waitMs;
      shed();
      return () => {};
    }
    const waiter: Waiter = {
      admit, shed,
      timer: setTimeout(() => {
        if (!this.#waiting.delete(waiter)) return;
        this.#shedUntil = performance.now() + 5 * this.#waitMs;
        shed();
      }, this.#waitMs),
    };
    this.#waiting.add(waiter);
    return () => {
      if (this.#waiting.delete(waiter)) clearTimeout(waiter.timer);
    };
  }

  /** A slot given back: the longest-waiting requests are admitted while slots are free. */
  release(): void {
    this.#admitted--;
    this.wake();
  }

  /** Admits waiting requests while the bound allows (also after the bound was raised). */
  wake(): void {
    for (const w of this.#waiting) {
      if (this.#admitted >= this.#limit.limit) return;
      this.#waiting.delete(w);
      clearTimeout(w.timer);
      this.#admitted++;
      w.admit();
    }
  }
}
