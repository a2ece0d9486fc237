import { describe, expect, it } from 'vitest';
import { MODULES } from '../modules/index.ts';
import { ServiceError } from '../platform/errors.ts';
import type { HttpMethod, RestRoute } from './route.ts';
import { RestRouter, unmatchedRoute } from './router.ts';

const ROUTES: RestRoute[] = MODULES.flatMap((m) => [...((m as { routes?: readonly RestRoute[] }).routes ?? [])]);
const METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** The router's answer as data: the route and parameters, or the error's message and Allow header. */
function outcome(router: { match: RestRouter['match'] }, method: string, path: string): unknown {
  try {
    const m = router.match(method, path);
    return { route: `${m.route.method} ${m.route.path}`, params: m.params };
  } catch (e) {
    if (!(e instanceof ServiceError)) throw e;
    return { code: e.code, message: e.message, allow: e.headers?.Allow };
  }
}

/** The matching as it was: every route's pattern in turn, the static ones first. */
function linearRouter(routes: RestRoute[]): { match: RestRouter['match'] } {
  const compiled = routes.map((route) => {
    const names: string[] = [];
    const regex = new RegExp(`^${route.path.replace(/\{(\w+)\}/g, (_m, n: string) => (names.push(n), '([^/]+)'))}/?$`);
    return { route, regex, names };
  }).sort((a, b) => a.names.length - b.names.length);
  return {
    match(method, path) {
      const others: { route: RestRoute; values: string[] }[] = [];
      for (const c of compiled) {
        const m = c.regex.exec(path);
        if (!m) continue;
        if (c.route.method !== method) {
          others.push({ route: c.route, values: m.slice(1) });
          continue;
        }
        return { route: c.route, params: Object.fromEntries(c.names.map((n, i) => [n, decodeURIComponent(m[i + 1]!)])) };
      }
      throw unmatchedRoute(method, path, others, routes);
    },
  };
}

describe('RestRouter', () => {
  it('answers every path as a scan of the whole route table would', () => {
    const router = new RestRouter(ROUTES);
    const linear = linearRouter(ROUTES);
    const paths = new Set<string>(['/', '/v1', '/v1/', '/v1/nothing', '/v1/nothing/x', '/v1/agents//chat', '/v1//agents', '//v1/agents']);
    for (const r of ROUTES) {
      const filled = r.path.replace(/\{\w+\}/g, (_m, i: number) => `x${i}_a%20b`);
      paths.add(filled);
      paths.add(`${filled}/`);
      paths.add(`${filled}//`);
      paths.add(`${filled}/extra`);
      paths.add(filled.slice(0, filled.lastIndexOf('/')));
      // A parameter's value that is also a static segment of another route.
      paths.add(r.path.replace(/\{\w+\}/g, 'settings'));
    }
    expect(paths.size).toBeGreaterThan(ROUTES.length * 3);
    for (const path of paths) {
      for (const method of METHODS) expect(outcome(router, method, path), `${method} ${path}`).toEqual(outcome(linear, method, path));
    }
  });

  it('prefers a static route over a parameter in the same place', () => {
    const op = (method: string, path: string) => ({ name: path, module: 'm', endpoint: `${method} ${path}`, roles: [], input: undefined as never, run: async () => null });
    const routes: RestRoute[] = [
      { method: 'GET', path: '/v1/{kind}/list', operation: op('GET', '/v1/{kind}/list') },
      { method: 'GET', path: '/v1/things/{id}', operation: op('GET', '/v1/things/{id}') },
      { method: 'GET', path: '/v1/things/list', operation: op('GET', '/v1/things/list') },
      { method: 'POST', path: '/v1/things/{id}', operation: op('POST', '/v1/things/{id}') },
    ];
    const router = new RestRouter(routes);
    const linear = linearRouter(routes);
    for (const path of ['/v1/things/list', '/v1/things/abc', '/v1/others/list', '/v1/others/abc', '/v1/things/list/']) {
      for (const method of METHODS) expect(outcome(router, method, path), `${method} ${path}`).toEqual(outcome(linear, method, path));
    }
    expect(outcome(router, 'GET', '/v1/things/list')).toMatchObject({ route: 'GET /v1/things/list' });
    expect(outcome(router, 'GET', '/v1/others/list')).toMatchObject({ route: 'GET /v1/{kind}/list', params: { kind: 'others' } });
    expect(outcome(router, 'PUT', '/v1/things/abc')).toMatchObject({ code: 'METHOD_NOT_ALLOWED', allow: 'GET, POST' });
  });

  describe('an unknown route and a wrong method', () => {
    const router = new RestRouter(ROUTES);
    const error = (method: string, path: string) => {
      try {
        router.match(method, path);
      } catch (e) {
        if (e instanceof ServiceError) return { code: e.code, status: e.status, message: e.message, allow: e.headers.Allow, details: e.details };
      }
      throw new Error(`${method} ${path} matched`);
    };

    it('a name where the method has fixed names is an unknown route, with the closest one suggested', () => {
      // POST names channels under /v1/messages; GET /v1/messages/{id} matches only as a message id.
      expect(error('POST', '/v1/messages/mms')).toMatchObject({
        code: 'NOT_FOUND', status: 404, allow: undefined,
        message: 'Unknown route: POST /v1/messages/mms; did you mean POST /v1/messages/sms?', details: { did_you_mean: 'POST /v1/messages/sms' },
      });
      expect(error('POST', '/v1/messages/fax')).toMatchObject({ code: 'NOT_FOUND', status: 404, message: 'Unknown route: POST /v1/messages/fax' });
      expect(error('POST', '/v1/nothing')).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    });

    it('a path other methods serve is 405 METHOD_NOT_ALLOWED with Allow', () => {
      expect(error('POST', '/v1/messages/msg_01abc')).toMatchObject({ code: 'METHOD_NOT_ALLOWED', status: 405, allow: 'GET', details: { allowed_methods: ['GET'] } });
      expect(error('DELETE', '/v1/messages/anything')).toMatchObject({ code: 'METHOD_NOT_ALLOWED', status: 405, allow: 'GET' });
      expect(error('PATCH', '/v1/settings/team')).toMatchObject({ code: 'METHOD_NOT_ALLOWED', allow: 'GET' });
      expect(error('PUT', '/v1/agents/agt_1/chat')).toMatchObject({ code: 'METHOD_NOT_ALLOWED', allow: 'POST' });
    });
  });
});
