/**
 * The scenario table of `npm run bench` (bench/run.ts): the requests each scenario sends and what
 * counts as accepted, in the order run.ts reports them (reads: baseline, REST, GraphQL; messaging:
 * baseline, REST, GraphQL, live paid, HIPAA on). run.ts runs each group as interleaved rounds
 * (bench/pairs.ts) and finds a scenario's results by its `id`.
 */
import type { LoadResult, RequestSpec } from './load.ts';
import { fmt } from './support.ts';

/** Valid, non-magic recipients (the sandbox delivers them); rotated per request. */
export const RECIPIENTS = ['+14155550100', '+14155550101', '+14155550123', '+12125550199', '+14155552671', '+33612345678', '+4915123456789', '+61491570156'];

/** Pre-built SMS bodies (GSM-7, one segment), so the load generator does no JSON work per request. */
const SMS_INPUTS = Array.from({ length: 64 }, (_, i) => ({ to: RECIPIENTS[i % RECIPIENTS.length]!, body: `Bench message ${i}: your code is ${100000 + i * 7919}` }));
export const SMS_REST_BODIES = SMS_INPUTS.map((input) => JSON.stringify(input));
const SEND_SMS_MUTATION = 'mutation SendSms($input: SendSmsInput!) { sendSms(input: $input) { id status } }';
const SMS_GQL_BODIES = SMS_INPUTS.map((input) => JSON.stringify({ query: SEND_SMS_MUTATION, variables: { input } }));

export const smsRestRequest = (keys: string[]) => (i: number): RequestSpec => ({
  method: 'POST', path: '/v1/messages/sms',
  headers: { 'X-API-Key': keys[i % keys.length]!, 'Content-Type': 'application/json' }, body: SMS_REST_BODIES[i % SMS_REST_BODIES.length]!,
});
export const acceptedRest = (status: number, body: string) => status === 201 && body.includes('"status":"queued"');
export const acceptedGql = (_status: number, body: string) => body.includes('"sendSms":{') && body.includes('"status":"queued"') && !body.includes('"errors"');

export type ScenarioId = 'read-baseline' | 'read-rest' | 'read-graphql' | 'read-graphql-warm' | 'send-baseline' | 'send-rest' | 'send-graphql' | 'send-live' | 'send-hipaa';

export type Scenario = {
  id: ScenarioId;
  name: string;
  group: 'read' | 'messaging';
  port: number;
  connections: number;
  request(i: number): RequestSpec;
  accept?(status: number, body: string): boolean;
};

/** `cpu`: CPU ms per request of the server process and of the database backends (warm-up included). */
export type ScenarioResult = LoadResult & { name: string; cpu: { server: number; db: number } };

export function errorDetail(r: ScenarioResult): string {
  const parts = Object.entries(r.statuses).map(([s, n]) => (s.startsWith('2') ? `${n}× rejected ${s} body` : `${n}× HTTP ${s}`));
  if (r.socketErrors) parts.push(`${r.socketErrors}× socket/timeout`);
  return parts.join(', ');
}

/** Where a request's time goes inside the service: mean ms per front-door stage (Server-Timing). */
export function stageLines(rs: readonly ScenarioResult[]): string[] {
  return rs.filter((r) => r.stages).map((r) => `  ${r.name} — time per stage (mean ms, in the service): ` +
    Object.entries(r.stages!).map(([stage, ms]) => `${stage} ${fmt(ms, 3)}`).join(' · '));
}

/**
 * The scenarios, in report order: `keys` (test mode), `liveKeys` (the paid organization's) and
 * `hipaaKeys` (test keys of an organization like the first, HIPAA mode on) rotate per request.
 */
export function benchScenarios(o: {
  keys: string[]; liveKeys: string[]; hipaaKeys: string[]; servicePort: number; baselinePort: number; connections: number; messagingConnections: number;
}): Scenario[] {
  const { keys, liveKeys, hipaaKeys, servicePort, baselinePort } = o;
  const key = (i: number) => keys[i % keys.length]!;
  // Cold: a variable value that differs per request (the operation declares none, so execution
  // ignores it) makes every read a response-cache miss, as the cache keys by document and variables;
  // the scenario refuses any answer marked a hit. Warm: the same body every time, a hit after each
  // key's first request.
  const gqlRead = '{ viewer { role organization { id name } } }';
  const gqlColdBody = (i: number) => JSON.stringify({ query: gqlRead, variables: { cold: i } });
  const gqlWarmBody = JSON.stringify({ query: gqlRead });
  const gqlHeaders = (i: number) => ({ 'X-API-Key': key(i), 'Content-Type': 'application/json', Accept: 'application/json' });
  return [
    {
      id: 'read-baseline', name: 'baseline GET (1 indexed SELECT)', group: 'read', port: baselinePort, connections: o.connections,
      request: (i) => ({ method: 'GET', path: '/lookup', headers: { 'X-API-Key': key(i) } }),
    },
    {
      id: 'read-rest', name: 'REST GET /v1/settings/organization', group: 'read', port: servicePort, connections: o.connections,
      request: (i) => ({ method: 'GET', path: '/v1/settings/organization', headers: { 'X-API-Key': key(i) } }),
    },
    {
      id: 'read-graphql', name: 'GraphQL viewer { role organization }, cache cold', group: 'read', port: servicePort, connections: o.connections,
      request: (i) => ({ method: 'POST', path: '/graphql', headers: gqlHeaders(i), body: gqlColdBody(i) }),
      accept: (_status, body) => !body.includes('"errors"') && !body.includes('"hit":true'),
    },
    {
      id: 'read-graphql-warm', name: 'GraphQL viewer { role organization }, cache warm', group: 'read', port: servicePort, connections: o.connections,
      request: (i) => ({ method: 'POST', path: '/graphql', headers: gqlHeaders(i), body: gqlWarmBody }),
      accept: (_status, body) => !body.includes('"errors"'),
    },
    {
      id: 'send-baseline', name: 'baseline POST /messages (1 INSERT)', group: 'messaging', port: baselinePort, connections: o.messagingConnections,
      request: (i) => ({ method: 'POST', path: '/messages', headers: { 'X-API-Key': key(i), 'Content-Type': 'application/json' }, body: SMS_REST_BODIES[i % SMS_REST_BODIES.length]! }),
      accept: (status) => status === 201,
    },
    {
      id: 'send-rest', name: 'REST POST /v1/messages/sms', group: 'messaging', port: servicePort, connections: o.messagingConnections,
      request: smsRestRequest(keys), accept: acceptedRest,
    },
    {
      id: 'send-graphql', name: 'GraphQL sendSms { id status }', group: 'messaging', port: servicePort, connections: o.messagingConnections,
      request: (i) => ({ method: 'POST', path: '/graphql', headers: gqlHeaders(i), body: SMS_GQL_BODIES[i % SMS_GQL_BODIES.length]! }),
      accept: acceptedGql,
    },
    {
      // Live mode: each send's price is reserved from the credit ledger in its acceptance transaction
      // (issue 17: ≥ 0.9 of the test-mode REST scenario above).
      id: 'send-live', name: 'REST POST /v1/messages/sms, live mode paid from credits', group: 'messaging', port: servicePort, connections: o.messagingConnections,
      request: smsRestRequest(liveKeys), accept: acceptedRest,
    },
    {
      // The same sends from an organization like the first with HIPAA mode on (content sealed with
      // its data key). Judged against the REST scenario above, round by round (issue 18: ≥ 0.9).
      id: 'send-hipaa', name: 'REST POST /v1/messages/sms, HIPAA mode on', group: 'messaging', port: servicePort, connections: o.messagingConnections,
      request: smsRestRequest(hipaaKeys), accept: acceptedRest,
    },
  ];
}
