/** The /v1/messages/connectors and /v1/messages/routes routes. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import {
  createConnectorOp, createRouteOp, deleteConnectorOp, deleteRouteOp, getConnectorOp, getRouteOp, listConnectorsOp, listRoutesOp, updateConnectorOp, updateRouteOp,
} from './carriers.operations.ts';
import { presentConnector, presentRoute } from './carriers.presenters.ts';

export const carrierRoutes = [
  route({ method: 'POST', path: '/v1/messages/connectors', operation: createConnectorOp, status: 201, input: (r) => r.body, output: presentConnector, errors: ['FORBIDDEN', 'ALREADY_EXISTS'] }),
  route({ method: 'GET', path: '/v1/messages/connectors', operation: listConnectorsOp, query: [...PAGE_QUERY], input: (r) => pageQuery(r.query), paginated: true, output: presentConnector }),
  route({ method: 'GET', path: '/v1/messages/connectors/{id}', operation: getConnectorOp, input: (r) => r.params, output: presentConnector, resource: 'conn' }),
  route({ method: 'PATCH', path: '/v1/messages/connectors/{id}', operation: updateConnectorOp, input: (r) => ({ ...r.body, id: r.params.id }), output: presentConnector, resource: 'conn', errors: ['ALREADY_EXISTS'] }),
  route({ method: 'DELETE', path: '/v1/messages/connectors/{id}', operation: deleteConnectorOp, status: 204, input: (r) => r.params, resource: 'conn', errors: ['CONFLICT'] }),

  route({ method: 'POST', path: '/v1/messages/routes', operation: createRouteOp, status: 201, input: (r) => r.body, output: presentRoute, errors: ['FORBIDDEN'] }),
  route({ method: 'GET', path: '/v1/messages/routes', operation: listRoutesOp, query: [...PAGE_QUERY], input: (r) => pageQuery(r.query), paginated: true, output: presentRoute }),
  route({ method: 'GET', path: '/v1/messages/routes/{id}', operation: getRouteOp, input: (r) => r.params, output: presentRoute, resource: 'route' }),
  route({ method: 'PATCH', path: '/v1/messages/routes/{id}', operation: updateRouteOp, input: (r) => ({ ...r.body, id: r.params.id }), output: presentRoute, resource: 'route' }),
  route({ method: 'DELETE', path: '/v1/messages/routes/{id}', operation: deleteRouteOp, status: 204, input: (r) => r.params, resource: 'route' }),
];
