/**
 * The standing fuzz harness (issue 43), over HTTP against the real database: for every operation in
 * schema/openapi.json that takes a JSON body or path/query parameters, and every GraphQL mutation,
 * fast-check generates invalid, boundary and hostile inputs (wrong types, missing and extra fields,
 * huge and deep values, lone surrogates, RTL, zero-width and NUL characters, ids of every registered
 * prefix, another tenant's real ids) and each answer must be:
 * - never a 5xx;
 * - for a 4xx, the error envelope `{ error: { code, message, status, details } }` with a code the
 *   document lists for that operation under that status (`x-error-codes`, from schema/operation-errors.json);
 *   for GraphQL, errors whose `extensions.code` is a registered error code of a 4xx status;
 * - for a refused write, no row changed (every application table's row count and newest xmin, and
 *   pg-boss's jobs, are the same before and after);
 * - within RESPONSE_BOUND_MS (a bound, not a timing figure).
 * Short form (in `npm test`): FUZZ_RUNS cases per operation, 3 by default, a fixed seed.
 * Long form: `npm run fuzz` (FUZZ_RUNS=50 unless set, a random seed, printed on failure; FUZZ_SEED replays one).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { buildSchema, getNamedType, isLeafType, type GraphQLField } from 'graphql';
import { describe, expect, it } from 'vitest';
import { declaredErrorCodes } from '../src/platform/errors.ts';
import { ID_PREFIXES, newId, type IdPrefix } from '../src/platform/ids.ts';
import { MODULES } from '../src/modules/index.ts';
import { encodeSegment, fromGraphqlType, fromSchema, hostileValue, HOSTILE_STRINGS, type IdPool } from './helpers/fuzz.ts';
import { manualClockClient, startTestApp, useFileApp, type HttpResponse, type TestOrg } from './helpers/testApp.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 3);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : process.env.FUZZ_RUNS ? Date.now() % 2 ** 31 : 43;
const RESPONSE_BOUND_MS = 5_000;
/** Each test's time: room for FUZZ_RUNS cases of every operation (about 300) at a slow machine's pace. */
const TIMEOUT_MS = 120_000 + RUNS * 300 * 150;

/**
 * Operations left out, and why:
 * - billing.changePlan: a 2xx moves the fuzzing org to another plan, whose lower rate limits then
 *   refuse the rest of the run (429); plan changes are covered in test/billing.test.ts.
 * - settings.setIpAllowlist (and the setIpAllowlist mutation): a 2xx locks the fuzzing key out of
 *   127.0.0.1; covered in test/auth-allowlist.test.ts.
 * Operations whose 2xx would reach a provider (sends, calls, numbers, payments, LLM) stay in: the
 * fuzzing keys are test keys, which reach only the sandboxes.
 */
const EXCLUDED = new Set(['billing.changePlan', 'settings.setIpAllowlist', 'changePlan', 'setIpAllowlist', 'changeBillingPlan', 'setIpAllowlist']);

/**
 * Tables a refused request may still write (so the row check skips them): api_keys (last use of the
 * key), rate_limit_counters (every request counts), audit_log_entries (refusals of a role are audited).
 */
const WRITTEN_BY_ANY_REQUEST = new Set(['api_keys', 'rate_limit_counters', 'audit_log_entries']);

const doc = JSON.parse(readFileSync(new URL('../schema/openapi.json', import.meta.url), 'utf8'));
const gqlSchema = buildSchema(readFileSync(new URL('../schema/schema.graphql', import.meta.url), 'utf8'));

const resolveRef = (s: any): any => {
  let cur = s;
  for (let i = 0; cur?.$ref && i < 10; i++) {
    const parts = (cur.$ref as string).replace(/^#\//, '').split('/');
    cur = parts.reduce((o: any, k) => o?.[k], doc);
  }
  return cur ?? {};
};

type Operation = { id: string; method: string; path: string; params: any[]; body?: any; errors: Map<number, Set<string>> };

const operations: Operation[] = [];
for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
  for (const [method, op] of Object.entries(item)) {
    if (!op?.responses || EXCLUDED.has(op.operationId)) continue;
    const params = (op.parameters ?? []).map(resolveRef).filter((p: any) => p.in === 'path' || p.in === 'query');
    const body = op.requestBody?.content?.['application/json']?.schema;
    if (!params.length && !body) continue;
    const errors = new Map<number, Set<string>>();
    for (const [status, r] of Object.entries(op.responses as Record<string, any>)) {
      const codes = resolveRef(r)['x-error-codes'] as string[] | undefined;
      if (codes) errors.set(Number(status), new Set(codes));
    }
    operations.push({ id: op.operationId, method: method.toUpperCase(), path, params, body, errors });
  }
}

const app = useFileApp(() => startTestApp());
let org: TestOrg | undefined;
let other: TestOrg | undefined;
const { call, gql } = manualClockClient(app, () => org!);
const pool: IdPool = { ours: [], theirs: [], forged: [] };
const counts = new Map<string, number>();
const failures: string[] = [];

let snapshotSql = '';
async function snapshot(): Promise<Map<string, string>> {
  if (!snapshotSql) {
    const tables = (await app().db.query(`select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`)).rows
      .map((r) => r.table_name as string).filter((t) => !WRITTEN_BY_ANY_REQUEST.has(t) && t !== 'mikro_orm_migrations');
    snapshotSql = [...tables.map((t) => `select '${t}' as t, count(*)::text || ':' || coalesce(max(xmin::text::bigint), 0)::text as s from public."${t}"`),
      `select 'pgboss.job' as t, count(*)::text as s from pgboss.job`].join(' union all ');
  }
  return new Map((await app().db.query(snapshotSql)).rows.map((r) => [r.t, r.s]));
}
const changed = (a: Map<string, string>, b: Map<string, string>) => [...a].filter(([t, s]) => b.get(t) !== s).map(([t]) => t);

async function fixtures(o: TestOrg, into: string[]): Promise<void> {
  const key = o.testKey;
  const made = [
    await call('POST', '/v1/contacts', { key, body: { phone: '+14155550100', first_name: 'Fixture' } }),
    await call('POST', '/v1/contacts/lists', { key, body: { name: 'Fixture list' } }),
    await call('POST', '/v1/webhooks', { key, body: { url: 'https://example.com/hook', events: ['message.delivered'] } }),
  ];
  // The billing account row is created on a tenant's first billing call (credits.service.ts
  // `account`): made here, so that creation does not count as a refused call's write.
  expect((await call('GET', '/v1/billing/credits', { key })).status).toBe(200);
  for (const r of made) {
    expect(r.status, r.text).toBe(201);
    into.push(r.body.data.id);
  }
  into.push(o.orgId, o.ownerUserId);
}

const short = (v: unknown) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? String(v);
  return s.length > 200 ? `${s.slice(0, 200)}…(${s.length})` : s;
};

function checkRest(op: Operation, r: HttpResponse, ms: number, what: string): string | undefined {
  if (ms > RESPONSE_BOUND_MS) return `${ms} ms (bound ${RESPONSE_BOUND_MS})`;
  if (r.status >= 500) return `${r.status} ${r.text.slice(0, 300)}`;
  if (r.status < 400) return undefined;
  const e = r.body?.error;
  if (!e || typeof e.code !== 'string' || typeof e.message !== 'string') return `${r.status} without the error envelope: ${r.text.slice(0, 200)}`;
  if (e.status !== r.status) return `${r.status} with error.status ${e.status}`;
  const documented = op.errors.get(r.status);
  if (!documented?.has(e.code)) return `${r.status} ${e.code} not documented for ${op.id} (${[...(documented ?? [])].join(', ') || 'none'}) ${what}`;
  return undefined;
}

describe('fuzz', () => {
  it('sets up two tenants and their real ids', async () => {
    org = await app().createOrg('enterprise', 'Fuzz');
    other = await app().createOrg('enterprise', 'Other tenant');
    await fixtures(org, pool.ours);
    await fixtures(other, pool.theirs);
    const prefixes = [...new Set([...Object.keys(ID_PREFIXES), ...MODULES.flatMap((m) => Object.keys((m as { ids?: Record<string, string> }).ids ?? {}))])] as IdPrefix[];
    pool.forged = prefixes.map((p) => newId(p));
  });

  it('REST: every operation with a body or parameters answers hostile input without a 5xx, with a documented code, changing nothing on a 4xx', async () => {
    for (const op of operations) {
      const pathArbs = op.params.filter((p) => p.in === 'path').map((p) => fromSchema(p.schema, resolveRef, pool, p.name === 'id' || /Id$|_id$/.test(p.name) ? 'id' : p.name).map((v) => [p.name, v] as const));
      const queryArbs = op.params.filter((p) => p.in === 'query').map((p) => fc.option(fromSchema(p.schema, resolveRef, pool, p.name), { freq: 2 }).map((v) => [p.name, v] as const));
      const bodyArb: fc.Arbitrary<{ json?: unknown; raw?: string }> = op.body
        ? fc.oneof(
          { weight: 6, arbitrary: fromSchema(op.body, resolveRef, pool).map((json) => ({ json })) },
          { weight: 1, arbitrary: hostileValue.map((json) => ({ json })) },
          { weight: 1, arbitrary: fc.constantFrom('{', '{"a":', 'nul', '\u0000', '[]]', `{"a":"${'\\ud800'.repeat(3)}"}`, `${'['.repeat(100_000)}${']'.repeat(100_000)}`, `{"x":"${'y'.repeat(2_000_000)}"}`).map((raw) => ({ raw })) },
        )
        : fc.constant({});
      const caseArb = fc.record({ path: fc.tuple(...pathArbs), query: fc.tuple(...queryArbs), body: bodyArb, extraQuery: fc.option(fc.constantFrom(...HOSTILE_STRINGS.slice(0, 12)), { freq: 5 }) });
      const cases = fc.sample(caseArb, { numRuns: RUNS, seed: SEED + op.id.length * 7919 + op.path.length });
      for (const c of cases) {
        let url = op.path;
        for (const [name, v] of c.path) url = url.replace(`{${name}}`, encodeSegment(v));
        const qs = c.query.filter(([, v]) => v !== null).map(([n, v]) => `${n}=${encodeSegment(v)}`);
        if (c.extraQuery !== null) qs.push(`${encodeSegment(c.extraQuery)}=1`);
        if (qs.length) url += `?${qs.join('&')}`;
        const what = `${op.method} ${short(url)} ${c.body.raw !== undefined ? `raw ${short(c.body.raw)}` : short(c.body.json)}`;
        const before = await snapshot();
        const t0 = Date.now();
        const r = await call(op.method, url, c.body.raw !== undefined
          ? { rawBody: c.body.raw, headers: { 'Content-Type': 'application/json' } }
          : c.body.json !== undefined ? { body: c.body.json } : {});
        const ms = Date.now() - t0;
        counts.set(op.id, (counts.get(op.id) ?? 0) + 1);
        const bad = checkRest(op, r, ms, what);
        if (bad) failures.push(`${op.id}: ${bad} ← ${what}`);
        if (r.status >= 400 && r.status < 500) {
          const diff = changed(before, await snapshot());
          if (diff.length) failures.push(`${op.id}: ${r.status} ${r.body?.error?.code} changed ${diff.join(', ')} ← ${what}`);
        }
      }
    }
  }, TIMEOUT_MS);

  it('GraphQL: every mutation answers hostile arguments without a 5xx or an unregistered code, changing nothing when refused', async () => {
    const mutations = Object.values(gqlSchema.getMutationType()!.getFields()).filter((f) => !EXCLUDED.has(f.name));
    const codes4xx = new Set<string>([...declaredErrorCodes()].filter(([, v]) => v.status < 500).map(([k]) => k));
    for (const field of mutations as GraphQLField<unknown, unknown>[]) {
      const selection = isLeafType(getNamedType(field.type)) ? '' : ' { __typename }';
      const decl = field.args.map((a) => `$${a.name}: ${String(a.type)}`).join(', ');
      const query = `mutation${decl ? `(${decl})` : ''} { ${field.name}${field.args.length ? `(${field.args.map((a) => `${a.name}: $${a.name}`).join(', ')})` : ''}${selection} }`;
      const argsArb = fc.record(Object.fromEntries(field.args.map((a) => [a.name, fromGraphqlType(a.type, pool, a.name)])), { requiredKeys: [] });
      for (const variables of fc.sample(argsArb, { numRuns: RUNS, seed: SEED + field.name.length * 104729 })) {
        const what = `${field.name} ${short(variables)}`;
        const before = await snapshot();
        const t0 = Date.now();
        const r = await gql(query, variables as Record<string, unknown>);
        const ms = Date.now() - t0;
        counts.set(`gql.${field.name}`, (counts.get(`gql.${field.name}`) ?? 0) + 1);
        if (ms > RESPONSE_BOUND_MS) failures.push(`gql.${field.name}: ${ms} ms ← ${what}`);
        if (r.status >= 500) failures.push(`gql.${field.name}: HTTP ${r.status} ${r.text.slice(0, 300)} ← ${what}`);
        const errors = r.body?.errors as { message: string; extensions?: { code?: string } }[] | undefined;
        for (const e of errors ?? []) {
          if (!e.extensions?.code || !codes4xx.has(e.extensions.code)) failures.push(`gql.${field.name}: ${e.extensions?.code ?? 'no code'} ${short(e.message)} ← ${what}`);
        }
        if (errors?.length && r.body?.data?.[field.name] == null) {
          const diff = changed(before, await snapshot());
          if (diff.length) failures.push(`gql.${field.name}: ${errors[0]!.extensions?.code} changed ${diff.join(', ')} ← ${what}`);
        }
      }
    }
  }, TIMEOUT_MS);

  it('reports the cases tried per operation and every failure', () => {
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    process.stderr.write(`fuzz (seed ${SEED}, ${RUNS} runs): ${total} cases over ${counts.size} operations: ${[...counts].map(([k, v]) => `${k}=${v}`).join(' ')}\n`);
    expect(counts.size).toBeGreaterThan(100);
    expect(failures, `seed ${SEED}:\n${failures.join('\n')}`).toEqual([]);
  });
});
