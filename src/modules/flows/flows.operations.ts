/** The flows use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { operationsOf } from '../../context.ts';
import { BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import type { FlowsService } from './flows.service.ts';
import type { ExecutionsService } from './executions.service.ts';
import {
  createFlowInput, executionInput, flowVersionInput, listExecutionsInput, listFlowVersionsInput, startExecutionInput, updateFlowInput,
} from './flows.schemas.ts';

export type FlowsServices = { flows: FlowsService; flowExecutions: ExecutionsService };
const op = operationsOf<FlowsServices>('flows');

export const createFlowOp = op({
  name: 'flows.create', endpoint: 'POST /v1/flows', roles: BUILDERS, input: createFlowInput,
  run: (ctx, input, s) => s.flows.create(ctx.scope, input),
});
export const listFlowsOp = op({
  name: 'flows.list', endpoint: 'GET /v1/flows', roles: READERS, input: pageInput,
  run: (ctx, input, s) => s.flows.list(ctx.scope, input),
});
export const getFlowOp = op({
  name: 'flows.get', endpoint: 'GET /v1/flows/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.flows.get(ctx.scope, input.id),
});
export const updateFlowOp = op({
  name: 'flows.update', endpoint: 'PUT /v1/flows/{id}', roles: BUILDERS, input: updateFlowInput,
  run: (ctx, input, s) => s.flows.update(ctx.scope, input),
});
export const deleteFlowOp = op({
  name: 'flows.delete', endpoint: 'DELETE /v1/flows/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.flows.remove(ctx.scope, input.id),
});
export const listFlowVersionsOp = op({
  name: 'flows.listVersions', endpoint: 'GET /v1/flows/{id}/versions', roles: READERS, input: listFlowVersionsInput,
  run: (ctx, input, s) => s.flows.listVersions(ctx.scope, input),
});
export const getFlowVersionOp = op({
  name: 'flows.getVersion', endpoint: 'GET /v1/flows/{id}/versions/{version}', roles: READERS, input: flowVersionInput,
  run: (ctx, input, s) => s.flows.getVersion(ctx.scope, input.id, input.version),
});
export const listExecutionsOp = op({
  name: 'flows.listExecutions', endpoint: 'GET /v1/flows/executions', roles: READERS, input: listExecutionsInput,
  run: (ctx, input, s) => s.flowExecutions.list(ctx.scope, input),
});
export const startExecutionOp = op({
  name: 'flows.startExecution', endpoint: 'POST /v1/flows/{id}/executions', roles: BUILDERS, input: startExecutionInput,
  run: (ctx, input, s) => s.flowExecutions.startApi(ctx.scope, input.id, input.input ?? {}),
});
export const getExecutionOp = op({
  name: 'flows.getExecution', endpoint: 'GET /v1/flows/{id}/executions/{executionId}', roles: READERS, input: executionInput,
  run: (ctx, input, s) => s.flowExecutions.get(ctx.scope, input.id ?? null, input.execution_id),
});
export const cancelExecutionOp = op({
  name: 'flows.cancelExecution', endpoint: 'POST /v1/flows/{id}/executions/{executionId}/cancel', roles: BUILDERS, input: executionInput,
  run: (ctx, input, s) => s.flowExecutions.cancel(ctx.scope, input.id ?? null, input.execution_id),
});
