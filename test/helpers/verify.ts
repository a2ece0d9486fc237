/**
 * Shared setup of the verify tests (test/verify-*.test.ts): one app with pg-boss workers, the
 * sandbox providers and a manual clock, its live-mode email going to a local SMTP server; and
 * helpers over it (send, check, read the code the sandbox sent, events).
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { expect } from 'vitest';
import { eventually } from './assertions.ts';
import { openSandboxPayload } from './sandbox.ts';
import { manualClockClient, startTestApp, type HttpResponse, type TestApp, type TestOrg } from './testApp.ts';

export type ErrorBody = { error: { code: string; message: string; status: number; details: Record<string, any> } };
export type VerificationView = {
  id: string; verification_id: string; channel: string; to: string; status: string; valid: boolean; locale: string;
  code_length: number; max_attempts: number; attempts: number; remaining_attempts: number; expires_at: string;
  message_id: string | null; expiry_reason: string | null; superseded_by: string | null; created_at: string; updated_at: string;
  approved_at: string | null; expired_at: string | null; maxed_at: string | null;
};
export type SandboxPayload = { from: string; body: string | null; content: Record<string, any> };

const ENV = {
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '50',
  SANDBOX_TEMPLATE_REVIEW_MS: '50',
};
export const LIVE_SENDER = 'noreply@acme.test';

export type VerifyApp = {
  t: TestApp;
  org: TestOrg;
  other: TestOrg;
  /** What the local SMTP server received (live-mode email). */
  received: { rcptTo: string[]; raw: string }[];
  close(): Promise<void>;
};

/** Starts the SMTP server, then the app (workers, manual clock) with two organizations. */
export async function startVerifyApp(): Promise<VerifyApp> {
  const received: VerifyApp['received'] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      let raw = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => { raw += chunk; });
      stream.on('end', () => {
        received.push({ rcptTo: session.envelope.rcptTo.map((r) => r.address), raw });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const { port } = smtp.server.address() as AddressInfo;
  let t: TestApp | undefined;
  const close = async () => {
    await t?.close();
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
  };
  try {
    t = await startTestApp({ workers: true, env: { ...ENV, SMTP_URL: `smtp://127.0.0.1:${port}` } });
    const org = await t.createOrg('enterprise', 'Verify org');
    const other = await t.createOrg('enterprise', 'Other org');
    return { t, org, other, received, close };
  } catch (err) {
    await close();
    throw err;
  }
}

let seq = 0;
export const phone = () => `+1415555${String(2000 + ++seq).padStart(4, '0')}`;
export const email = (name = 'user') => `${name}.${++seq}@example.com`;

export function expectError(res: HttpResponse, status: number, code: string): ErrorBody {
  expect({ status: res.status, code: (res.body as ErrorBody | undefined)?.error?.code }, res.text).toEqual({ status, code });
  return res.body as ErrorBody;
}

export { eventually };

/** A wrong code of the same length (differs in the last digit). */
export const wrong = (code: string) => code.slice(0, -1) + String((Number(code.slice(-1)) + 1) % 10);

/** Helpers over the test file's app and organization (read when called: both start in beforeAll). */
export function verifyHelpers(app: () => TestApp, defaultOrg: () => TestOrg) {
  const { clock, call, gql } = manualClockClient(app, defaultOrg);

  async function send(body: Record<string, unknown>, key = defaultOrg().testKey): Promise<VerificationView> {
    const res = await call<{ data: VerificationView }>('POST', '/v1/verify/send', { key, body });
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  }

  async function check(id: string, code: string, key = defaultOrg().testKey): Promise<HttpResponse<{ data: VerificationView }>> {
    return call('POST', '/v1/verify/check', { key, body: { verification_id: id, code } });
  }

  async function get(id: string, key = defaultOrg().testKey): Promise<VerificationView> {
    const res = await call<{ data: VerificationView }>('GET', `/v1/verify/${id}`, { key });
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }

  /** What the sandbox provider sent for a verification (waits on the database, not on HTTP). */
  async function sentPayload(id: string): Promise<SandboxPayload> {
    return eventually(`the code of ${id} to be sent`, async () => {
      const r = await app().db.query<{ payload: SandboxPayload }>(
        'select s.payload from sandbox_sends s join verifications v on v.message_id = s.idempotency_key where v.id = $1', [id]);
      return r.rows[0] ? openSandboxPayload<SandboxPayload>(r.rows[0].payload) : undefined;
    });
  }

  /** The code, through the sandbox route, once the sandbox has sent it. */
  async function codeOf(id: string, key = defaultOrg().testKey): Promise<string> {
    await sentPayload(id);
    const res = await call<{ data: { code: string; verification_id: string } }>('GET', `/v1/sandbox/verify/${id}/code`, { key });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.verification_id).toBe(id);
    return res.body.data.code;
  }

  async function events(resourceId: string): Promise<{ type: string; sequence: number; data: Record<string, any> }[]> {
    const r = await app().db.query('select type, sequence, data from events where resource_id = $1 order by sequence, id', [resourceId]);
    return r.rows;
  }

  return { clock, call, gql, send, check, get, sentPayload, codeOf, events };
}
