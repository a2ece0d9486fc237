/**
 * The platform's REST API (/v1) as a typed client: `paths` (generated from the OpenAPI document)
 * over openapi-fetch. Every call answers `{ data, error, response }`: `data` is the success body
 * (`{ data, meta }`), `error` the error envelope (`{ error: { code, message, status, details }, meta }`).
 */
import createFetchClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema.ts';

export type { components, operations, paths };
/** Every error answer: `error.code` (see `/docs/errors`), `message`, `status`, `details`, and `meta.request_id`. */
export type ErrorEnvelope = components['schemas']['ErrorEnvelope'];
/** The `meta` of a list: `pagination.cursor` (the next page's, null on the last) and `has_more`. */
export type PageMeta = components['schemas']['PageMeta'];
export type PlatformClient = Client<paths>;

export type CreateClientOptions = Omit<ClientOptions, 'baseUrl'> & {
  /** `svc_test_sk_…` (sandbox: nothing reaches a carrier, nothing is charged) or `svc_live_sk_…`. */
  apiKey?: string;
  /** A bearer token instead of an API key (from the identity provider, or `admin token mint`). */
  token?: string;
  /** Where the service runs; default `http://localhost:4000`. */
  baseUrl?: string;
};

/**
 * A client authenticated with an API key (or a bearer token):
 *
 *     const api = createClient({ apiKey: 'svc_test_sk_…' });
 *     const { data, error } = await api.POST('/v1/messages/sms', { body: { to: '+14155550100', body: 'Hi' } });
 */
export function createClient(options: CreateClientOptions): PlatformClient {
  const { apiKey, token, baseUrl = 'http://localhost:4000', headers, ...rest } = options;
  if (!apiKey && !token) throw new Error('createClient needs an apiKey (svc_test_sk_… or svc_live_sk_…) or a token');
  const auth: Record<string, string> = apiKey ? { 'X-API-Key': apiKey } : { Authorization: `Bearer ${token}` };
  return createFetchClient<paths>({ ...rest, baseUrl: baseUrl.replace(/\/+$/, ''), headers: { ...auth, ...(headers as Record<string, string> | undefined) } });
}
