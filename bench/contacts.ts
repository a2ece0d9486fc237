/**
 * `node bench/contacts.ts` (second half of `npm run bench`): the contacts figures of issue 5.
 *
 *   1. database: BENCH_DATABASE_URL, else a fresh `omni_bench_contacts_<pid>` on 127.0.0.1:5432
 *      (dropped at the end);
 *   2. an enterprise organization (admin CLI, which also migrates) and BENCH_CONTACTS_KEYS (32) owner
 *      test-mode keys created through the API, rotated per request so per-key limits stay far away;
 *   3. seed, straight into the database: BENCH_CONTACTS (100,000) test-mode contacts in one
 *      `insert … select from generate_series` (names, lower-case emails, E.164 phones of six countries,
 *      countries, lifecycle stages, tags, metadata on a third), 5 lists with memberships for the 100 newest contacts (the
 *      page the GraphQL query reads), ~3 messages each for 90 of them (SMS out and in, email) plus
 *      5,000 messages to other addresses, and the events those messages would have emitted (the
 *      timeline and lastActivity read the event backbone), then `vacuum analyze`;
 *   4. the service (`node src/main.ts --no-workers`) in its own process, connected to PostgreSQL
 *      through a counting proxy in this process (node:net): it parses the frontend protocol and counts
 *      simple queries ('Q') and extended-protocol executions ('E', with the text of the statement bound);
 *   5. GraphQL `contacts(first: 100) { … tags lists lastActivity }`:
 *      - SQL statements per request: BENCH_COUNT_REQUESTS (20) sequential requests, statements seen
 *        by the proxy between sending each request and its answer (pg-boss's own statements, which
 *        name the `pgboss` schema, are left out and reported); target ≤ 5 (issue 5);
 *      - latency: BENCH_SEQUENTIAL (200) sequential requests, p50/p99;
 *      - throughput: BENCH_CONTACTS_CONNECTIONS (16) connections, 2 s warm-up + BENCH_CONTACTS_SECONDS (5);
 *   6. full-text search `GET /v1/contacts?search=…` (ranked) with a mix of name, phone, email and metadata terms:
 *      BENCH_SEARCH_REQUESTS (300) sequential requests, p50/p99;
 *   7. a table, and bench/results/contacts.json.
 * Child processes, the proxy and the database are cleaned up on exit, error, SIGINT and SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import pg from 'pg';
import { answers, benchOrganization, writeResults, call, createKeys, envNumber, freshLocalDatabase, createCleanup, createLog, freePort, ROOT, runMain, sleep, waitReady } from './support.ts';
import { runBatch, runLoad, type BatchResult, type LoadResult } from './load.ts';

const intEnv = (name: string, fallback: number, min = 1) => envNumber(name, fallback, min, true);

const CONTACTS = intEnv('BENCH_CONTACTS', 100_000, 1000);
const KEYS = intEnv('BENCH_CONTACTS_KEYS', 32);
const COUNT_REQUESTS = intEnv('BENCH_COUNT_REQUESTS', 20);
const SEQUENTIAL = intEnv('BENCH_SEQUENTIAL', 200);
const CONNECTIONS = intEnv('BENCH_CONTACTS_CONNECTIONS', 16);
const SECONDS = intEnv('BENCH_CONTACTS_SECONDS', 5);
const WARMUP_SECONDS = intEnv('BENCH_WARMUP_SECONDS', 2, 0);
const SEARCH_REQUESTS = intEnv('BENCH_SEARCH_REQUESTS', 300);
/** Issue 5: the GraphQL query for 100 contacts with tags, lists and last activity runs in at most 5 SQL statements. */
const TARGET_STATEMENTS = 5;

const log = createLog('bench:contacts');

// ---------------------------------------------------------------------------------------------
// Cleanup: a LIFO stack run once, on success, error or signal.
// ---------------------------------------------------------------------------------------------
const { onCleanup, cleanup } = createCleanup(log);

// ---------------------------------------------------------------------------------------------
// Helpers: ports, child processes, HTTP calls.
// ---------------------------------------------------------------------------------------------


type Child = { name: string; proc: ChildProcess; tail(): string; warnings: number; exited: Promise<number | null> };

function startChild(name: string, args: string[], env: NodeJS.ProcessEnv): Child {
  const proc = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const child: Child = { name, proc, tail: () => lines.join('\n'), warnings: 0, exited: new Promise((resolve) => proc.once('exit', (code) => resolve(code))) };
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      const level = Number(/"level":(\d+)/.exec(line)?.[1] ?? 0);
      if (level >= 40) child.warnings++;
      lines.push(line);
      if (lines.length > 40) lines.shift();
    }
  };
  proc.stdout!.on('data', collect);
  proc.stderr!.on('data', collect);
  onCleanup(name, async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    if (!(await Promise.race([child.exited.then(() => true), sleep(12_000).then(() => false)]))) {
      proc.kill('SIGKILL');
      await child.exited;
    }
  });
  return child;
}


const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });



async function pickDatabase(): Promise<{ url: string; kind: string }> {
  const given = process.env.BENCH_DATABASE_URL;
  if (given) return { url: given, kind: 'BENCH_DATABASE_URL' };
  if (!(await answers('127.0.0.1', 5432))) throw new Error('no PostgreSQL on 127.0.0.1:5432; set BENCH_DATABASE_URL');
  const name = `omni_bench_contacts_${process.pid}`;
  const url = await freshLocalDatabase(name, onCleanup);
  return { url, kind: `127.0.0.1:5432/${name} (fresh, dropped at exit)` };
}

// ---------------------------------------------------------------------------------------------
// The counting proxy: every byte is forwarded unchanged; the client → server direction is parsed
// into frontend messages (after the untyped startup/SSL/cancel packets) and each simple query ('Q')
// or extended-protocol execution ('E', with the SQL of the statement its 'B' bound: the unnamed one
// last parsed, or a named prepared statement parsed earlier on the connection) is recorded.
// ---------------------------------------------------------------------------------------------
type Statement = { at: number; kind: 'Q' | 'E'; sql: string };

class CountingProxy {
  readonly statements: Statement[] = [];
  recording = false;
  #server: net.Server | undefined;
  readonly #sockets = new Set<net.Socket>();
  readonly #target: { host: string; port: number };

  constructor(target: { host: string; port: number }) {
    this.#target = target;
  }

  async listen(): Promise<number> {
    this.#server = net.createServer((client) => this.#connection(client));
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    return (this.#server.address() as net.AddressInfo).port;
  }

  #connection(client: net.Socket): void {
    const server = net.connect(this.#target);
    for (const s of [client, server]) {
      this.#sockets.add(s);
      s.setNoDelay(true);
      s.on('close', () => this.#sockets.delete(s));
      s.on('error', () => { client.destroy(); server.destroy(); });
    }
    server.pipe(client);
    let buf: Buffer = Buffer.alloc(0);
    let startup = true;
    // Prepared statements: named ones are parsed once per connection and then only bound by name.
    const named = new Map<string, string>();
    let unnamed = '';
    let bound = '';
    client.on('data', (chunk: Buffer) => {
      server.write(chunk);
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      for (;;) {
        if (startup) {
          if (buf.length < 8) break;
          const len = buf.readInt32BE(0);
          if (buf.length < len) break;
          const code = buf.readInt32BE(4);
          // SSLRequest / GSSENCRequest are followed by another startup packet; anything else ends the startup phase.
          if (code !== 80877103 && code !== 80877104) startup = false;
          buf = buf.subarray(len);
          continue;
        }
        if (buf.length < 5) break;
        const len = buf.readInt32BE(1);
        if (buf.length < len + 1) break;
        const type = String.fromCharCode(buf[0]!);
        const payload = buf.subarray(5, len + 1);
        if (type === 'Q') this.#record('Q', cstring(payload, 0));
        else if (type === 'P') {
          const name = cstring(payload, 0);
          const sql = cstring(payload, payload.indexOf(0) + 1);
          if (name) named.set(name, sql);
          else unnamed = sql;
        } else if (type === 'B') {
          const statement = cstring(payload, payload.indexOf(0) + 1);
          bound = statement ? (named.get(statement) ?? `(prepared ${statement})`) : unnamed;
        } else if (type === 'E') this.#record('E', bound);
        buf = buf.subarray(len + 1);
      }
    });
    client.on('end', () => server.end());
    server.on('end', () => client.end());
  }

  #record(kind: 'Q' | 'E', sql: string): void {
    if (this.recording) this.statements.push({ at: performance.now(), kind, sql });
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }
}

function cstring(b: Buffer, from: number): string {
  const end = b.indexOf(0, from);
  return b.subarray(from, end < 0 ? b.length : end).toString('utf8');
}

// ---------------------------------------------------------------------------------------------
// Seed.
// ---------------------------------------------------------------------------------------------
const FIRST_NAMES = ['James', 'Maria', 'Wei', 'Aisha', 'Lucas', 'Sofia', 'Hiroshi', 'Fatima', 'Oliver', 'Chloe', 'Mateo', 'Priya', 'Noah', 'Emma', 'Jonas', 'Amara', 'Liam', 'Yuki', 'Ethan', 'Zoe'];
const LAST_NAMES = ['Smith', 'Garcia', 'Chen', 'Khan', 'Silva', 'Rossi', 'Tanaka', 'Haddad', 'Brown', 'Martin', 'Lopez', 'Patel', 'Johnson', 'Muller', 'Schmidt', 'Okafor', 'Wilson', 'Sato', 'Dubois', 'Novak', 'Kowalski', 'Nguyen', 'Costa'];
const DOMAINS = ['example.com', 'mail.test', 'acme.io', 'corp.example', 'inbox.dev'];

async function seed(db: pg.Client, orgId: string): Promise<{ contacts: number; lists: number; memberships: number; messages: number; events: number; seconds: number }> {
  const t0 = performance.now();
  // Phones: six countries' E.164 shapes, unique through the row number. Ids sort like real ones
  // (time-ordered) so the newest contacts are the highest row numbers.
  await db.query(`
    insert into contacts (id, organization_id, mode, phone, email, first_name, last_name, country, lifecycle_stage, tags, metadata, consent, sequence, created_at, updated_at)
    select 'con_01bench' || lpad(i::text, 15, '0'), $1, 'test',
      case i % 6
        when 0 then '+1' || (201 + i % 700)::text || lpad(i::text, 7, '0')
        when 1 then '+447' || lpad(i::text, 9, '0')
        when 2 then '+4915' || lpad(i::text, 9, '0')
        when 3 then '+336' || lpad(i::text, 8, '0')
        when 4 then '+55119' || lpad(i::text, 8, '0')
        else '+919' || lpad(i::text, 9, '0') end,
      case when i % 10 = 7 then null else lower(f.name || '.' || l.name || i::text || '@' || ($4::text[])[1 + i % 5]) end,
      f.name, l.name,
      (array['US','GB','DE','FR','BR','IN'])[1 + i % 6],
      (array['subscriber','lead','prospect','opportunity','customer','evangelist','churned','other'])[1 + i % 8],
      (array['[]','["vip"]','["newsletter"]','["newsletter","beta"]','["vip","churn-risk"]','["trial"]','[]'])[1 + i % 7]::jsonb,
      case when i % 3 = 0 then jsonb_build_object('source', 'bench', 'account', 'acct-' || i) else '{}'::jsonb end,
      '{}'::jsonb, 1, now() - make_interval(secs => $5::int - i), now() - make_interval(secs => $5::int - i)
    from generate_series(1, $5::int) as g(i)
    cross join lateral (select ($2::text[])[1 + (i * 7) % 20] as name) f
    cross join lateral (select ($3::text[])[1 + (i * 13) % 23] as name) l`,
  [orgId, FIRST_NAMES, LAST_NAMES, DOMAINS, CONTACTS]);

  // Five lists; the 100 newest contacts (the page the query reads) are members of 0 to 3 of them.
  await db.query(`
    insert into contact_lists (id, organization_id, mode, name, description, created_at, updated_at)
    select 'lst_01bench' || lpad(n::text, 15, '0'), $1, 'test', name, null, now(), now()
    from unnest(array['Newsletter','VIP','Beta testers','Webinar 2026','Win-back']) with ordinality as x(name, n)`, [orgId]);
  const members = await db.query(`
    insert into contact_list_members (list_id, contact_id, organization_id, mode, added_at)
    select 'lst_01bench' || lpad(n::text, 15, '0'), c.id, $1, 'test', now()
    from (select id, row_number() over (order by id desc) as r from contacts where organization_id = $1 and mode = 'test' order by id desc limit 100) c
    cross join generate_series(1, 5) as n
    where (c.r + n) % 4 <> 0 and n <= 1 + c.r % 4`, [orgId]);

  // Messages: SMS out, SMS in (every other one) and an email for 90 of the 100 newest contacts
  // (the 10 newest have none: lastActivity null), and 5,000 SMS to addresses that are no contact.
  const messages = await db.query(`
    with newest as (
      select id, phone, email, row_number() over (order by id desc) as r
      from contacts where organization_id = $1 and mode = 'test' order by id desc limit 100
    ), c as (select * from newest where r > 10)
    insert into messages (id, organization_id, mode, channel, direction, "to", recipients, "from", body, content, status, status_history, metadata, sequence, created_at, updated_at)
    select 'msg_01bench' || lpad(row_number() over (order by at, k)::text, 15, '0'), $1, 'test', channel, direction, "to", jsonb_build_array("to"), "from",
      'bench', '{}'::jsonb, 'delivered', '[]'::jsonb, '{}'::jsonb, 1, at, at
    from (
      select c.phone as "to", '+15005550006' as "from", 'sms' as channel, 'outbound' as direction, now() - interval '3 hours' + c.r * interval '1 second' as at, 1 as k
        from c where c.phone is not null
      union all
      select '+15005550006', c.phone, 'sms', 'inbound', now() - interval '2 hours' + c.r * interval '1 second', 2 from c where c.phone is not null and c.r % 2 = 0
      union all
      select c.email, 'sandbox@sandbox.test', 'email', 'outbound', now() - interval '1 hour' + c.r * interval '1 second', 3 from c where c.email is not null
      union all
      select '+1999' || lpad(g::text, 7, '0'), '+15005550006', 'sms', 'outbound', now() - interval '4 hours' + g * interval '1 second', 4 from generate_series(1, 5000) g
    ) m`, [orgId]);
  // The timeline (and so lastActivity) reads the event backbone: the events these messages would
  // have emitted (queued, sent, delivered for outbound; received for inbound), ids in time order.
  const events = await db.query(`
    insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at, dispatched_at)
    select 'evt_01bench' || lpad(row_number() over (order by at, resource_id, step)::text, 15, '0'), $1, 'test', type, 'message', resource_id, step, data, at, at
    from (
      select m.id as resource_id, s.step, s.type, m.created_at + s.step * interval '1 second' as at,
        jsonb_build_object('message_id', m.id, 'channel', m.channel, 'from', m."from", 'to', m."to", 'status', s.status, 'direction', m.direction) as data
      from messages m
      cross join lateral (values (1, 'message.queued', 'queued'), (2, 'message.sent', 'sent'), (3, 'message.delivered', 'delivered'), (1, 'message.received', 'delivered')) as s(step, type, status)
      where m.organization_id = $1 and m.mode = 'test' and (m.direction = 'inbound') = (s.type = 'message.received')
    ) e`, [orgId]);
  await db.query('vacuum analyze contacts, contact_lists, contact_list_members, messages, events');
  return { contacts: CONTACTS, lists: 5, memberships: members.rowCount ?? 0, messages: messages.rowCount ?? 0, events: events.rowCount ?? 0, seconds: (performance.now() - t0) / 1000 };
}

// ---------------------------------------------------------------------------------------------
// Output.
// ---------------------------------------------------------------------------------------------
const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const finite = (n: number) => (Number.isFinite(n) ? n : null);

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  const sep = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(rows[0]!), sep, ...rows.slice(1).map(line)].join('\n');
}

const CONTACTS_QUERY = `query ContactsPage {
  contacts(first: 100) { edges { node {
    id firstName lastName phone email country tags
    lists { id name }
    lastActivity { id channel direction status createdAt }
  } } }
}`;

type PageNode = { id: string; tags: string[]; lists: { id: string }[]; lastActivity: { id: string } | null };
const gqlOk = (_status: number, body: string) => !body.includes('"errors"') && body.includes('"edges"');

/** Search terms: names (whole, prefix, two words, a typo), phone fragments, emails and a metadata value, as users type them. */
const SEARCH_TERMS = [
  'maria', 'garcia', 'maria garcia', 'wei chen', 'smi', 'okafor', 'yuki sato', 'aisha khan', 'kowalsky', 'dubois',
  '+447000', '4915000', '+1415', '33600012', '919000045', '+5511900001',
  'maria.garcia', 'chen12', '@acme.io', 'zoe.costa', 'lucas.silva1234', 'inbox.dev',
  'acct-4200',
];

async function main(): Promise<void> {
  const t0 = Date.now();
  const db = await pickDatabase();
  log(`database: ${db.kind}`);
  const { baseEnv, org, monitor } = await benchOrganization(db.url, { log, onCleanup });
  const seeded = await seed(monitor, org.organization_id);
  log(`seeded ${seeded.contacts} contacts, ${seeded.memberships} memberships, ${seeded.messages} messages, ${seeded.events} events in ${fmt(seeded.seconds)} s`);

  // The service reaches PostgreSQL through the counting proxy.
  const target = new URL(db.url);
  const proxy = new CountingProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const proxyPort = await proxy.listen();
  onCleanup('counting proxy', () => proxy.close());
  const viaProxy = new URL(db.url);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxyPort);
  const servicePort = await freePort();
  const service = startChild('service', ['src/main.ts', '--no-workers'], { ...baseEnv, DATABASE_URL: viaProxy.toString(), PORT: String(servicePort), HOST: '127.0.0.1' });
  await waitReady(service, servicePort, '/readyz');
  log(`service on :${servicePort} (pid ${service.proc.pid}) through the proxy on :${proxyPort}`);
  const keys = await createKeys(servicePort, org.test_api_key, KEYS);
  const key = (i: number) => keys[i % keys.length]!;
  const gqlBody = JSON.stringify({ query: CONTACTS_QUERY });
  const gqlHeaders = (i: number) => ({ 'X-API-Key': key(i), 'Content-Type': 'application/json', Accept: 'application/json' });

  // Correctness of the page the figures are about.
  const first = await call(servicePort, 'POST', '/graphql', gqlHeaders(0), gqlBody, agent);
  if (first.status !== 200 || !gqlOk(first.status, first.body)) throw new Error(`GraphQL query failed: ${first.status} ${first.body.slice(0, 500)}`);
  const nodes = (JSON.parse(first.body) as { data: { contacts: { edges: { node: PageNode }[] } } }).data.contacts.edges.map((e) => e.node);
  const page = {
    contacts: nodes.length,
    with_tags: nodes.filter((n) => n.tags.length).length,
    with_lists: nodes.filter((n) => n.lists.length).length,
    list_memberships: nodes.reduce((s, n) => s + n.lists.length, 0),
    with_last_activity: nodes.filter((n) => n.lastActivity).length,
  };
  const expected = await monitor.query<{ with_lists: number; memberships: number }>(
    `select count(distinct m.contact_id)::int as with_lists, count(*)::int as memberships from contact_list_members m
      where m.contact_id in (select id from contacts where organization_id = $1 and mode = 'test' order by id desc limit 100)`, [org.organization_id]);
  if (page.contacts !== 100 || page.list_memberships !== expected.rows[0]!.memberships || page.with_last_activity !== 90) {
    throw new Error(`unexpected page: ${JSON.stringify(page)} (memberships in the database: ${expected.rows[0]!.memberships}, 90 contacts with messages)`);
  }
  log(`page check: ${JSON.stringify(page)}`);

  // (a) SQL statements per request: sequential requests, the proxy's statements inside each one's window.
  const counts: number[] = [];
  const pgBoss: number[] = [];
  let sample: Statement[] = [];
  for (let i = 0; i < COUNT_REQUESTS; i++) {
    await sleep(20);
    proxy.statements.length = 0;
    proxy.recording = true;
    // One key, already used (its credential is cached, as for any client after its first request).
    const r = await call(servicePort, 'POST', '/graphql', gqlHeaders(0), gqlBody, agent);
    proxy.recording = false;
    if (!gqlOk(r.status, r.body)) throw new Error(`GraphQL query failed: ${r.status} ${r.body.slice(0, 500)}`);
    const mine = proxy.statements.filter((s) => !/pgboss/i.test(s.sql));
    counts.push(mine.length);
    pgBoss.push(proxy.statements.length - mine.length);
    if (i === COUNT_REQUESTS - 1) sample = mine;
  }
  const sortedCounts = [...counts].sort((a, b) => a - b);
  const statements = { min: sortedCounts[0]!, median: sortedCounts[Math.floor(sortedCounts.length / 2)]!, max: sortedCounts[sortedCounts.length - 1]!, requests: COUNT_REQUESTS };
  const statementsPass = statements.max <= TARGET_STATEMENTS;
  const kindOf = (sql: string) => (/rate_limit_counters|rate_limit_take/.test(sql) ? 'rate limit' : /api_keys|team_members|sessions/.test(sql) ? 'auth' : 'data');
  const breakdown: Record<string, number> = {};
  for (const st of sample) breakdown[kindOf(st.sql)] = (breakdown[kindOf(st.sql)] ?? 0) + 1;
  log(`statements per request: ${counts.join(' ')} (pg-boss statements in the same windows: ${pgBoss.reduce((a, b) => a + b, 0)})`);

  // (a) latency (sequential) and throughput (CONNECTIONS).
  log(`GraphQL: ${SEQUENTIAL} sequential requests`);
  const sequential: BatchResult = await runBatch({ port: servicePort, connections: 1, total: SEQUENTIAL, request: (i) => ({ method: 'POST', path: '/graphql', headers: gqlHeaders(i), body: gqlBody }), accept: gqlOk });
  log(`GraphQL: ${CONNECTIONS} connections for ${WARMUP_SECONDS} + ${SECONDS} s`);
  const load: LoadResult = await runLoad({
    port: servicePort, connections: CONNECTIONS, warmupMs: WARMUP_SECONDS * 1000, durationMs: SECONDS * 1000,
    request: (i) => ({ method: 'POST', path: '/graphql', headers: gqlHeaders(i), body: gqlBody }), accept: gqlOk,
  });

  // (b) full-text search, sequential.
  const hits = new Map<string, number>();
  for (const term of SEARCH_TERMS) {
    const r = await call(servicePort, 'GET', `/v1/contacts?search=${encodeURIComponent(term)}&limit=20`, { 'X-API-Key': key(0) }, undefined, agent);
    if (r.status !== 200) throw new Error(`search "${term}": ${r.status} ${r.body.slice(0, 300)}`);
    hits.set(term, (JSON.parse(r.body) as { data: unknown[] }).data.length);
  }
  log(`search results per term (first page of 20): ${[...hits].map(([t, n]) => `${t}=${n}`).join(', ')}`);
  const search: BatchResult = await runBatch({
    port: servicePort, connections: 1, total: SEARCH_REQUESTS,
    request: (i) => ({ method: 'GET', path: `/v1/contacts?search=${encodeURIComponent(SEARCH_TERMS[i % SEARCH_TERMS.length]!)}&limit=20`, headers: { 'X-API-Key': key(i) } }),
  });

  // Output.
  const out: string[] = [];
  out.push('');
  out.push(`Contacts bench: ${CONTACTS.toLocaleString('en-US')} contacts (test mode), ${seeded.messages} messages, ${seeded.memberships} memberships; node ${process.version}, ${os.cpus().length} CPUs; ${db.kind}`);
  out.push('');
  out.push(table([
    ['scenario', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'target', 'result'],
    ['GraphQL contacts(first: 100) + tags, lists, lastActivity: SQL statements/request', String(statements.requests), '0', '-', '-', '-', `<= ${TARGET_STATEMENTS}`,
      `${statements.max === statements.min ? statements.max : `${statements.min}-${statements.max}`} ${statementsPass ? 'PASS' : 'MISS'}`],
    ['GraphQL contacts(first: 100) …, 1 connection (sequential)', String(sequential.ok), String(sequential.errors), fmt(sequential.rps), fmt(sequential.p50), fmt(sequential.p99), '-', '-'],
    [`GraphQL contacts(first: 100) …, ${CONNECTIONS} connections`, String(load.ok), String(load.errors), fmt(load.rps), fmt(load.p50), fmt(load.p99), '-', '-'],
    [`REST GET /v1/contacts?search=… (${SEARCH_TERMS.length} terms), 1 connection`, String(search.ok), String(search.errors), fmt(search.rps), fmt(search.p50), fmt(search.p99), '-', '-'],
  ]));
  out.push('');
  out.push(`statements of one request (${sample.length}: ${Object.entries(breakdown).map(([k, n]) => `${n} ${k}`).join(', ')}; 'E' = extended-protocol execute, 'Q' = simple query):`);
  for (const st of sample) out.push(`  [${st.kind}] ${kindOf(st.sql).padEnd(10)} ${st.sql.replace(/\s+/g, ' ').slice(0, 100)}`);
  out.push(`page: ${page.contacts} contacts, ${page.with_tags} with tags, ${page.with_lists} with lists (${page.list_memberships} memberships), ${page.with_last_activity} with a last activity`);
  if (load.sampleError || sequential.sampleError || search.sampleError) out.push(`sample error: ${load.sampleError ?? sequential.sampleError ?? search.sampleError}`);
  out.push(`service log lines at warn or above: ${service.warnings}`);
  process.stdout.write(`${out.join('\n')}\n`);

  const written = writeResults('contacts.json', {
    timestamp: new Date().toISOString(),
    config: { contacts: CONTACTS, keys: KEYS, connections: CONNECTIONS, warmup_seconds: WARMUP_SECONDS, seconds: SECONDS, node: process.version, cpus: os.cpus().length, database: db.kind },
    seed: seeded,
    page,
    graphql_statements: { ...statements, per_request: counts, breakdown, target_max: TARGET_STATEMENTS, pass: statementsPass, pgboss_statements_in_windows: pgBoss.reduce((a, b) => a + b, 0), sample: sample.map((s) => ({ kind: s.kind, sql: s.sql.slice(0, 400) })) },
    graphql_sequential: { requests: sequential.ok, errors: sequential.errors, rps: sequential.rps, p50_ms: sequential.p50, p99_ms: sequential.p99, sample_error: sequential.sampleError ?? null },
    graphql_load: { connections: CONNECTIONS, rps: load.rps, ok: load.ok, errors: load.errors, statuses: load.statuses, p50_ms: finite(load.p50), p90_ms: finite(load.p90), p99_ms: finite(load.p99), max_ms: finite(load.max), sample_error: load.sampleError ?? null },
    search: { terms: SEARCH_TERMS, first_page_hits: Object.fromEntries(hits), requests: search.ok, errors: search.errors, rps: search.rps, p50_ms: search.p50, p99_ms: search.p99, sample_error: search.sampleError ?? null },
    service_warnings: service.warnings,
  });
  log(`results written to ${written}; total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

// The keep-alive agent is closed before the cleanup stack stops the service.
await runMain(async () => {
  try {
    await main();
  } finally {
    agent.destroy();
  }
}, log, cleanup);
