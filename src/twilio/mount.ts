/**
 * The Twilio-compatible mount: `/2010-04-01/Accounts/{AccountSid}/…` and Verify's `/v2/Services…`.
 * A third surface over the same operations as REST and GraphQL: Basic credentials become the
 * native Scope (auth.ts), the request counts against the operation's own rate-limit bucket with
 * its burst slot (one counter call, as REST), the form body becomes the operation's input, and
 * `invoke` runs it; answers and errors take Twilio's shapes.
 */
import type http from 'node:http';
import type { RequestContext } from '../context.ts';
import type { Clock } from '../platform/clock.ts';
import { rateLimitIdentity, type Scope } from '../platform/auth/scope.ts';
import { invoke } from '../platform/operations.ts';
import { headersOf, type RateLimiter } from '../platform/ratelimit/limiter.ts';
import { BODY_METHODS, header, mark, note, send, type FrontDoor } from '../http/frontDoor.ts';
import { checkUsername, parseBasic } from './auth.ts';
import { authenticationError, errorBody, notFound, toTwilioError, TwilioError } from './errors.ts';
import type { TwilioRequest, TwilioRoute } from './route.ts';
import type { TwilioRouter } from './router.ts';
import { accountSid } from './sids.ts';
import { formBody, readParams } from './wire.ts';

/** Paths this mount answers. */
export const TWILIO_PATH = /^\/(2010-04-01|v2\/Services)(\/|$)/;

export type TwilioMountDeps = {
  front: FrontDoor;
  clock: Clock;
  limiter: RateLimiter;
  router: TwilioRouter;
  contextFor(scope: Scope): RequestContext;
};

const JSON_TYPE = 'application/json; charset=utf-8';

export function twilioMount(deps: TwilioMountDeps) {
  const { front, limiter, router } = deps;

  async function authenticate(req: http.IncomingMessage, requestId: string): Promise<Scope> {
    const basic = parseBasic(header(req, 'authorization'));
    if (!basic) throw authenticationError();
    let scope: Scope;
    try {
      scope = await front.authenticate(req, requestId, { apiKey: basic.password });
    } catch (e) {
      const mapped = toTwilioError(e);
      // A blocked address stays 403; anything else about the credential is Twilio's 20003.
      throw mapped && mapped.status === 403 ? mapped : authenticationError();
    }
    checkUsername(basic.username, scope);
    return scope;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, requestId: string): Promise<void> {
    const method = req.method ?? 'GET';
    let rateHeaders: Record<string, string> = {};
    let route: TwilioRoute | undefined;
    try {
      const scope = await authenticate(req, requestId);
      mark(res, 'auth');
      const matched = router.match(method, url.pathname);
      route = matched.route;
      note(res, { operation: route.operation.name });
      const sid = accountSid(scope.organizationId, scope.mode);
      // Another account's path is answered as Twilio answers an unknown resource.
      if (matched.params.AccountSid !== undefined && matched.params.AccountSid !== sid) throw notFound(url.pathname);
      const ctx = deps.contextFor(scope);
      const admission = limiter.admit(rateLimitIdentity(scope), scope.plan, route.operation.endpoint).then((window) => {
        rateHeaders = headersOf(window);
        return window;
      });
      admission.catch(() => {});
      ctx.admission = admission;
      let result: unknown;
      try {
        const params = BODY_METHODS.has(method) ? formBody(await front.body(req), header(req, 'content-type')) : url.searchParams;
        const form = readParams(params, route.params ?? [], route.repeated);
        mark(res, 'body');
        const request: TwilioRequest = {
          params: matched.params, form, ctx, accountSid: sid, path: url.pathname,
          run: (op, raw) => invoke(op, ctx, raw, ctx.onDenied),
        };
        const raw = await route.input(request);
        const operation = route.operationFor?.(request) ?? route.operation;
        result = await invoke(operation, ctx, raw, ctx.onDenied);
        await admission;
        const status = route.status ?? 200;
        mark(res, 'op');
        if (status === 204) {
          send(res, { status, headers: rateHeaders, body: '' });
          return;
        }
        const body = route.output ? route.output(result, request) : result;
        send(res, { status, headers: { 'Content-Type': JSON_TYPE, ...rateHeaders }, body: JSON.stringify(body) });
      } catch (e) {
        // A refused admission answers first, whatever else failed.
        await admission;
        throw e;
      }
    } catch (e) {
      const mapped = toTwilioError(e, route?.fields);
      if (!mapped) {
        front.errorResult(e, requestId);
        const internal = new TwilioError(500, 20500, 'An internal server error has occurred');
        send(res, { status: 500, headers: { 'Content-Type': JSON_TYPE }, body: errorBody(internal) });
        return;
      }
      note(res, { code: String(mapped.code) });
      send(res, { status: mapped.status, headers: { 'Content-Type': JSON_TYPE, ...rateHeaders, ...mapped.headers }, body: errorBody(mapped) });
    }
  }

  return { handle };
}
