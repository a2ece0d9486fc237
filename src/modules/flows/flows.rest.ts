/** The /v1/flows routes. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import { badRequest } from '../../platform/errors.ts';
import {
  cancelExecutionOp, createFlowOp, deleteFlowOp, getExecutionOp, getFlowOp, getFlowVersionOp, listExecutionsOp, listFlowsOp, listFlowVersionsOp,
  startExecutionOp, updateFlowOp,
} from './flows.operations.ts';
import { presentExecution, presentFlow, presentFlowVersion } from './flows.presenters.ts';

const body = (r: { body: Record<string, unknown> }) => r.body;
const versionParam = (v: string | undefined) => {
  if (!v || !/^\d{1,9}$/.test(v)) throw badRequest('version must be a positive integer', { field: 'version', value: v });
  return Number(v);
};

export const flowRoutes = [
  route({ method: 'POST', path: '/v1/flows', operation: createFlowOp, status: 201, input: body, output: presentFlow }),
  route({ method: 'GET', path: '/v1/flows', operation: listFlowsOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentFlow }),
  route({
    method: 'GET', path: '/v1/flows/executions', operation: listExecutionsOp, query: [...PAGE_QUERY, 'flow_id', 'status'],
    input: (r) => ({ ...pageQuery(r.query), flow_id: r.query.flow_id, status: r.query.status }), paginated: true, output: presentExecution,
  }),
  route({ method: 'GET', path: '/v1/flows/{id}', operation: getFlowOp, input: (r) => r.params, output: presentFlow, resource: 'flw' }),
  route({ method: 'PUT', path: '/v1/flows/{id}', operation: updateFlowOp, input: (r) => ({ ...r.body, id: r.params.id }), output: presentFlow, resource: 'flw' }),
  route({ method: 'DELETE', path: '/v1/flows/{id}', operation: deleteFlowOp, input: (r) => r.params, status: 204, resource: 'flw' }),
  route({
    method: 'GET', path: '/v1/flows/{id}/versions', operation: listFlowVersionsOp, query: PAGE_QUERY,
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id }), paginated: true, output: presentFlowVersion, resource: 'flw',
  }),
  route({
    method: 'GET', path: '/v1/flows/{id}/versions/{version}', operation: getFlowVersionOp,
    input: (r) => ({ id: r.params.id, version: versionParam(r.params.version) }), output: presentFlowVersion, resource: 'flw+version',
  }),
  route({
    method: 'POST', path: '/v1/flows/{id}/executions', operation: startExecutionOp, status: 201,
    input: (r) => ({ id: r.params.id, input: r.body.input ?? {} }), output: presentExecution, resource: 'flw',
  }),
  route({
    method: 'GET', path: '/v1/flows/{id}/executions/{executionId}', operation: getExecutionOp,
    input: (r) => ({ id: r.params.id, execution_id: r.params.executionId }), output: presentExecution, resource: 'flw+fex',
  }),
  route({
    method: 'POST', path: '/v1/flows/{id}/executions/{executionId}/cancel', operation: cancelExecutionOp,
    input: (r) => ({ id: r.params.id, execution_id: r.params.executionId }), output: presentExecution, resource: 'flw+fex',
  }),
];
