/**
 * Group commit for delivery outcomes: each finished attempt is queued, and one statement records
 * everything queued so far. At most one write is in flight, and writes start at most every
 * `minIntervalMs` (a few ms): at a low rate an outcome is written at once, under load each write
 * carries the outcomes of the last few milliseconds instead of one or two (a statement costs the
 * database far more than a row). An outcome waits for at most the interval plus one write before
 * its own — never for another delivery's HTTP request.
 */
import type { DeliveryStatus } from './webhooks.entities.ts';

export type RecordedOutcome = {
  id: string;
  /** The attempt number just made. */
  attempt: number;
  status: Extract<DeliveryStatus, 'success' | 'failed'>;
  nextAttemptAt: Date | null;
  outcome: { status: number | null; timeMs: number | null; error: string | null };
  at: Date;
};

type Queued = { row: RecordedOutcome; resolve: () => void; reject: (e: unknown) => void };

/** Rows per statement (bounded so one statement stays small). */
const MAX_BATCH = 500;

export class OutcomeRecorder {
  readonly #write: (batch: RecordedOutcome[]) => Promise<void>;
  readonly #minIntervalMs: number;
  #queue: Queued[] = [];
  #writing = false;
  #lastWriteAt = -Infinity;

  constructor(write: (batch: RecordedOutcome[]) => Promise<void>, opts: { minIntervalMs?: number } = {}) {
    this.#write = write;
    this.#minIntervalMs = opts.minIntervalMs ?? 5;
  }

  /** Resolves once the outcome is committed (rejects if it could not be written). */
  record(row: RecordedOutcome): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ row, resolve, reject });
      if (!this.#writing) {
        this.#writing = true;
        void this.#drain();
      }
    });
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const wait = this.#lastWriteAt + this.#minIntervalMs - performance.now();
        // Outcomes whose responses arrived in the same turn of the event loop share a write at least.
        await new Promise<void>((resolve) => (wait > 1 ? setTimeout(resolve, Math.ceil(wait)) : setImmediate(resolve)));
        this.#lastWriteAt = performance.now();
        const batch = this.#queue.splice(0, MAX_BATCH);
        try {
          await this.#write(batch.map((q) => q.row));
          for (const q of batch) q.resolve();
        } catch (e) {
          if (batch.length === 1) {
            batch[0]!.reject(e);
            continue;
          }
          // One bad row must not fail the others: write them one by one.
          for (const q of batch) {
            try {
              await this.#write([q.row]);
              q.resolve();
            } catch (err) {
              q.reject(err);
            }
          }
        }
      }
    } finally {
      this.#writing = false;
    }
  }
}
