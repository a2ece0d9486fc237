/**
 * A connector's submit pace: a token bucket at the connector's throughput cap (submit_sm PDUs per
 * second, 50 ms of burst), lowered when the SMSC answers ESME_RTHROTTLED or ESME_RMSGQFUL. Each such
 * answer halves the rate (not below one per second) and pauses submits for a while that doubles
 * with each busy answer in a row (100 ms up to 5 s); every second without one gives back a tenth of
 * the cap. The sender pacing upstream (10DLC, per number) decides when a message may go; this bounds
 * what the connector as a whole puts on the link.
 */
const MIN_PAUSE_MS = 100;
const MAX_PAUSE_MS = 5_000;
/** The connector counts as throttled this long after the last busy answer. */
const THROTTLED_FOR_MS = 10_000;

export class SubmitPace {
  readonly cap: number;
  readonly #now: () => number;
  #rate: number;
  #tokens: number;
  #filledAt: number;
  #pausedUntil = 0;
  #busyInARow = 0;
  #lastBusy = -Infinity;
  #lastChange: number;

  constructor(cap: number, now: () => number = () => performance.now()) {
    if (!(cap > 0)) throw new Error('the throughput cap must be positive');
    this.cap = cap;
    this.#now = now;
    this.#rate = cap;
    this.#tokens = this.#burst();
    this.#filledAt = now();
    this.#lastChange = this.#filledAt;
  }

  /** Submits per second allowed now. */
  get rate(): number {
    this.#recover(this.#now());
    return this.#rate;
  }

  /** Whether the SMSC asked to slow down within the last ten seconds. */
  get throttled(): boolean {
    return this.#now() - this.#lastBusy < THROTTLED_FOR_MS;
  }

  /** Takes a submit's slot: 0 when it may go now (the slot is taken), else the milliseconds to wait before asking again. */
  take(): number {
    const now = this.#now();
    if (now < this.#pausedUntil) return Math.ceil(this.#pausedUntil - now);
    this.#recover(now);
    this.#tokens = Math.min(this.#burst(), this.#tokens + ((now - this.#filledAt) / 1000) * this.#rate);
    this.#filledAt = now;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil(((1 - this.#tokens) / this.#rate) * 1000));
  }

  /** The SMSC answered busy (ESME_RTHROTTLED, ESME_RMSGQFUL). */
  busy(): void {
    const now = this.#now();
    this.#busyInARow += 1;
    this.#lastBusy = now;
    this.#lastChange = now;
    this.#rate = Math.max(1, this.#rate / 2);
    this.#tokens = 0;
    this.#filledAt = now;
    this.#pausedUntil = now + Math.min(MAX_PAUSE_MS, MIN_PAUSE_MS * 2 ** (this.#busyInARow - 1));
  }

  /** A submit was answered (not busy). */
  answered(): void {
    this.#busyInARow = 0;
  }

  #burst(): number {
    return Math.max(1, this.#rate * 0.05);
  }

  #recover(now: number): void {
    if (this.#rate >= this.cap) return;
    const seconds = Math.floor((now - this.#lastChange) / 1000);
    if (seconds < 1) return;
    this.#rate = Math.min(this.cap, this.#rate + (this.cap / 10) * seconds);
    this.#lastChange += seconds * 1000;
  }
}
