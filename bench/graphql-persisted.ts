/**
 * GraphQL scenario of the bench (`node bench/graphql-persisted.ts`, also the last step of
 * `npm run bench`'s GraphQL figures when run alone): the same read sent
 *   1. as its full document text (`query`), every request a cache miss (a fresh `tag` variable);
 *   2. by its trusted documentId (`documentId`, uploaded first), every request a miss too;
 *   3. as text with fixed variables: after the first request per key, response-cache hits.
 * Prints req/s of each and the two ratios: persisted ÷ full document (target ≥ 1.1) and cached ÷
 * uncached. BENCH_SECONDS (3), BENCH_CONNECTIONS (16), BENCH_KEYS (64) size it.
 */
import { benchOrganization, call, createCleanup, createKeys, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, startChild as spawnChild, table, waitReady, type Child } from './support.ts';
import { runLoad, type LoadResult } from './load.ts';

const log = createLog('bench:graphql');
const { onCleanup, cleanup } = createCleanup(log);
const startChild = (name: string, args: string[], env: NodeJS.ProcessEnv): Child => spawnChild(name, args, env, { log, onCleanup });

const SECONDS = envNumber('BENCH_SECONDS', 3);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 16);
const KEYS = envNumber('BENCH_KEYS', 64);
const TARGET_PERSISTED = 1.1;

/** A dashboard's list read, as a client preset document would send it (fragment included). */
const QUERY = `query DashboardContacts($first: Int, $tag: String) {
  viewer { role mode organization { id name plan } }
  contacts(first: $first, tag: $tag) {
    edges { cursor node { ...ContactRow } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
fragment ContactRow on Contact { id firstName lastName phone email country tags lifecycleStage createdAt updatedAt }`;
const DOCUMENT_ID = 'dashboard-contacts';

async function main(): Promise<void> {
  const dbUrl = await freshLocalDatabase(`omni_bench_gql_${process.pid}`, onCleanup);
  const { baseEnv, org } = await benchOrganization(dbUrl, { log, onCleanup });
  const port = await freePort();
  const service = startChild('service', ['src/main.ts', '--no-workers'], { ...baseEnv, PORT: String(port), HOST: '127.0.0.1' });
  await waitReady(service, port, '/readyz');
  const keys = await createKeys(port, org.test_api_key, KEYS);
  const up = await call(port, 'POST', '/v1/graphql/documents', { 'X-API-Key': org.test_api_key, 'Content-Type': 'application/json' }, JSON.stringify({ [DOCUMENT_ID]: QUERY }));
  if (up.status >= 300) throw new Error(`upload: ${up.status} ${up.body}`);
  log(`service on :${port}, ${keys.length} keys, document uploaded; ${SECONDS} s per scenario, ${CONNECTIONS} connections`);

  const headers = (i: number) => ({ 'X-API-Key': keys[i % keys.length]!, 'Content-Type': 'application/json', Accept: 'application/json' });
  const accept = (status: number, body: string) => status === 200 && body.includes('"contacts":{') && !body.includes('"errors"');
  const run = (name: string, body: (i: number) => string): Promise<LoadResult & { name: string }> => {
    log(name);
    return runLoad({ port, connections: CONNECTIONS, warmupMs: 1000, durationMs: SECONDS * 1000, accept, request: (i) => ({ method: 'POST', path: '/graphql', headers: headers(i), body: body(i) }) })
      .then((r) => ({ ...r, name }));
  };
  const full = await run('full document, cache miss', (i) => JSON.stringify({ query: QUERY, variables: { first: 10, tag: `t${i}` } }));
  const byId = await run('documentId, cache miss', (i) => JSON.stringify({ documentId: DOCUMENT_ID, variables: { first: 10, tag: `t${i}` } }));
  const cached = await run('full document, cache hit', () => JSON.stringify({ query: QUERY, variables: { first: 10, tag: 'same' } }));

  const rows = [full, byId, cached].map((r) => [r.name, fmt(r.rps, 0), fmt(r.p50, 2), fmt(r.p99, 2), String(r.errors)]);
  console.log(table([['scenario', 'req/s', 'p50 ms', 'p99 ms', 'errors'], ...rows]));
  const persistedRatio = byId.rps / full.rps;
  const cachedRatio = cached.rps / full.rps;
  console.log(table([['figure', 'value', 'target'],
    ['persisted-by-id ÷ full-document req/s', fmt(persistedRatio, 3), `≥ ${TARGET_PERSISTED} ${persistedRatio >= TARGET_PERSISTED ? 'PASS' : 'FAIL'}`],
    ['cached ÷ uncached read req/s', fmt(cachedRatio, 3), ''],
  ]));
}

await runMain(main, log, cleanup);
