/**
 * What the auth test files share (test/auth*.test.ts): the file's app on a manual clock (a fresh
 * second for every test: requests are rate limited per second of that clock), and calls for
 * organizations, the audit log, the caller's identity and key creation.
 */
import { beforeEach, expect } from 'vitest';
import type { ManualClock } from '../../src/platform/clock.ts';
import { eventually } from './assertions.ts';
import { startTestApp, useFileApp, type HttpResponse, type TestApp, type TestOrg } from './testApp.ts';

export type AuditEntry = {
  id: string; actor_type: string; actor_id: string | null; action: string; resource_type: string | null;
  resource_id: string | null; ip: string | null; request_id: string | null; details: Record<string, unknown>; created_at: string;
};

/** The file's app; every test starts a second later on its manual clock. */
export function useAuthApp(): () => TestApp {
  const file = useFileApp(() => startTestApp());
  // Requests are rate limited per second of the (manual) clock; give each test a fresh second.
  beforeEach(() => { (file().clock as ManualClock).advance(1_000); });
  return file;
}

export function authHelpers(app: () => TestApp) {
  function newOrg(a: TestApp = app()): Promise<TestOrg> {
    return a.createOrg('enterprise');
  }

  async function auditLogs(key: string, a: TestApp = app(), headers: Record<string, string> = {}): Promise<AuditEntry[]> {
    const res = await a.rest<{ data: AuditEntry[] }>('GET', '/v1/settings/audit-logs?limit=100', { key, headers });
    expect(res.status).toBe(200);
    return res.body.data;
  }

  function findAudit(key: string, what: string, pred: (e: AuditEntry) => boolean, a: TestApp = app(), headers: Record<string, string> = {}): Promise<AuditEntry> {
    return eventually(what, async () => (await auditLogs(key, a, headers)).find(pred));
  }

  async function whoAmI(cred: { key?: string; token?: string }): Promise<{ role: string; mode: string; actor: { type: string; id: string }; organization: { id: string } }> {
    const res = await app().rest('GET', '/v1/settings/organization', cred);
    expect(res.status).toBe(200);
    return res.body.data;
  }

  async function createKey(key: string, body: Record<string, unknown>): Promise<HttpResponse> {
    return app().rest('POST', '/v1/settings/api-keys', { key, body });
  }

  return { newOrg, auditLogs, findAudit, whoAmI, createKey };
}
