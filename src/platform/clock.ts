/** Injectable time: services take a Clock so retries, expiries and windows are tested without sleeping. */
export type Clock = {
  now(): Date;
  /** Resolves after `ms` of this clock's time has passed. */
  sleep(ms: number): Promise<void>;
};

export const systemClock: Clock = {
  now: () => new Date(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms))),
};

/** A clock that only moves when told to; sleepers wake when `advance` passes their deadline. */
export class ManualClock implements Clock {
  #now: number;
  #sleepers: { until: number; resolve: () => void }[] = [];

  constructor(start: Date | number = Date.UTC(2026, 0, 1)) {
    this.#now = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.#now);
  }

  sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => this.#sleepers.push({ until: this.#now + ms, resolve }));
  }

  get pendingSleepers(): number {
    return this.#sleepers.length;
  }

  advance(ms: number): void {
    this.set(this.#now + ms);
  }

  set(time: Date | number): void {
    this.#now = typeof time === 'number' ? time : time.getTime();
    const due = this.#sleepers.filter((s) => s.until <= this.#now);
    this.#sleepers = this.#sleepers.filter((s) => s.until > this.#now);
    for (const s of due) s.resolve();
  }
}
