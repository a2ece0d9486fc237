import { describe, expect, it } from 'vitest';
import { MODULES } from '../modules/index.ts';
import { ServiceError } from '../platform/errors.ts';
import type { HttpMethod, RestRoute } from './route.ts';
import { RestRouter } from './router.ts';

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
      const allowed = new Set<string>();
      for (const c of compiled) {
        const m = c.regex.exec(path);
        if (!m) continue;
        if (c.route.method !== method) {
          allowed.add(c.route.method);
          continue;
        }
        return { route: c.route, params: Object.fromEntries(c.names.map((n, i) => [n, decodeURIComponent(m[i + 1]!)])) };
      }
      if (allowed.size > 0) {
        const list = [...allowed].sort().join(', ');
        throw new ServiceError('NOT_FOUND', `${method} is not supported on ${path}; use ${list}`, { method, path, allowed_methods: [...allowed].sort() }, { headers: { Allow: list } });
      }
      throw new ServiceError('NOT_FOUND', `No route ${method} ${path}`, { method, path });
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
    expect(outcome(router, 'PUT', '/v1/things/abc')).toMatchObject({ code: 'NOT_FOUND', allow: 'GET, POST' });
  });
});
