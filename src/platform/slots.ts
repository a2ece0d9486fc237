/** At most `size` tasks at once; the others wait their turn in order (external programs that take a core each: text to speech, speech to text). */
export class Slots {
  readonly #size: number;
  #running = 0;
  readonly #queue: (() => void)[] = [];

  constructor(size: number) {
    this.#size = Math.max(1, size);
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running < this.#size) this.#running += 1;
    else await new Promise<void>((r) => this.#queue.push(r));
    try {
      return await task();
    } finally {
      const next = this.#queue.shift();
      if (next) next();
      else this.#running -= 1;
    }
  }
}
