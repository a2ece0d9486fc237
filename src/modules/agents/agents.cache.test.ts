/** The per-instance cache of agents as turns read them (agents.cache.ts), over a fake change feed. */
import { describe, expect, it } from 'vitest';
import type { Agent } from './agents.entities.ts';
import { AgentCache } from './agents.cache.ts';

const T1 = { organizationId: 'org_1', mode: 'test' as const };
const T2 = { organizationId: 'org_2', mode: 'test' as const };

function setup(opts: { failStarts?: number; settleMs?: number } = {}) {
  const rows = new Map<string, Partial<Agent>>([['agt_a', { id: 'agt_a', organizationId: 'org_1', mode: 'test', name: 'A1' }], ['agt_b', { id: 'agt_b', organizationId: 'org_1', mode: 'test', name: 'B1' }]]);
  let reads = 0;
  let clock = 0;
  let failStarts = opts.failStarts ?? 0;
  /** When set, reads wait for it (a read in flight). */
  let gate: Promise<void> | undefined;
  const feed = { connected: false, starts: 0, stopped: false, changed: (_p: string | undefined) => {}, reconnected: () => {} };
  const cache = new AgentCache({
    read: async (tenant, id) => {
      reads++;
      const row = rows.get(id);
      const snapshot = row && row.organizationId === tenant.organizationId && row.mode === tenant.mode ? ({ ...row } as Agent) : null;
      if (gate) await gate;
      return snapshot;
    },
    feed: (h) => {
      feed.changed = h.changed;
      feed.reconnected = h.reconnected;
      return {
        start: async () => {
          feed.starts++;
          if (failStarts-- > 0) throw new Error('no connection');
          feed.connected = true;
        },
        stop: async () => { feed.stopped = true; feed.connected = false; },
        get connected() { return feed.connected; },
      };
    },
    ttlMs: 1000, retryMs: 100, now: () => clock, ...(opts.settleMs !== undefined ? { settleMs: opts.settleMs } : {}),
  });
  const name = async (id: string, tenant = T1) => (await cache.get(tenant, id))?.name ?? null;
  const settle = () => new Promise((r) => setImmediate(r));
  return {
    cache, rows, feed, name, settle,
    reads: () => reads,
    advance: (ms: number) => { clock += ms; },
    hold: () => { let open!: () => void; gate = new Promise((r) => { open = r; }); return () => { gate = undefined; open(); }; },
  };
}

describe('agent cache', () => {
  it('reads through until it listens, then keeps agents until a change is heard', async () => {
    const s = setup();
    expect(await s.name('agt_a')).toBe('A1');
    await s.settle();
    expect(s.feed.starts).toBe(1);
    expect(s.cache.size).toBe(0);
    expect(await s.name('agt_a')).toBe('A1');
    expect(await s.name('agt_a')).toBe('A1');
    expect(s.reads()).toBe(2);
    s.rows.get('agt_a')!.name = 'A2';
    expect(await s.name('agt_a')).toBe('A1');
    s.feed.changed('agt_b,agt_a');
    expect(await s.name('agt_a')).toBe('A2');
    expect(s.reads()).toBe(3);
  });

  it('answers another tenant as missing, and keeps no miss', async () => {
    const s = setup();
    await s.name('agt_a');
    await s.settle();
    await s.name('agt_a');
    expect(await s.name('agt_a', T2)).toBeNull();
    expect(await s.name('agt_x')).toBeNull();
    s.rows.set('agt_x', { id: 'agt_x', organizationId: 'org_1', mode: 'test', name: 'X' });
    expect(await s.name('agt_x')).toBe('X');
  });

  it('does not keep a read that was in flight when a change was heard', async () => {
    const s = setup();
    await s.name('agt_a');
    await s.settle();
    const release = s.hold();
    const inFlight = s.name('agt_a');
    s.rows.get('agt_a')!.status = 'paused';
    s.feed.changed('agt_a');
    release();
    expect(await inFlight).toBe('A1');
    expect((await s.cache.get(T1, 'agt_a'))!.status).toBe('paused');
  });

  it('forget drops an agent at once and spoils reads in flight', async () => {
    const s = setup();
    await s.name('agt_a');
    await s.settle();
    await s.name('agt_b');
    const release = s.hold();
    const inFlight = s.name('agt_a');
    s.rows.get('agt_a')!.name = 'A2';
    s.rows.get('agt_b')!.name = 'B2';
    s.cache.forget('agt_b');
    release();
    await inFlight;
    expect(await s.name('agt_b')).toBe('B2');
    expect(await s.name('agt_a')).toBe('A2');
  });

  it('a `*` notification, a lost connection and its return drop everything; nothing is kept while it is down', async () => {
    const s = setup();
    await s.name('agt_a');
    await s.settle();
    await s.name('agt_a');
    s.rows.get('agt_a')!.name = 'A2';
    s.feed.changed('*');
    expect(await s.name('agt_a')).toBe('A2');
    s.feed.connected = false;
    s.rows.get('agt_a')!.name = 'A3';
    expect(await s.name('agt_a')).toBe('A3');
    expect(s.cache.size).toBe(0);
    s.feed.connected = true;
    s.feed.reconnected();
    const before = s.reads();
    expect(await s.name('agt_a')).toBe('A3');
    expect(await s.name('agt_a')).toBe('A3');
    expect(s.reads()).toBe(before + 1);
  });

  it('an entry lives at most the TTL; cached agents cannot be changed', async () => {
    const s = setup();
    await s.name('agt_a');
    await s.settle();
    const a = await s.cache.get(T1, 'agt_a');
    expect(() => { (a as { name: string }).name = 'changed'; }).toThrow(TypeError);
    s.rows.get('agt_a')!.name = 'A2';
    s.advance(999);
    expect(await s.name('agt_a')).toBe('A1');
    s.advance(1);
    expect(await s.name('agt_a')).toBe('A2');
  });

  it('retries a failed start after the pause, and stops listening on close', async () => {
    const s = setup({ failStarts: 1 });
    await s.name('agt_a');
    await s.settle();
    await s.name('agt_a');
    expect(s.feed.starts).toBe(1);
    s.advance(100);
    await s.name('agt_a');
    await s.settle();
    expect(s.feed.starts).toBe(2);
    await s.name('agt_a');
    expect(s.cache.size).toBe(1);
    await s.cache.close();
    expect(s.feed.stopped).toBe(true);
    expect(s.cache.size).toBe(0);
    const before = s.reads();
    await s.name('agt_a');
    expect(s.reads()).toBe(before + 1);
  });

  describe('changing: a change answers once this instance has heard its notification', () => {
    const live = async (settleMs: number) => {
      const s = setup({ settleMs });
      await s.name('agt_a');
      await s.settle();
      await s.name('agt_a');
      expect(s.cache.has('agt_a')).toBe(true);
      return s;
    };

    it('waits for the notification naming the agent (not another agent), and drops the agent', async () => {
      const s = await live(60_000);
      let done = false;
      const change = s.cache.changing('agt_a', async () => 'committed').then((v) => { done = true; return v; });
      await s.settle();
      await s.settle();
      expect(done).toBe(false);
      expect(s.cache.has('agt_a')).toBe(false);
      s.feed.changed('agt_b');
      await s.settle();
      expect(done).toBe(false);
      s.feed.changed('agt_b,agt_a');
      expect(await change).toBe('committed');
    });

    it('counts a notification read before the change itself returned (it may overtake the COMMIT reply)', async () => {
      const s = await live(60_000);
      expect(await s.cache.changing('agt_a', async () => { s.feed.changed('agt_a'); return 1; })).toBe(1);
      expect(await s.cache.changing('agt_b', async () => { s.feed.changed('*'); return 2; })).toBe(2);
    });

    it('gives up after settleMs when nothing is heard', async () => {
      const s = await live(40);
      const started = Date.now();
      await s.cache.changing('agt_a', async () => undefined);
      expect(Date.now() - started).toBeGreaterThanOrEqual(35);
    });

    it('a failed change waits for nothing; while not listening nothing is waited for', async () => {
      const s = await live(60_000);
      await expect(s.cache.changing('agt_a', async () => { throw new Error('conflict'); })).rejects.toThrow('conflict');
      s.feed.connected = false;
      expect(await s.cache.changing('agt_a', async () => 3)).toBe(3);
    });
  });
});
