/**
 * Flow PHI in HIPAA mode (see platform/phi.ts). What an execution carries is whatever its trigger
 * handed it (an API or webhook payload, an event, an inbound message) and what its steps produced
 * (HTTP responses, rendered messages, contact fields, an agent's answer): all of it may be PHI. So
 * in HIPAA mode an execution's context (trigger, input, every step's output) is sealed in
 * `flow_executions.phi` (only the `execution` ids stay in `context`), and each step's input,
 * output and error in `flow_execution_steps.phi`, bound to organization, table, row id and column.
 * Error messages can echo rendered values (a malformed address, a URL): the clear `error` of a
 * step and of its execution keep the node and code and a generic message; the detail is sealed.
 * Custom events (`webhook_event` nodes) leave the flow through the outbox and webhooks: in HIPAA
 * mode their `data` stays in the sealed step log (the event says `data_sealed: true`; receivers read
 * the step). Clear: ids, statuses, node ids and types, timings, the waiting address and deadline.
 * An execution sealed once stays sealed to its end, even if the mode is turned off meanwhile.
 */
import type { Scope } from '../../platform/auth/scope.ts';
import { PhiUse, redactDeep, type PhiCodec, type PhiPort, type PhiRef } from '../../platform/phi.ts';
import type { ExecutionError, FlowExecution, FlowStep } from './flows.entities.ts';

export const EXECUTION_PHI_FIELDS = ['input', 'context', 'error'] as const;
export const STEP_PHI_FIELDS = ['input', 'output', 'error'] as const;

const executionRef = (id: string): PhiRef => ({ table: 'flow_executions', rowId: id, column: 'phi' });
const stepRef = (id: string): PhiRef => ({ table: 'flow_execution_steps', rowId: id, column: 'phi' });

export type Context = Record<string, unknown>;
type SealedExecution = { context: Context; error: string | null };
type StepContent = { input: Record<string, unknown> | null; output: Record<string, unknown> | null; error: ExecutionError | null };

/** The clear stand-in of an error message in HIPAA mode (the message itself is sealed). */
export function sealedError(error: ExecutionError): ExecutionError {
  return { node: error.node, code: error.code, message: `${error.code} (the detail is PHI, sealed: read the step with PHI access)` };
}

/** An execution's stored columns for a context (and error) in HIPAA mode: the ids in clear, the rest sealed. */
export function sealExecution(id: string, context: Context, error: ExecutionError | null, codec: PhiCodec): { context: Context; phi: string; error: ExecutionError | null } {
  const { execution, ...rest } = context;
  const sealed: SealedExecution = { context: rest, error: error?.message ?? null };
  return { context: { execution }, phi: codec.seal(executionRef(id), JSON.stringify(sealed)), error: error ? sealedError(error) : null };
}

/** A step's stored columns in HIPAA mode. */
export function sealStep(id: string, content: StepContent, codec: PhiCodec): StepContent & { phi: string } {
  return { input: null, output: null, error: content.error ? sealedError(content.error) : null, phi: codec.seal(stepRef(id), JSON.stringify(content)) };
}

/** An execution with its context (and error message) opened: a plain copy, never a managed entity. */
export function openExecution<T extends FlowExecution>(ex: T, codec: PhiCodec): T {
  if (!ex.phi) return ex;
  const sealed = JSON.parse(codec.open(executionRef(ex.id), ex.phi)) as SealedExecution;
  const error = ex.error && sealed.error !== null ? { ...ex.error, message: sealed.error } : ex.error;
  return { ...ex, context: { ...sealed.context, ...ex.context }, error, phi: null };
}

export function openStep<T extends FlowStep>(step: T, codec: PhiCodec): T {
  if (!step.phi) return step;
  const content = JSON.parse(codec.open(stepRef(step.id), step.phi)) as StepContent;
  return { ...step, ...content, phi: null };
}

/** Opened (when sealed and a codec is at hand) then redacted: the shape stays, every string reads [REDACTED]. */
function redactExecution<T extends FlowExecution>(ex: T, codec: PhiCodec | undefined): T {
  const opened = ex.phi && codec ? openExecution(ex, codec) : ex;
  const { execution, ...rest } = opened.context;
  return { ...opened, context: { ...redactDeep(rest), execution }, error: ex.error, phi: null };
}

function redactStep<T extends FlowStep>(step: T, codec: PhiCodec | undefined): T {
  const opened = step.phi && codec ? openStep(step, codec) : step;
  return { ...opened, input: redactDeep(opened.input), output: redactDeep(opened.output), error: step.error, phi: null };
}

/** The flows context's use of the `phi` port (optional: without the HIPAA module nothing is sealed). */
export class FlowPhi extends PhiUse {
  constructor(port: () => PhiPort | undefined) {
    super(port, 'a flow execution');
  }

  /** The codec an execution's writes are sealed with: the organization is in HIPAA mode, or the execution was sealed already. */
  async sealer(organizationId: string, sealed: string | null | undefined): Promise<PhiCodec | null> {
    const writer = await this.writer(organizationId);
    if (writer && !sealed) return writer;
    return (await this.opener(organizationId, [sealed])) ?? writer;
  }

  /** An execution's full context (opened when sealed), for the engine. */
  async context(ex: FlowExecution, codec?: PhiCodec | null): Promise<Context> {
    if (!ex.phi) return ex.context;
    return openExecution(ex, codec ?? (await this.opener(ex.organizationId, [ex.phi]))!).context;
  }

  /** Executions (and their steps, when loaded) as this caller may see them (opened and logged, or redacted). */
  executions<T extends FlowExecution & { steps?: FlowStep[] }>(scope: Scope, rows: T[], operation: string): Promise<T[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi, ...(r.steps ?? []).map((st) => st.phi)],
      open: (r, codec) => ({ ...openExecution(r, codec), ...(r.steps ? { steps: r.steps.map((st) => openStep(st, codec)) } : {}) }),
      redact: (r, codec) => ({ ...redactExecution(r, codec), ...(r.steps ? { steps: r.steps.map((st) => redactStep(st, codec)) } : {}) }),
      resourceType: 'flow_execution', fields: [...EXECUTION_PHI_FIELDS, ...(rows.some((r) => r.steps) ? ['steps'] : [])], operation,
    });
  }

  /** Steps of one execution as this caller may see them. */
  steps<T extends FlowStep>(scope: Scope, rows: T[], operation: string): Promise<T[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi], open: (r, codec) => openStep(r, codec), redact: (r, codec) => redactStep(r, codec),
      resourceType: 'flow_execution_step', fields: STEP_PHI_FIELDS, operation,
    });
  }
}
