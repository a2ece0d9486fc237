/**
 * Agents as chat turns read them, kept per instance so that a turn waits for no read of its agent
 * before its first chunk (the rate-limit admission is then the only round trip). Kept only while
 * the instance LISTENs on `agents_changed`, which a trigger on `agents` NOTIFYs at the commit of
 * any statement that changes or removes agents (migration 20261129070000), whoever made it: the
 * API of any instance, a job, SQL by hand. The instance that makes a change also drops the agent
 * itself before it answers (`forget`), so its own next request never waits for the notification.
 *
 * It also waits, before it answers, until its own LISTEN connection has heard that change
 * (`changing`, at most `settleMs`): PostgreSQL signals every listening session at the same commit,
 * and a listening backend sends the notification once the OS runs it, which on a loaded machine
 * came after the answer had gone out and the client's next request had reached another instance
 * (CI, session 20: a chat there answered from the agent as it was before a pause). Once the
 * changing instance has heard it, the others' backends have as a rule sent it too; the wait costs
 * the write about a round trip.
 *
 * So "PUT … effective for new conversations at once" holds across instances as far as NOTIFY
 * delivery allows: PostgreSQL signals the listening sessions while the changing transaction
 * commits, before its client hears the commit, so the notification is on its way before the PUT's
 * answer leaves; an instance handles it as soon as its event loop reads it. A read already in
 * flight when a change is heard is not kept (a generation count), nothing is kept while the LISTEN
 * connection is down, everything is dropped when it comes back, and an entry lives at most
 * `ttlMs` even if a notification were lost. Cached agents are shared by turns: never changed.
 */
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Agent } from './agents.entities.ts';

export const AGENTS_CHANGED_CHANNEL = 'agents_changed';

/** The LISTEN side (platform/db/listen.ts `Listener` in the service; a fake in unit tests). */
export type ChangeFeed = {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Whether the LISTEN connection is up now. */
  readonly connected: boolean;
};

export type AgentCacheOptions = {
  read: (tenant: TenantRef, id: string) => Promise<Agent | null>;
  /** Builds the feed; it calls `changed(payload)` per notification and `reconnected()` after a lost connection came back. */
  feed: (handlers: { changed(payload: string | undefined): void; reconnected(): void }) => ChangeFeed;
  /** Upper bound on an entry's life (default 30 s). */
  ttlMs?: number;
  /** Entries kept at most (all dropped past it). */
  maxEntries?: number;
  /** After a failed start, the next attempt waits this long (default 5 s). */
  retryMs?: number;
  /** Most a change waits to hear its own notification (`changing`; default 250 ms). */
  settleMs?: number;
  now?: () => number;
};

type Entry = { agent: Agent; at: number };

export class AgentCache {
  readonly #read: AgentCacheOptions['read'];
  readonly #feed: ChangeFeed;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #retryMs: number;
  readonly #settleMs: number;
  readonly #now: () => number;
  /** Changes under way here that wait to hear their notification, by agent id. */
  readonly #waiting = new Map<string, Set<() => void>>();
  readonly #entries = new Map<string, Entry>();
  /** Bumped by every change heard (and by the feed coming up): a read begun before it is not kept. */
  #generation = 0;
  /** Listening and the generation bumped since it came up. */
  #live = false;
  #starting: Promise<void> | undefined;
  #nextStart = 0;
  #closed = false;

  constructor(o: AgentCacheOptions) {
    this.#read = o.read;
    this.#ttlMs = o.ttlMs ?? 30_000;
    this.#maxEntries = o.maxEntries ?? 10_000;
    this.#retryMs = o.retryMs ?? 5000;
    this.#settleMs = o.settleMs ?? 250;
    this.#now = o.now ?? Date.now;
    this.#feed = o.feed({
      changed: (payload) => this.#changed(payload),
      reconnected: () => this.#reset(),
    });
  }

  /** The tenant's agent `id` (null when there is none): from the cache while it is live, else read. */
  async get(tenant: TenantRef, id: string): Promise<Agent | null> {
    if (!this.#listening()) return this.#read(tenant, id);
    const hit = this.#entries.get(id);
    if (hit && this.#now() - hit.at < this.#ttlMs && hit.agent.organizationId === tenant.organizationId && hit.agent.mode === tenant.mode) return hit.agent;
    const generation = this.#generation;
    const agent = await this.#read(tenant, id);
    if (agent && generation === this.#generation && this.#listening()) {
      if (this.#entries.size >= this.#maxEntries) this.#entries.clear();
      this.#entries.set(id, { agent: Object.freeze(agent), at: this.#now() });
    }
    return agent;
  }

  /** Drops the agent here at once (this instance changed it; the others hear the commit's NOTIFY). */
  forget(id: string): void {
    this.#generation++;
    this.#entries.delete(id);
  }

  /**
   * Runs `change` (a transaction that changes or removes agent `id` in the table), drops the agent
   * here, then waits until this instance has heard the change's notification (at most `settleMs`;
   * not at all while not listening). A change that fails waits for nothing. A notification of the
   * same agent heard while `change` runs (another change that committed first) also ends the wait:
   * the answer may then go out before its own notification, as it did before this wait existed.
   */
  async changing<T>(id: string, change: () => Promise<T>): Promise<T> {
    if (!this.#live || !this.#feed.connected || this.#settleMs <= 0) {
      try {
        return await change();
      } finally {
        this.forget(id);
      }
    }
    // Waiting before the change runs: its notification may be read before its COMMIT's reply.
    let heard!: () => void;
    const notified = new Promise<void>((resolve) => { heard = resolve; });
    const waiters = this.#waiting.get(id) ?? new Set();
    waiters.add(heard);
    this.#waiting.set(id, waiters);
    let timer: NodeJS.Timeout | undefined;
    try {
      const out = await change();
      this.forget(id);
      await Promise.race([notified, new Promise<void>((resolve) => { timer = setTimeout(resolve, this.#settleMs); })]);
      return out;
    } catch (e) {
      this.forget(id);
      throw e;
    } finally {
      clearTimeout(timer);
      waiters.delete(heard);
      if (waiters.size === 0 && this.#waiting.get(id) === waiters) this.#waiting.delete(id);
    }
  }

  /** Entries held (tests, diagnostics). */
  get size(): number {
    return this.#entries.size;
  }

  /** Whether agent `id` is held now (tests, diagnostics). */
  has(id: string): boolean {
    return this.#entries.has(id);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#live = false;
    this.#entries.clear();
    await this.#starting?.catch(() => {});
    await this.#feed.stop();
  }

  /** Whether entries may be used and kept; starts listening on first use (and again after a failed start). */
  #listening(): boolean {
    if (this.#live && this.#feed.connected) return true;
    if (this.#live) this.#reset();
    if (!this.#starting && !this.#closed && this.#now() >= this.#nextStart) {
      this.#starting = this.#feed.start().then(() => {
        if (this.#closed) return;
        this.#reset();
        this.#live = true;
      }, () => {
        this.#nextStart = this.#now() + this.#retryMs;
        this.#starting = undefined;
      });
    }
    return false;
  }

  #changed(payload: string | undefined): void {
    this.#generation++;
    if (!payload || payload === '*') {
      this.#entries.clear();
      for (const waiters of this.#waiting.values()) for (const heard of waiters) heard();
      return;
    }
    for (const id of payload.split(',')) {
      this.#entries.delete(id);
      const waiters = this.#waiting.get(id);
      if (waiters) for (const heard of waiters) heard();
    }
  }

  /** Everything dropped (the connection came back: changes may have been missed meanwhile). */
  #reset(): void {
    this.#generation++;
    this.#entries.clear();
  }
}
