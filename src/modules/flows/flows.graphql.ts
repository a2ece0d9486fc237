/** GraphQL twins of the flows routes, and the live subscription of an execution's steps. */
import { END, liveIterator } from '../../platform/events/liveIterator.ts';
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { resourceNotices } from '../../graphql/live.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { servicesOf } from '../../context.ts';
import type { LiveNotice } from '../../platform/events/bus.ts';
import { READERS } from '../../platform/auth/roles.ts';
import { EXECUTION_STATUSES, type Flow, type FlowStep, type FlowVersion } from './flows.entities.ts';
import { TRIGGER_TYPES } from './flows.graph.ts';
import { revealedSecrets } from './flows.service.ts';
import type { ExecutionView } from './executions.service.ts';
import {
  cancelExecutionOp, createFlowOp, deleteFlowOp, getExecutionOp, getFlowOp, getFlowVersionOp, listExecutionsOp, listFlowsOp, listFlowVersionsOp,
  startExecutionOp, updateFlowOp,
} from './flows.operations.ts';
import { FLOW_WEBHOOK_PATH } from './flows.presenters.ts';

const TriggerTypeEnum = builder.enumType('FlowTriggerType', { values: TRIGGER_TYPES });
const ExecutionStatusEnum = builder.enumType('FlowExecutionStatus', { values: EXECUTION_STATUSES });

export const FlowRef = builder.node(builder.objectRef<Flow>('Flow'), {
  id: { resolve: (f) => f.id },
  loadOne: (id, ctx) => run(getFlowOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    triggerType: t.field({ type: TriggerTypeEnum, resolve: (f) => f.triggerType }),
    trigger: t.field({ type: 'JSON', resolve: (f) => f.trigger }),
    definition: t.field({ type: 'JSON', description: '{ nodes, edges } (node types: docs/flows.md)', resolve: (f) => f.definition }),
    version: t.exposeInt('version'),
    webhookUrl: t.string({ nullable: true, resolve: (f) => (f.triggerType === 'webhook' ? FLOW_WEBHOOK_PATH : null) }),
    webhookSecret: t.string({ nullable: true, description: 'Only in the result of the save that set the webhook trigger', resolve: (f) => revealedSecrets.get(f) ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const FlowVersionRef = builder.objectRef<FlowVersion>('FlowVersion').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    flowId: t.exposeID('flowId'),
    version: t.exposeInt('version'),
    name: t.exposeString('name'),
    trigger: t.field({ type: 'JSON', resolve: (v) => v.trigger }),
    definition: t.field({ type: 'JSON', resolve: (v) => v.definition }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const FlowStepRef = builder.objectRef<FlowStep>('FlowExecutionStep').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    executionId: t.exposeID('executionId'),
    seq: t.exposeInt('seq'),
    nodeId: t.exposeString('nodeId'),
    nodeType: t.exposeString('nodeType'),
    status: t.exposeString('status'),
    input: t.field({ type: 'JSON', nullable: true, resolve: (s) => s.input }),
    output: t.field({ type: 'JSON', nullable: true, resolve: (s) => s.output }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (s) => s.error }),
    startedAt: t.expose('startedAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
    durationMs: t.exposeInt('durationMs', { nullable: true }),
  }),
});

const FlowExecutionRef = builder.node(builder.objectRef<ExecutionView>('FlowExecution'), {
  id: { resolve: (e) => e.id },
  loadOne: (id, ctx) => run(getExecutionOp, ctx, { execution_id: id }),
  fields: (t) => ({
    flowId: t.exposeID('flowId'),
    flowVersion: t.exposeInt('flowVersion'),
    status: t.field({ type: ExecutionStatusEnum, resolve: (e) => e.status }),
    triggerType: t.field({ type: TriggerTypeEnum, resolve: (e) => e.triggerType }),
    input: t.field({ type: 'JSON', resolve: (e) => e.context.input ?? {} }),
    currentNodeId: t.exposeString('currentNodeId', { nullable: true }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (e) => e.error }),
    stepsCount: t.exposeInt('stepsCount'),
    steps: t.field({
      type: [FlowStepRef], description: 'The step log, in order',
      resolve: async (e, _a, ctx) => e.steps ?? servicesOf(ctx, 'flows').flowExecutions.steps(ctx.scope, e.id),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
  }),
});

const CreateFlowInput = builder.inputType('CreateFlowInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    trigger: t.field({ type: 'JSON', required: true, description: '{ type: inbound_message | webhook | schedule | api | event, … }' }),
    definition: t.field({ type: 'JSON', required: true, description: '{ nodes, edges }' }),
  }),
});
const UpdateFlowInput = builder.inputType('UpdateFlowInput', {
  fields: (t) => ({
    name: t.string({ required: false }),
    trigger: t.field({ type: 'JSON', required: false }),
    definition: t.field({ type: 'JSON', required: false }),
    expectedVersion: t.int({ required: false, description: 'Rejected with CONFLICT when the stored version differs' }),
  }),
});

builder.queryFields((t) => ({
  flows: t.connection({
    type: FlowRef, ...guard('Query', 'flows', listFlowsOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listFlowsOp, ctx, pageRequest(args))),
  }),
  flow: t.field({
    type: FlowRef, ...guard('Query', 'flow', getFlowOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getFlowOp, ctx, { id: String(args.id) }),
  }),
  flowVersions: t.connection({
    type: FlowVersionRef, ...guard('Query', 'flowVersions', listFlowVersionsOp),
    args: { flowId: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listFlowVersionsOp, ctx, { ...pageRequest(args), id: String(args.flowId) })),
  }),
  flowVersion: t.field({
    type: FlowVersionRef, ...guard('Query', 'flowVersion', getFlowVersionOp),
    args: { flowId: t.arg.id({ required: true }), version: t.arg.int({ required: true }) },
    resolve: (_r, args, ctx) => run(getFlowVersionOp, ctx, { id: String(args.flowId), version: args.version }),
  }),
  flowExecutions: t.connection({
    type: FlowExecutionRef, ...guard('Query', 'flowExecutions', listExecutionsOp),
    args: { flowId: t.arg.id({ required: false }), status: t.arg({ type: ExecutionStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listExecutionsOp, ctx, {
      ...pageRequest(args), flow_id: args.flowId ? String(args.flowId) : undefined, status: args.status ?? undefined,
    })),
  }),
  flowExecution: t.field({
    type: FlowExecutionRef, ...guard('Query', 'flowExecution', getExecutionOp),
    args: { id: t.arg.id({ required: true }), flowId: t.arg.id({ required: false }) },
    resolve: (_r, args, ctx) => run(getExecutionOp, ctx, { id: args.flowId ? String(args.flowId) : null, execution_id: String(args.id) }),
  }),
}));

builder.mutationFields((t) => ({
  createFlow: t.field({
    type: FlowRef, ...guard('Mutation', 'createFlow', createFlowOp),
    args: { input: t.arg({ type: CreateFlowInput, required: true }) },
    resolve: (_r, args, ctx) => run(createFlowOp, ctx, { name: args.input.name, trigger: args.input.trigger, definition: args.input.definition }),
  }),
  updateFlow: t.field({
    type: FlowRef, ...guard('Mutation', 'updateFlow', updateFlowOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateFlowInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateFlowOp, ctx, {
      id: String(args.id), name: args.input.name ?? undefined, trigger: args.input.trigger ?? undefined,
      definition: args.input.definition ?? undefined, expected_version: args.input.expectedVersion,
    }),
  }),
  deleteFlow: t.id({
    ...guard('Mutation', 'deleteFlow', deleteFlowOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteFlowOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  startFlowExecution: t.field({
    type: FlowExecutionRef, ...guard('Mutation', 'startFlowExecution', startExecutionOp),
    args: { flowId: t.arg.id({ required: true }), input: t.arg({ type: 'JSON', required: false }) },
    resolve: (_r, args, ctx) => run(startExecutionOp, ctx, { id: String(args.flowId), input: args.input ?? {} }),
  }),
  cancelFlowExecution: t.field({
    type: FlowExecutionRef, ...guard('Mutation', 'cancelFlowExecution', cancelExecutionOp),
    args: { id: t.arg.id({ required: true }), flowId: t.arg.id({ required: false }) },
    resolve: (_r, args, ctx) => run(cancelExecutionOp, ctx, { id: args.flowId ? String(args.flowId) : null, execution_id: String(args.id) }),
  }),
}));

const TERMINAL = new Set(['flow.execution.completed', 'flow.execution.failed', 'flow.execution.cancelled']);

/**
 * The execution's steps so far, then each step as it is recorded (a waiting step again when it
 * completes); ends when the execution ends. The bus is subscribed before the log is read, so no
 * step falls between them.
 */
function stepStream(notices: AsyncIterableIterator<LiveNotice>, initial: () => Promise<FlowStep[]>, load: (n: LiveNotice) => Promise<FlowStep | null>): AsyncIterableIterator<FlowStep> {
  const seen = new Set<string>();
  let backlog: FlowStep[] | undefined;
  let ended = false;
  const fresh = (s: FlowStep) => {
    const key = `${s.id}:${s.status}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };
  return liveIterator(notices, async () => {
    backlog ??= (await initial()).filter(fresh);
    if (backlog.length > 0) return { value: backlog.shift()!, done: false };
    while (!ended) {
      const n = await notices.next();
      if (n.done) break;
      if (n.value.kind === 'event' && TERMINAL.has(n.value.type)) {
        ended = true;
        break;
      }
      const step = await load(n.value);
      if (step && fresh(step)) return { value: step, done: false };
    }
    await notices.return?.();
    return END;
  });
}

builder.subscriptionFields((t) => ({
  flowExecutionSteps: t.field({
    type: FlowStepRef, ...guard('Subscription', 'flowExecutionSteps', { endpoint: 'GET /v1/flows/{id}/executions/{executionId}', roles: READERS }),
    description: 'The execution\'s step log so far, then each step live as it is recorded; ends with the execution.',
    args: { executionId: t.arg.id({ required: true }) },
    subscribe: async (_r, args, ctx) => {
      const id = String(args.executionId);
      const executions = servicesOf(ctx, 'flows').flowExecutions;
      const notices = resourceNotices(ctx, id);
      try {
        const current = await executions.get(ctx.scope, null, id);
        if (current.status !== 'running' && current.status !== 'waiting') {
          // Already over: the log, then the end.
          void notices.return?.();
          return stepStream((async function* () { /* nothing live */ })(), async () => current.steps ?? [], async () => null);
        }
      } catch (e) {
        await notices.return?.();
        throw e;
      }
      return stepStream(notices, () => executions.steps(ctx.scope, id), async (n) => {
        const event = await ctx.platform.events.get(ctx.scope, n.id);
        return typeof event.data.step_id === 'string' ? executions.step(ctx.scope, event.data.step_id) : null;
      });
    },
    resolve: (s) => s,
  }),
}));
