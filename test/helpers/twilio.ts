/**
 * The official twilio SDK pointed at the test app: a RequestClient (the SDK's `httpClient` option)
 * that sends every request the SDK builds for `https://*.twilio.com` to the app's base URL instead,
 * path and query unchanged. Everything else is the SDK's own code path (serialization, Basic auth,
 * paging, error parsing).
 */
import twilio from 'twilio';
import { afterAll, beforeAll } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import type { Hit } from './receiver.ts';
import { startReceiver } from './receiver.ts';
import { startTestApp, useFileApp } from './testApp.ts';
import { buyVoiceNumber, VOICE_ENV } from './voice.ts';
type Response<T> = Awaited<ReturnType<InstanceType<typeof twilio.RequestClient>['request']>> & { body: T };
import type { TestApp, TestOrg } from './testApp.ts';
import { accountSid } from '../../src/twilio/sids.ts';
import { issueTwilioCredentials } from '../../src/twilio/tokens.ts';

export class RedirectingClient extends twilio.RequestClient {
  readonly #baseUrl: string;
  /** Every URL requested, as the SDK built it (before the redirect). */
  readonly requested: string[] = [];
  constructor(baseUrl: string) {
    super();
    this.#baseUrl = baseUrl;
  }
  override request<T>(opts: Parameters<InstanceType<typeof twilio.RequestClient>['request']>[0]): Promise<Response<T>> {
    const url = new URL(opts.uri);
    if (!url.hostname.endsWith('.twilio.com')) throw new Error(`unexpected host ${url.hostname}`);
    this.requested.push(opts.uri);
    return super.request<T>({ ...opts, uri: `${this.#baseUrl}${url.pathname}${url.search}` } as never);
  }
}

/** An SDK client for `org` in test mode, authenticated with the account SID and its test key as auth token. */
export function twilioClient(t: TestApp, org: TestOrg, opts: { authToken?: string; mode?: 'test' | 'live' } = {}) {
  const mode = opts.mode ?? 'test';
  const sid = accountSid(org.orgId, mode);
  const httpClient = new RedirectingClient(t.baseUrl);
  return { client: twilio(sid, opts.authToken ?? (mode === 'test' ? org.testKey : org.liveKey), { httpClient }), sid, httpClient };
}

/** Calls `f` and answers the SDK's RestException it throws (fails when it does not throw). */
export async function restError(f: () => Promise<unknown>): Promise<{ status: number; code: number; message: string; moreInfo: string }> {
  try {
    await f();
  } catch (e) {
    if (e instanceof Error && 'status' in e && 'code' in e) return e as never;
    throw e;
  }
  throw new Error('expected the SDK to throw a RestException');
}

/** Twilio credentials issued as `admin twilio credentials` issues them (the auth token signs the account's callbacks). */
export async function issuedClient(t: TestApp, org: TestOrg, mode: 'test' | 'live' = 'test') {
  const creds = await issueTwilioCredentials(t.app.services.settings, t.config.appSecret, org.orgId, mode, 'developer');
  const httpClient = new RedirectingClient(t.baseUrl);
  return { client: twilio(creds.account_sid, creds.auth_token, { httpClient }), sid: creds.account_sid, authToken: creds.auth_token, httpClient };
}

/** A Twilio-format callback's URL, form parameters and signature as the customer's handler sees them. */
export function formOf(baseUrl: string, hit: { path: string; body: string; headers: Record<string, string | string[] | undefined> }) {
  const params: Record<string, string> = Object.fromEntries(new URLSearchParams(hit.body));
  return { url: `${baseUrl}${hit.path}`, params, signature: String(hit.headers['x-twilio-signature'] ?? '') };
}

/**
 * A file's TwiML rig: an app with workers on the system clock (the voice sandbox's settings), an
 * enterprise organization, a receiver answering the TwiML documents the test puts in `documents`
 * (by path), twilio credentials issued for the organization, and a voice number to call from.
 */
export type TwimlRig = { t: TestApp; org: TestOrg; from: string; receiver: Awaited<ReturnType<typeof startReceiver>>; issued: Awaited<ReturnType<typeof issuedClient>> };

export function useTwimlRig(orgName: string, documents: ReadonlyMap<string, { status: number; body: string }>): () => TwimlRig {
  let rig: TwimlRig | undefined;
  const app = useFileApp(async () => {
    const app = await startTestApp({ workers: true, clock: systemClock, env: VOICE_ENV });
    return { t: app, org: await app.createOrg('enterprise', orgName), close: () => app.close() };
  });
  beforeAll(async () => {
    const { t, org } = app();
    const receiver = await startReceiver({
      reply: (hit: Hit) => {
        const doc = documents.get(hit.path);
        return doc ? { status: doc.status, body: doc.body, headers: { 'Content-Type': 'text/xml' } } : undefined;
      },
    });
    rig = { t, org, receiver, issued: await issuedClient(t, org), from: await buyVoiceNumber(t, org.testKey) };
  });
  afterAll(() => rig?.receiver.close());
  return () => {
    if (!rig) throw new Error('the TwiML rig is not set up yet: use it inside tests or hooks');
    return rig;
  };
}
