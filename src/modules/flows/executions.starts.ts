/**
 * Starting executions in the caller's transaction with plain SQL, so the outbox relay (whose
 * transaction marks the triggering events dispatched) and the API share one path: a trigger fires
 * if and only if its event committed, exactly once. Each start inserts the execution (pinned to the
 * flow's current version), its step 0 (the trigger node, output = the input) and the job of step 1;
 * a batch of starts costs three statements. A refused start (chain depth, per-minute cap,
 * concurrency limit) is recorded `failed` with the reason and emits `flow.execution.failed` (a
 * fourth statement, only when some start was refused).
 */
import type { Scope } from '../../platform/auth/scope.ts';
import { newId } from '../../platform/ids.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { FlowDefinition, TriggerType } from './flows.graph.ts';
import { nextNode } from './flows.graph.ts';
import { STEP_JOB, stepJobId, type StepJob } from './executions.engine.ts';
import type { ExecutionError } from './flows.entities.ts';
import type { PhiCodec } from '../../platform/phi.ts';
import { eventRow } from '../../platform/events/events.ts';
import { idFloor } from '../../platform/ids.ts';
import { sealExecution, sealStep } from './flows.phi.ts';

export type Query = <R = Record<string, unknown>>(sql: string, params?: readonly unknown[]) => Promise<R[]>;

export type Start = {
  scope: Scope;
  flow: { id: string; version: number; definition: FlowDefinition };
  triggerType: TriggerType;
  /** What the trigger saw (`type`, event id and type, …). */
  trigger: Record<string, unknown>;
  input: Record<string, unknown>;
  /** Stored instead of `input` when the organization's executions are not sealed (an inbound message without its sealed body). */
  clearInput?: Record<string, unknown>;
  /** How deep in a chain of flow executions (0: caused by no flow); see FlowExecution.depth. */
  depth: number;
  /** Set when the start is refused (chain depth, per-minute cap, concurrency limit): the execution is recorded as failed. */
  refused?: ExecutionError;
  /** A webhook trigger call's delivery id (a replay of it answers with this execution). */
  deliveryId?: string;
};

export type Started = { id: string; start: Start };

/** The per-minute cap's window. */
export const RATE_WINDOW_MS = 60_000;

/**
 * What the limits see: per `organization:mode`, executions running or waiting now (`active`); per
 * flow, executions started (not refused) in the last 60 s, counted up to `perMinute`, with when
 * the oldest of them started (`recent`).
 */
export type StartCounts = { active: Map<string, number>; recent: Map<string, { n: number; oldest: Date | null }> };

/**
 * Counts for the start limits. Takes each tenant's transaction-scoped advisory lock first (in a
 * fixed order), so concurrent starts of one tenant count and insert one after the other: no limit
 * can be overshot by starts that counted at the same moment. Call it in the transaction that then
 * inserts the starts. The window is read on the flows' index by id (ids are time-ordered).
 */
export async function startCounts(query: Query, starts: readonly { scope: { organizationId: string; mode: string }; flowId: string }[], now: Date, perMinute: number): Promise<StartCounts> {
  const keys = [...new Set(starts.map((s) => `${s.scope.organizationId}:${s.scope.mode}`))].sort();
  const counts: StartCounts = { active: new Map(), recent: new Map() };
  if (keys.length === 0) return counts;
  await query(`select count(pg_advisory_xact_lock(hashtextextended('flows.active:' || k, 0)))::int as locked from unnest($1::text[]) as k`, [keys]);
  const flows = [...new Map(starts.map((s) => [s.flowId, s.scope])).entries()];
  const rows = await query<{ kind: 'tenant' | 'flow'; key: string; n: number; oldest: Date | string | null }>(
    `select 'tenant' as kind, organization_id || ':' || mode as key, count(*)::int as n, null::timestamptz as oldest from flow_executions
      where status in ('running','waiting') and (organization_id || ':' || mode) = any($1::text[]) group by 2
     union all
     select 'flow', f.id, w.n, w.oldest
       from unnest($2::text[], $3::text[], $4::text[]) as f(id, org, mode)
       cross join lateral (
         select count(*)::int as n, min(r.created_at) as oldest from (
           select e.created_at from flow_executions e
            where e.organization_id = f.org and e.mode = f.mode and e.flow_id = f.id and e.id >= $5 and not e.refused
            order by e.id limit $6) r) w`,
    [keys, flows.map(([id]) => id), flows.map(([, t]) => t.organizationId), flows.map(([, t]) => t.mode), idFloor('fex', now.getTime() - RATE_WINDOW_MS), perMinute]);
  for (const r of rows) {
    if (r.kind === 'tenant') counts.active.set(r.key, r.n);
    // A Date or its text, depending on the connection's type parsers.
    else counts.recent.set(r.key, { n: r.n, oldest: r.oldest === null ? null : new Date(r.oldest) });
  }
  return counts;
}

export type StartLimits = { maxActive: number; perMinute: number };
export type Refusal =
  | { code: 'RATE_LIMIT_EXCEEDED'; limit: number; retryAfter: number }
  | { code: 'QUOTA_EXCEEDED'; limit: number; active: number };

/**
 * Whether one more start of `flowId` fits the limits given `counts` (which it then counts, when it
 * fits): at most `perMinute` started by the flow in any 60 s, at most `maxActive` running or
 * waiting in its organization and mode. Starts of one batch are admitted in order.
 */
export function admit(counts: StartCounts, scope: { organizationId: string; mode: string }, flowId: string, limits: StartLimits, now: Date): Refusal | null {
  const tenant = `${scope.organizationId}:${scope.mode}`;
  const recent = counts.recent.get(flowId) ?? { n: 0, oldest: null };
  if (recent.n >= limits.perMinute) {
    const frees = (recent.oldest?.getTime() ?? now.getTime()) + RATE_WINDOW_MS;
    return { code: 'RATE_LIMIT_EXCEEDED', limit: limits.perMinute, retryAfter: Math.max(1, Math.ceil((frees - now.getTime()) / 1000)) };
  }
  const active = counts.active.get(tenant) ?? 0;
  if (active >= limits.maxActive) return { code: 'QUOTA_EXCEEDED', limit: limits.maxActive, active };
  counts.recent.set(flowId, { n: recent.n + 1, oldest: recent.oldest ?? now });
  counts.active.set(tenant, active + 1);
  return null;
}

/** A refusal as the failed execution records it. */
export function refusalError(r: Refusal, flowId: string): ExecutionError {
  return r.code === 'RATE_LIMIT_EXCEEDED'
    ? { node: null, code: r.code, message: `flow ${flowId} started ${r.limit} executions in the last 60 s (FLOWS_MAX_EXECUTIONS_PER_MINUTE); this one was not run` }
    : { node: null, code: r.code, message: `at most ${r.limit} executions may run or wait at once per organization; this one was not run` };
}

/**
 * Inserts the starts (executions, their step 0, the jobs of step 1). `writer` answers an
 * organization's PHI codec while it is in HIPAA mode: its executions' context and step 0 are then
 * stored sealed (flows.phi.ts).
 */
export async function insertStarts(query: Query, jobs: Pick<Jobs, 'insertStatement'>, starts: readonly Start[], now: Date, writer: (organizationId: string) => Promise<PhiCodec | null>): Promise<Started[]> {
  if (starts.length === 0) return [];
  const codecs = new Map<string, PhiCodec | null>();
  for (const org of new Set(starts.map((s) => s.scope.organizationId))) codecs.set(org, await writer(org));
  const executions: Record<string, unknown>[] = [];
  const steps: Record<string, unknown>[] = [];
  const jobEntries: { data: StepJob; scope: Scope; id: string }[] = [];
  const events: Record<string, unknown>[] = [];
  const started: Started[] = [];
  for (const s of starts) {
    const id = newId('fex', now.getTime());
    const entry = s.flow.definition.nodes.find((n) => n.type === 'trigger')!;
    const first = nextNode(s.flow.definition, entry.id) ?? null;
    const codec = codecs.get(s.scope.organizationId) ?? null;
    const input = codec ? s.input : s.clearInput ?? s.input;
    const context = {
      trigger: s.trigger, input, steps: { [entry.id]: input },
      execution: { id, flow_id: s.flow.id, flow_version: s.flow.version },
    };
    const stored = codec ? sealExecution(id, context, s.refused ?? null, codec) : { context, error: s.refused ?? null, phi: null };
    executions.push({
      id, organization_id: s.scope.organizationId, mode: s.scope.mode, flow_id: s.flow.id, flow_version: s.flow.version,
      status: s.refused ? 'failed' : 'running', trigger_type: s.triggerType, ...stored, current_node_id: s.refused ? null : first, depth: s.depth,
      refused: s.refused !== undefined, delivery_id: s.deliveryId ?? null,
    });
    if (s.refused) {
      // Says why, as the engine's end of an execution does (its data carries the next depth).
      events.push(eventRow(s.scope, {
        type: 'flow.execution.failed', resourceType: 'flow_execution', resourceId: id, sequence: 1,
        data: { execution_id: id, flow_id: s.flow.id, flow_version: s.flow.version, status: 'failed', steps: 1, error: stored.error, depth: s.depth + 1 },
      }, now));
    }
    const stepId = newId('fst', now.getTime());
    const log = { input: null, output: input, error: null };
    steps.push({ id: stepId, organization_id: s.scope.organizationId, mode: s.scope.mode, execution_id: id, node_id: entry.id, ...(codec ? sealStep(stepId, log, codec) : { ...log, phi: null }) });
    if (!s.refused) jobEntries.push({ data: { executionId: id, seq: 1 }, scope: s.scope, id: stepJobId(id, 1) });
    started.push({ id, start: s });
  }
  await query(
    `insert into flow_executions (id, organization_id, mode, flow_id, flow_version, status, trigger_type, context, phi, cursor, current_node_id, waiting, error,
        steps_count, depth, refused, delivery_id, sequence, created_at, updated_at, finished_at)
     select x.id, x.organization_id, x.mode, x.flow_id, x.flow_version, x.status, x.trigger_type, x.context, x.phi, 1, x.current_node_id, null, x.error,
        1, x.depth, x.refused, x.delivery_id, 1, $2, $2, case when x.status = 'failed' then $2::timestamptz end
       from jsonb_to_recordset($1::jsonb) as x(id text, organization_id text, mode text, flow_id text, flow_version int, status text,
        trigger_type text, context jsonb, phi text, current_node_id text, error jsonb, depth int, refused boolean, delivery_id text)`,
    [JSON.stringify(executions), now]);
  await query(
    `insert into flow_execution_steps (id, organization_id, mode, execution_id, seq, node_id, node_type, status, input, output, error, phi, started_at, finished_at, duration_ms)
     select x.id, x.organization_id, x.mode, x.execution_id, 0, x.node_id, 'trigger', 'completed', null, x.output, null, x.phi, $2, $2, 0
       from jsonb_to_recordset($1::jsonb) as x(id text, organization_id text, mode text, execution_id text, node_id text, output jsonb, phi text)`,
    [JSON.stringify(steps), now]);
  if (jobEntries.length > 0) {
    const statement = await jobs.insertStatement(STEP_JOB, jobEntries);
    await query(statement.text, [statement.value]);
  }
  if (events.length > 0) {
    await query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at, trace_parent)
       select x.id, x.organization_id, x.mode, x.type, x.resource_type, x.resource_id, x.sequence, x.data, x.created_at, x.trace_parent
         from jsonb_to_recordset($1::jsonb) as x(id text, organization_id text, mode text, type text, resource_type text, resource_id text,
          sequence int, data jsonb, created_at timestamptz, trace_parent text)`,
      [JSON.stringify(events)]);
  }
  return started;
}
