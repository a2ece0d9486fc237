/**
 * Shared setup of the messaging tests (test/messaging-*.test.ts): the message view, the sandbox's
 * magic recipients, fresh recipients, and helpers over one app and organization (send, read,
 * wait for a status, open a WhatsApp session, count stored rows, approve a template).
 */
import { expect } from 'vitest';
import { eventually } from './assertions.ts';
import { startTestApp, type TestApp, type TestOrg } from './testApp.ts';
import { systemClock } from '../../src/platform/clock.ts';

export type StatusChange = { status: string; at: string; error_code?: string };
export type MessageView = {
  id: string; message_id: string; channel: string; direction: string; to: string | string[]; from: string; status: string;
  encoding?: string | null; segments?: number | null; error_code: string | null; fallback?: { channel: string; reason: string; at: string };
  original_message_id?: string; created_at: string; sent_at: string | null; delivered_at: string | null; read_at: string | null;
  failed_at: string | null; body?: string | null; status_history?: StatusChange[]; template_id?: string | null;
  type?: string; template?: unknown; media?: Record<string, unknown>; subject?: string; html?: string | null; text?: string | null;
  card?: Record<string, unknown>; cards?: unknown[]; suggestions?: unknown[]; media_url?: string; button?: Record<string, unknown>;
  metadata?: Record<string, unknown>; webhook_url?: string | null;
};

export const LIFECYCLE_ENV = {
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '50',
  SANDBOX_TEMPLATE_REVIEW_MS: '50',
  MESSAGING_SEND_ATTEMPTS: '2',
  MESSAGING_RETRY_DELAY_SECONDS: '1',
};

export const MAGIC = {
  invalidRecipient: '+15005550001',
  providerError: '+15005550002',
  noRcs: '+15005550003',
  noReports: '+15005550004',
  bounce: 'bounce@sandbox.test',
  sandboxSms: '+15005550006',
};

export const STATUS_RANK: Record<string, number> = { queued: 0, sent: 1, delivered: 2, read: 3, failed: 4 };

let seq = 0;
/** A fresh, valid US number per call, so exact-recipient filters and sessions never collide. */
export const phone = () => `+1415555${String(1000 + ++seq).padStart(4, '0')}`;
export const email = (name = 'user') => `${name}.${++seq}@example.com`;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const MESSAGE_FIELDS = 'id channel direction to recipients from status body encoding segments errorCode templateId originalMessageId fallback content createdAt deliveredAt statusHistory { status at errorCode }';

/** Helpers over the test file's app and organization (read when called: both start in beforeAll). */
export function messagingHelpers(app: () => TestApp, defaultOrg: () => TestOrg) {
  const post = (path: string, body: unknown, key = defaultOrg().testKey) => app().rest<{ data: MessageView }>('POST', path, { key, body });
  const gql = (query: string, variables?: Record<string, unknown>, key = defaultOrg().testKey) => app().gql<any>(query, variables, { key });

  async function send(channel: string, body: unknown, key = defaultOrg().testKey): Promise<MessageView> {
    const res = await post(`/v1/messages/${channel}`, body, key);
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  }

  async function getMessage(id: string, key = defaultOrg().testKey): Promise<MessageView> {
    const res = await app().rest<{ data: MessageView }>('GET', `/v1/messages/${id}`, { key });
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }

  /** Waits on the messages table (no HTTP, so polling never touches the rate limits). */
  async function waitForStatus(id: string, status: string): Promise<void> {
    await eventually(`${id} to be ${status}`, async () => {
      const r = await app().db.query<{ status: string }>('select status from messages where id = $1', [id]);
      const current = r.rows[0]?.status;
      if (current === status) return true;
      // A terminal state other than the wanted one will not change: fail fast with what we saw.
      if (current !== undefined && (current === 'failed' || current === 'read') && current !== status) {
        throw new Error(`${id} ended ${current}, expected ${status}`);
      }
      return undefined;
    });
  }

  async function openSession(to: string, key = defaultOrg().testKey): Promise<void> {
    const res = await app().rest('POST', '/v1/sandbox/inbound', { key, body: { channel: 'whatsapp', from: to, body: 'hello' } });
    expect(res.status, res.text).toBe(201);
  }

  async function counts(orgId: string): Promise<{ messages: number; usage: number; events: number }> {
    const r = await app().db.query<{ messages: number; usage: number; events: number }>(
      `select (select count(*)::int from messages where organization_id = $1) as messages,
              (select count(*)::int from usage_entries where organization_id = $1) as usage,
              (select count(*)::int from events where organization_id = $1 and type in ('message.queued', 'message.received')) as events`, [orgId]);
    return r.rows[0]!;
  }

  async function createApprovedTemplate(name: string, content: string, key = defaultOrg().testKey): Promise<string> {
    const t = app();
    const res = await t.rest('POST', '/v1/messages/templates', { key, body: { channel: 'whatsapp', name, content, language: 'en', category: 'utility' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.status).toBe('pending_approval');
    const id = res.body.data.id as string;
    await eventually(`template ${name} approved`, async () => {
      const r = await t.db.query<{ status: string }>('select status from message_templates where id = $1', [id]);
      return r.rows[0]?.status === 'approved' ? true : undefined;
    });
    const got = await t.rest('GET', `/v1/messages/templates/${id}`, { key });
    expect(got.body.data.status).toBe('approved');
    return id;
  }

  function expectAccepted(m: MessageView, channel: string, to: string | string[]): void {
    expect(m.message_id).toMatch(/^msg_/);
    expect(m.id).toBe(m.message_id);
    expect(m.channel).toBe(channel);
    expect(m.to).toEqual(to);
    expect(m.status).toBe('queued');
    expect(m.direction).toBe('outbound');
    expect(Number.isNaN(Date.parse(m.created_at))).toBe(false);
    expect(m.status_history?.map((h) => h.status)).toEqual(['queued']);
  }

  return { post, gql, send, getMessage, waitForStatus, openSession, counts, createApprovedTemplate, expectAccepted };
}

/** The messaging test files' app: system clock, pg-boss workers, sandbox timings of LIFECYCLE_ENV, one enterprise organization. */
export async function startMessagingApp(): Promise<{ t: TestApp; org: TestOrg; close(): Promise<void> }> {
  const t = await startTestApp({ workers: true, clock: systemClock, env: LIFECYCLE_ENV });
  return { t, org: await t.createOrg('enterprise', 'Messaging org'), close: () => t.close() };
}
