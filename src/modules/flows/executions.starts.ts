/**
 * Starting executions in the caller's transaction with plain SQL, so the outbox relay (whose
 * transaction marks the triggering events dispatched) and the API share one path: a trigger fires
 * if and only if its event committed, exactly once. Each start inserts the execution (pinned to the
 * flow's current version), its step 0 (the trigger node, output = the input) and the job of step 1;
 * a batch of starts costs three statements.
 */
import type { Scope } from '../../platform/auth/scope.ts';
import { newId } from '../../platform/ids.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { FlowDefinition, TriggerType } from './flows.graph.ts';
import { nextNode } from './flows.graph.ts';
import { STEP_JOB, stepJobId, type StepJob } from './executions.engine.ts';
import type { ExecutionError } from './flows.entities.ts';
import type { PhiCodec } from '../../platform/phi.ts';
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
  depth: number;
  /** Set when the start is refused (concurrency limit): the execution is recorded as failed. */
  refused?: ExecutionError;
};

export type Started = { id: string; start: Start };

/**
 * Per organization and mode: how many executions are running or waiting now. Takes each tenant's
 * transaction-scoped advisory lock first (in a fixed order), so concurrent starts of one tenant
 * count and insert one after the other: the limit cannot be overshot by starts that counted at
 * the same moment. Call it in the transaction that then inserts the starts.
 */
export async function activeCounts(query: Query, tenants: readonly { organizationId: string; mode: string }[]): Promise<Map<string, number>> {
  const keys = [...new Set(tenants.map((t) => `${t.organizationId}:${t.mode}`))].sort();
  if (keys.length === 0) return new Map();
  await query(`select count(pg_advisory_xact_lock(hashtextextended('flows.active:' || k, 0)))::int as locked from unnest($1::text[]) as k`, [keys]);
  const rows = await query<{ org: string; mode: string; n: number }>(
    `select organization_id as org, mode, count(*)::int as n from flow_executions
      where status in ('running','waiting') and (organization_id || ':' || mode) = any($1::text[]) group by 1, 2`, [keys]);
  return new Map(rows.map((r) => [`${r.org}:${r.mode}`, r.n]));
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
    });
    const stepId = newId('fst', now.getTime());
    const log = { input: null, output: input, error: null };
    steps.push({ id: stepId, organization_id: s.scope.organizationId, mode: s.scope.mode, execution_id: id, node_id: entry.id, ...(codec ? sealStep(stepId, log, codec) : { ...log, phi: null }) });
    if (!s.refused) jobEntries.push({ data: { executionId: id, seq: 1 }, scope: s.scope, id: stepJobId(id, 1) });
    started.push({ id, start: s });
  }
  await query(
    `insert into flow_executions (id, organization_id, mode, flow_id, flow_version, status, trigger_type, context, phi, cursor, current_node_id, waiting, error,
        steps_count, depth, sequence, created_at, updated_at, finished_at)
     select x.id, x.organization_id, x.mode, x.flow_id, x.flow_version, x.status, x.trigger_type, x.context, x.phi, 1, x.current_node_id, null, x.error,
        1, x.depth, 1, $2, $2, case when x.status = 'failed' then $2::timestamptz end
       from jsonb_to_recordset($1::jsonb) as x(id text, organization_id text, mode text, flow_id text, flow_version int, status text,
        trigger_type text, context jsonb, phi text, current_node_id text, error jsonb, depth int)`,
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
  return started;
}
