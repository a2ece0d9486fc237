/**
 * What the contacts test files share (test/contacts*.test.ts): the file's app on a manual clock
 * with two enterprise organizations and a viewer key of the first, and calls that move the frozen
 * clock on so enterprise bursts (100/s per key) never queue.
 */
import { expect } from 'vitest';
import type { ManualClock } from '../../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './testApp.ts';

export type ContactsApp = { t: TestApp; org: TestOrg; other: TestOrg; viewerKey: string; close(): Promise<void> };

export async function startContactsApp(): Promise<ContactsApp> {
  const t = await startTestApp();
  const org = await t.createOrg('enterprise', 'Contacts org');
  const other = await t.createOrg('enterprise', 'Other org');
  const viewerKey = await t.createKey(org.orgId, 'viewer');
  return { t, org, other, viewerKey, close: () => t.close() };
}

export function contactsHelpers(app: () => TestApp, defaultOrg: () => TestOrg) {
  /** Enterprise bursts 100/s per key on a frozen clock: move a second on before each burst. */
  const tick = () => (app().clock as ManualClock).advance(1000);
  let seq = 0;
  const phone = () => `+1415555${String(2000 + ++seq).padStart(4, '0')}`;
  const rest = (method: string, path: string, body?: unknown, key = defaultOrg().testKey) => { tick(); return app().rest(method, path, { key, body }); };
  const create = async (body: Record<string, unknown>) => {
    const r = await rest('POST', '/v1/contacts', body);
    expect(r.status, r.text).toBe(201);
    return r.body.data;
  };
  /** The number the last `phone()` used (to make an email of the same contact unique too). */
  const lastSeq = () => seq;
  return { tick, phone, lastSeq, rest, create };
}
