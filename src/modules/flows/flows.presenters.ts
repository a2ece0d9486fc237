/** REST shapes (snake_case) of flows, flow versions, executions and steps. */
import type { Flow, FlowStep, FlowVersion } from './flows.entities.ts';
import { revealedSecrets } from './flows.service.ts';
import type { ExecutionView } from './executions.service.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);
/** Where a webhook-triggered flow is called (signed with its webhook secret; see the README). */
export const FLOW_WEBHOOK_PATH = '/v1/providers/flows/callbacks';

export function presentFlow(f: Flow) {
  const secret = revealedSecrets.get(f);
  return {
    id: f.id,
    name: f.name,
    trigger: f.trigger,
    trigger_type: f.triggerType,
    definition: f.definition,
    version: f.version,
    ...(f.triggerType === 'webhook' ? { webhook_url: FLOW_WEBHOOK_PATH } : {}),
    ...(secret ? { webhook_secret: secret } : {}),
    created_at: iso(f.createdAt),
    updated_at: iso(f.updatedAt),
  };
}

export function presentFlowVersion(v: FlowVersion) {
  return { id: v.id, flow_id: v.flowId, version: v.version, name: v.name, trigger: v.trigger, definition: v.definition, created_at: iso(v.createdAt) };
}

export function presentStep(s: FlowStep) {
  return {
    id: s.id, seq: s.seq, node_id: s.nodeId, node_type: s.nodeType, status: s.status, input: s.input, output: s.output, error: s.error,
    started_at: iso(s.startedAt), finished_at: iso(s.finishedAt), duration_ms: s.durationMs,
  };
}

export function presentExecution(e: ExecutionView) {
  return {
    id: e.id,
    execution_id: e.id,
    flow_id: e.flowId,
    flow_version: e.flowVersion,
    status: e.status,
    trigger_type: e.triggerType,
    input: (e.context.input as Record<string, unknown> | undefined) ?? {},
    current_node_id: e.currentNodeId,
    waiting: e.waiting,
    error: e.error,
    steps_count: e.stepsCount,
    created_at: iso(e.createdAt),
    updated_at: iso(e.updatedAt),
    finished_at: iso(e.finishedAt),
    ...(e.steps ? { steps: e.steps.map(presentStep) } : {}),
  };
}
