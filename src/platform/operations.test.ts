import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { invoke, nulPath, type Operation, type OperationContext } from './operations.ts';
import { ServiceError } from './errors.ts';
import type { Scope } from './auth/scope.ts';

const scope = { organizationId: 'org_1', mode: 'test', plan: 'starter', role: 'developer', actor: { type: 'api_key', id: 'key_1' }, requestId: 'req_1' } as Scope;

function deferred() {
  let resolve!: (v: unknown) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  promise.catch(() => {});
  return { promise, resolve, reject };
}

function operation(log: string[], prepare?: () => Promise<string>): Operation<OperationContext, { n: number }, string, object, string> {
  return {
    name: 't.op', module: 't', endpoint: 'POST /v1/t', roles: ['developer', 'admin', 'owner'], input: z.object({ n: z.number() }),
    ...(prepare ? { prepare: async () => { log.push('prepare'); return prepare(); } } : {}),
    run: async (_ctx, input, _s, prepared) => { log.push(`run ${input.n} ${prepared ?? '-'}`); return 'done'; },
  };
}

const ctx = (admission?: Promise<unknown>): OperationContext => ({ scope, modules: new Map([['t', {}]]), admission });

describe('invoke with an admission in flight', () => {
  it('runs prepare at once and run only after the admission, with what prepare read', async () => {
    const log: string[] = [];
    const admission = deferred();
    const result = invoke(operation(log, async () => 'read'), ctx(admission.promise), { n: 1 });
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(['prepare']);
    admission.resolve({});
    expect(await result).toBe('done');
    expect(log).toEqual(['prepare', 'run 1 read']);
  });

  it('a refused admission wins over a failed prepare, invalid input and a missing role; run never starts', async () => {
    const refusal = new ServiceError('RATE_LIMIT_EXCEEDED', 'slow down');
    for (const [op, raw, c] of [
      [operation([], async () => { throw new ServiceError('NOT_FOUND', 'no such thing'); }), { n: 1 }, ctx],
      [operation([]), { n: 'x' }, ctx],
      [operation([]), { n: 1 }, (a: Promise<unknown>) => ({ ...ctx(a), scope: { ...scope, role: 'viewer' } as Scope })],
    ] as const) {
      const admission = deferred();
      const denials: string[] = [];
      const result = invoke(op, c(admission.promise), raw, (_s, action) => denials.push(action)).catch((e: unknown) => e);
      admission.reject(refusal);
      expect(await result).toBe(refusal);
      expect(denials).toEqual([]);
    }
  });

  it('an admitted request gets the prepare error; without an admission prepare then run, in order', async () => {
    const admitted = invoke(operation([], async () => { throw new ServiceError('NOT_FOUND', 'no such thing'); }), ctx(Promise.resolve({})), { n: 1 }).catch((e: unknown) => e);
    expect((await admitted as ServiceError).code).toBe('NOT_FOUND');
    const log: string[] = [];
    expect(await invoke(operation(log, async () => 'read'), ctx(), { n: 2 })).toBe('done');
    expect(log).toEqual(['prepare', 'run 2 read']);
  });
});

describe('nulPath', () => {
  it('answers the first path (keys before their values, in order) holding a NUL character', () => {
    expect(nulPath({ a: 'x', b: ['y', 'z\u0000'] })).toEqual(['b', '1']);
    expect(nulPath({ a: { 'k\u0000': 1 }, 'b\u0000': 2 })).toEqual(['a', 'k\u0000']);
    expect(nulPath({ a: [{ b: 'ok' }], c: null, d: 3 })).toBeUndefined();
    expect(nulPath('\u0000')).toEqual([]);
  });

  it('walks a value nested far deeper than the call stack allows without overflowing', () => {
    let deep: unknown = 'end\u0000';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(nulPath(deep)).toHaveLength(200_000);
  });
});
