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
  /** Longest a follower's queue waits for a leader's statement before it sends its own (default 20 ms; see Batcher.follow). */
  followWaitMs?: number;
};

type Pending<I, O> = { item: I; resolve: (value: O) => void; reject: (error: unknown) => void };

/**
 * Queued items handed over to run in another batcher's statement ({@link Batcher.handOver}): the
 * taker answers each (`settle`, one result per item, an Error rejecting only its caller) or all
 * (`fail`), or gives them back when its statement never ran (`putBack`).
 */
export type HandedOver<I, O> = {
  items: I[];
  settle(results: (O | Error)[]): void;
  fail(error: unknown): void;
  /** Gives the items back, at the head of the queue, for this batcher's own next statement (the taker's never ran). */
  putBack(): void;
};

export class Batcher<I, O> {
  readonly #run: BatchRun<I, O>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #isolate: boolean;
  #queue: Pending<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;
  /** Batchers whose statement carries this one's queue when they flush in the same turn (see {@link follow}). */
  readonly #leaders: (() => boolean)[] = [];
  /** Items were given back by a taker whose statement failed: the next batch is this one's own. */
  #ownNext = false;
  /** Waiting for a leader's statement to take the queue (see {@link follow}): the fallback that sends it here. */
  #waiting: ReturnType<typeof setTimeout> | undefined;
  readonly #followWaitMs: number;

  constructor(run: BatchRun<I, O>, options: BatcherOptions = {}) {
    this.#run = run;
    this.#maxBatch = options.maxBatch ?? 256;
    this.#maxInFlight = options.maxInFlight ?? 1;
    this.#isolate = options.isolate ?? false;
    this.#followWaitMs = options.followWaitMs ?? 20;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  /**
   * A batch of this one's turn is about to start: a flush is scheduled and a batch may go (another
   * batcher following this one then leaves its queue to this one's statement).
   */
  get flushing(): boolean {
    return this.#scheduled && this.#inFlight < this.#maxInFlight;
  }

  /**
   * Lets a leader's statement carry this batcher's queue: when this one's turn comes while
   * `leaderComing()` says a statement of the leader is coming (about to go in this turn, or queued
   * behind its batch in flight), this one does not send its own statement; the leader takes the
   * queue when it goes ({@link handOver}), and items queued after that get a turn of their own
   * again. If no leader has taken it within `followWaitMs` the queue goes out here, so nothing
   * waits on a stalled leader for longer. (No turn is spent spinning meanwhile: a timer, not
   * setImmediate, holds the wait.)
   */
  follow(leaderComing: () => boolean): void {
    this.#leaders.push(leaderComing);
  }

  /** The queue was taken or given back: stop waiting for a leader (the next item schedules a turn again). */
  #stopWaiting(): void {
    if (this.#waiting === undefined) return;
    clearTimeout(this.#waiting);
    this.#waiting = undefined;
    this.#scheduled = false;
  }

  /** Takes every queued item (none in flight) for another statement to run; undefined when none is queued. */
  handOver(): HandedOver<I, O> | undefined {
    // Items given back go out in this batcher's own next batch, whoever flushes first.
    if (this.#queue.length === 0 || this.#ownNext) return undefined;
    const taken = this.#queue.splice(0, this.#queue.length);
    this.#stopWaiting();
    return {
      items: taken.map((p) => p.item),
      settle: (results) => taken.forEach((p, i) => {
        const r = results[i];
        if (r instanceof Error) p.reject(r);
        else if (i >= results.length) p.reject(new Error(`handed-over batch returned ${results.length} results for ${taken.length} items`));
        else p.resolve(r as O);
      }),
      fail: (error) => { for (const p of taken) p.reject(error); },
      putBack: () => {
        this.#queue.unshift(...taken);
        this.#ownNext = true;
        this.#stopWaiting();
        this.#schedule();
      },
    };
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
      if (this.#queue.length > 0 && !this.#ownNext && this.#leaders.some((coming) => coming())) {
        // A leader's coming statement takes the queue (handOver stops the wait); if none has
        // within followWaitMs, it goes out here. Still `scheduled`: new items join the wait.
        this.#waiting = setTimeout(() => {
          this.#waiting = undefined;
          this.#scheduled = false;
          this.#flush();
        }, this.#followWaitMs);
        return;
      }
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      this.#ownNext = false;
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
