/**
 * The loop of a table of due rows, the base of the sandboxes' timelines (voice's call steps,
 * messaging's delivery reports): a subclass's `tick` claims and applies what is due and says how
 * many rows it claimed. The
 * loop ticks again at once after a full batch (more are due), otherwise sleeps until the next look
 * (`tickMs`) or until something this instance scheduled falls due (`wake(at)`), whichever is first.
 * A tick that throws is logged and the loop goes on; `stop` ends the sleep and waits for the tick
 * under way.
 */
import type { Logger } from '../logger.ts';

export type DueTickerOptions = {
  /** Rows a tick claims at most: a tick that claimed this many ticks again at once. */
  batch: number;
  /** How often the loop looks when nothing of this instance's falls due sooner (ms). */
  tickMs: number;
  log: Logger;
  /** Names the loop in its log lines (`voice sandbox timeline`). */
  name: string;
};

export abstract class DueTicker {
  readonly #o: DueTickerOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  /** The pending sleep's wake-up: its time and how to end it early. */
  #sleep: { until: number; timer: NodeJS.Timeout; resolve: () => void } | undefined;
  /** Something of this instance's falls due before the loop would look again: look then. */
  #wanted = Number.POSITIVE_INFINITY;

  constructor(options: DueTickerOptions) {
    this.#o = options;
  }

  /** Claims the due rows and applies them; returns how many it claimed. */
  abstract tick(): Promise<number>;

  get running(): boolean {
    return this.#running;
  }

  /** Something of this instance's falls due at `at` (ms since the epoch): the loop looks then. */
  wake(at: number): void {
    if (!this.#running) return;
    this.#wanted = Math.min(this.#wanted, at);
    const sleep = this.#sleep;
    if (sleep && at < sleep.until) {
      clearTimeout(sleep.timer);
      this.#sleep = undefined;
      if (at <= Date.now()) sleep.resolve();
      else this.#nap(at, sleep.resolve);
    }
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    const sleep = this.#sleep;
    if (sleep) {
      clearTimeout(sleep.timer);
      this.#sleep = undefined;
      sleep.resolve();
    }
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (this.#running) {
      let claimed = 0;
      try {
        this.#wanted = Number.POSITIVE_INFINITY;
        claimed = await this.tick();
      } catch (e) {
        this.#o.log.warn({ err: e }, `${this.#o.name}: tick failed`);
      }
      if (!this.#running) return;
      // A full batch: more are due now. Otherwise sleep until the next look or a row of ours falls due.
      if (claimed >= this.#o.batch) continue;
      const until = Math.min(Date.now() + this.#o.tickMs, this.#wanted);
      if (until <= Date.now()) continue;
      await new Promise<void>((resolve) => this.#nap(until, resolve));
    }
  }

  #nap(until: number, resolve: () => void): void {
    const timer = setTimeout(() => {
      this.#sleep = undefined;
      resolve();
    }, Math.max(0, until - Date.now()));
    this.#sleep = { until, timer, resolve };
  }
}
