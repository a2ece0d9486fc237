/**
 * A dedicated PostgreSQL connection that LISTENs on one channel, for the event bus (live notices)
 * and the outbox relay (new events). Connecting is bounded by `connectTimeoutMs` (a server that
 * accepts and never answers must not hold a process's start-up); a connection lost later (the
 * database restarted, the backend terminated) is re-established every second until it is back
 * or the listener is stopped, and `onReconnect` runs then (notices sent meanwhile were missed).
 */
import pg from 'pg';
import type { Logger } from '../logger.ts';

export type ListenerOptions = {
  url: string;
  channel: string;
  connectTimeoutMs: number;
  log: Logger;
  onNotification(payload: string | undefined): void;
  onReconnect?(): void;
};

const RECONNECT_MS = 1000;

export class Listener {
  readonly #o: ListenerOptions;
  #client: pg.Client | undefined;
  #stopped = true;

  constructor(options: ListenerOptions) {
    this.#o = options;
  }

  /** Connects and listens; rejects when the first connection fails (later losses reconnect by themselves). */
  async start(): Promise<void> {
    this.#stopped = false;
    await this.#connect();
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#o.url, connectionTimeoutMillis: this.#o.connectTimeoutMs });
    let connected = false;
    let lostOnce = false;
    const lost = () => {
      if (!connected || lostOnce) return;
      lostOnce = true;
      if (this.#client === client) this.#client = undefined;
      void client.end().catch(() => {});
      if (!this.#stopped && this.#client === undefined) this.#retry();
    };
    client.on('notification', (msg) => this.#o.onNotification(msg.payload));
    // Listeners from the start: an 'error' event without one would throw; before `connected` they ignore it (connect rejects).
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      await client.query(`listen ${this.#o.channel}`);
    } catch (e) {
      await client.end().catch(() => {});
      throw e;
    }
    connected = true;
    if (this.#stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
  }

  #retry(): void {
    setTimeout(() => {
      if (this.#stopped || this.#client) return;
      this.#connect().then(() => {
        if (this.#client) {
          this.#o.log.info({ channel: this.#o.channel }, 'LISTEN connection re-established');
          this.#o.onReconnect?.();
        }
      }, (e: unknown) => {
        this.#o.log.warn({ err: e, channel: this.#o.channel }, 'LISTEN reconnect failed; retrying');
        this.#retry();
      });
    }, RECONNECT_MS).unref();
  }

  /** The listening connection while it is up (autocommit; e.g. to NOTIFY on it), else undefined. */
  get connection(): pg.Client | undefined {
    return this.#client;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const c = this.#client;
    this.#client = undefined;
    await c?.end().catch(() => {});
  }
}
