/**
 * Group execution for hot-path statements (group commit). Concurrent callers `submit` one item
 * each; the batcher hands every item queued in the same turn of the event loop, or while earlier
 * batches were in flight, to one `run` call: one database round trip for many requests. At low
 * load a batch holds one item and waits no timer, so latency does not grow; under load batches grow
 * by themselves and the per-request cost of statements, syscalls and commits shrinks.
 *
 * Each caller still gets its own outcome: `run` returns one result per item (an `Error` in a slot
 * rejects only that caller). When `run` throws for a batch of several items and `isolate` is set,
 * each item is run again alone, so one bad item (a constraint violation, an unencodable value)
 * fails only its own caller.
 */
export type BatchRun<I, O> = (items: I[]) => Promise<(O | Error)[]>;

export type BatcherOptions = {
  /** Most items in one batch (default 256). */
  maxBatch?: number;
  /** Batches running at once (default 1; more use more pool connections). */
  maxInFlight?: number;
  /** Re-run each item alone when a batch of several fails as a whole. */
  isolate?: boolean;
};

type Pending<I, O> = { item: I; resolve: (value: O) => void; reject: (error: unknown) => void };

export class Batcher<I, O> {
  readonly #run: BatchRun<I, O>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #isolate: boolean;
  #queue: Pending<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(run: BatchRun<I, O>, options: BatcherOptions = {}) {
    this.#run = run;
    this.#maxBatch = options.maxBatch ?? 256;
    this.#maxInFlight = options.maxInFlight ?? 1;
    this.#isolate = options.isolate ?? false;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  /** Items waiting for a batch (for tests and diagnostics). */
  get queued(): number {
    return this.#queue.length;
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    this.#scheduled = true;
    // setImmediate: callers reached in this turn of the event loop (requests read from several
    // sockets in one poll) join the same batch.
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      this.#inFlight++;
      void this.#execute(batch).finally(() => {
        this.#inFlight--;
        this.#schedule();
      });
    }
  }

  async #execute(batch: Pending<I, O>[]): Promise<void> {
    let results: (O | Error)[];
    try {
      results = await this.#run(batch.map((p) => p.item));
      if (results.length !== batch.length) throw new Error(`batch returned ${results.length} results for ${batch.length} items`);
    } catch (error) {
      if (this.#isolate && batch.length > 1) {
        await Promise.all(batch.map((p) => this.#execute([p])));
        return;
      }
      for (const p of batch) p.reject(error);
      return;
    }
    batch.forEach((p, i) => {
      const r = results[i];
      if (r instanceof Error) p.reject(r);
      else p.resolve(r as O);
    });
  }
}
