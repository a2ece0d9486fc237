import { describe, expect, it } from 'vitest';
import type { Logger } from '../logger.ts';
import { EventBus, RecentIds, NOTICE_PAYLOAD_BYTES, NOTICES_PER_PAYLOAD, noticePayloads, type LiveNotice } from './bus.ts';

const delivery = (i: number): LiveNotice => ({
  kind: 'delivery', id: `dlv_01m811ttm2wdjhphbar0j${String(i).padStart(5, '0')}`, organizationId: 'org_01m811ttm2wdjhphbar0j1gk3g',
  mode: 'test', endpointId: 'wh_01m811ttm2wdjhphbar0j1gk3g', status: 'cancelled',
});

describe('noticePayloads', () => {
  it('packs notices in order into JSON arrays below the NOTIFY payload limit', () => {
    const notices = Array.from({ length: 1000 }, (_, i) => delivery(i));
    const payloads = noticePayloads(notices);
    expect(payloads.length).toBeGreaterThan(1);
    for (const p of payloads) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(NOTICE_PAYLOAD_BYTES);
    expect(payloads.flatMap((p) => JSON.parse(p) as LiveNotice[])).toEqual(notices);
    expect(noticePayloads([])).toEqual([]);
  });

  it('leaves room for the batches SQL packs (json_agg of NOTICES_PER_PAYLOAD notices, with its spacing)', () => {
    // json_build_object spells each key as `"key" : value`, json_agg separates with `, \n `.
    const sqlSpelled = Array.from({ length: NOTICES_PER_PAYLOAD }, (_, i) =>
      JSON.stringify(delivery(i)).replaceAll('":', '" : ').replaceAll(',"', ', "')).join(', \n ');
    expect(Buffer.byteLength(`[${sqlSpelled}]`)).toBeLessThan(8000);
  });
});

describe('EventBus.subscribe', () => {
  const silent = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {}, child: () => silent } as unknown as Logger;
  const event = (i: number): LiveNotice => ({ kind: 'event', id: `evt_${i}`, organizationId: 'org_1', mode: 'test', type: 'message.queued', resourceId: `msg_${i}` });

  it('hands out waiting notices in order, one at a time or several at once', async () => {
    const bus = new EventBus('postgres://127.0.0.1:1/none', silent, 100, { backlog: 10 });
    const sub = bus.subscribe(() => true);
    bus.deliverLocal([0, 1, 2, 3].map(event));
    expect((await sub.next()).value).toEqual(event(0));
    expect(sub.takeQueued(2)).toEqual([event(1), event(2)]);
    expect(sub.takeQueued(5)).toEqual([event(3)]);
    expect(sub.takeQueued(5)).toEqual([]);
    await sub.return!();
    expect(bus.subscriberCount).toBe(0);
  });

  it('hands an event over once whichever comes first: deliverLocal after the commit, or the NOTIFY of it', async () => {
    const bus = new EventBus('postgres://127.0.0.1:1/none', silent, 100, { backlog: 10 });
    const sub = bus.subscribe(() => true);
    bus.deliverLocal([event(1)]);
    bus.received(JSON.stringify(event(1)));
    // The NOTIFY overtook the COMMIT's reply: deliverLocal comes second.
    bus.received(JSON.stringify([event(2)]));
    bus.deliverLocal([event(2)]);
    // Events committed elsewhere arrive by notice only.
    bus.received(JSON.stringify(event(3)));
    expect(sub.takeQueued(10)).toEqual([event(1), event(2), event(3)]);
    await sub.return!();
  });

  it('ends a subscriber that falls more than the backlog behind, after the notices it holds, with SERVICE_UNAVAILABLE', async () => {
    const bus = new EventBus('postgres://127.0.0.1:1/none', silent, 100, { backlog: 3 });
    const sub = bus.subscribe(() => true);
    bus.deliverLocal([0, 1, 2, 3, 4].map(event));
    expect(bus.subscriberCount).toBe(0); // no more notices are queued for it
    const got = [(await sub.next()).value, (await sub.next()).value, (await sub.next()).value];
    expect(got).toEqual([0, 1, 2].map(event));
    await expect(sub.next()).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { reason: 'subscriber_backlog', backlog: 3 } });
    expect(await sub.next()).toEqual({ value: undefined, done: true });
  });

  it("a subscriber of one resource gets only that resource's notices (and the accept test still applies); watching() tells whether one is there", async () => {
    const bus = new EventBus('postgres://127.0.0.1:1/none', silent, 100, { backlog: 10 });
    const seen: string[] = [];
    const fourth: LiveNotice = { kind: 'event', id: 'evt_4', organizationId: 'org_1', mode: 'test', type: 'message.queued', resourceId: 'msg_1' };
    // The accept test would take every notice: only the resource index keeps the others away.
    const one = bus.subscribe((n) => { seen.push(n.id); return true; }, { resourceId: 'msg_1' });
    const strict = bus.subscribe((n) => n.kind === 'event' && n.organizationId === 'org_2', { resourceId: 'msg_1' });
    const all = bus.subscribe(() => true);
    expect([bus.subscriberCount, bus.watching('msg_1'), bus.watching('msg_2')]).toEqual([3, true, false]);
    bus.deliverLocal([0, 1, 2].map(event));
    bus.received(JSON.stringify([event(3), fourth]));
    expect(one.takeQueued(10)).toEqual([event(1), fourth]);
    expect(seen).toEqual(['evt_1', 'evt_4']);
    expect(strict.takeQueued(10)).toEqual([]);
    expect(all.takeQueued(10)).toEqual([...[0, 1, 2, 3].map(event), fourth]);
    await one.return!();
    expect(bus.watching('msg_1')).toBe(true);
    await strict.return!();
    expect([bus.subscriberCount, bus.watching('msg_1')]).toEqual([1, false]);
    await all.return!();
    expect(bus.subscriberCount).toBe(0);
  });
});

describe('RecentIds', () => {
  it('keeps the last ids added, forgetting the oldest first', () => {
    const ids = new RecentIds(3);
    for (const id of ['a', 'b', 'c', 'd']) ids.add(id);
    expect(['a', 'b', 'c', 'd'].map((id) => ids.delete(id))).toEqual([false, true, true, true]);
    expect(ids.size).toBe(0);
    // Deleted ids leave their ring slot: the ring still forgets in the order of adding.
    for (const id of ['e', 'f', 'g']) ids.add(id);
    ids.delete('e');
    ids.add('h');
    ids.add('i');
    expect(['f', 'g', 'h', 'i'].map((id) => ids.delete(id))).toEqual([false, true, true, true]);
  });
});
