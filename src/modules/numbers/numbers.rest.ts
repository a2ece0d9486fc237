/** The /v1/numbers routes. Static paths (`available`, `port`) win over `{id}` in the router. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import type { AvailableNumber } from '../../providers/numbers/types.ts';
import {
  buyNumberOp, createPortOp, getNumberOp, getPortOp, listNumbersOp, listPortsOp, releaseNumberOp, searchNumbersOp, updateNumberOp,
} from './numbers.operations.ts';
import { presentAvailableNumber, presentPhoneNumber, presentPortRequest } from './numbers.presenters.ts';

export const numberRoutes = [
  route({
    method: 'GET', path: '/v1/numbers/available', operation: searchNumbersOp, query: ['country', 'type', 'capabilities', 'area_code', 'contains', 'limit'],
    input: (r) => ({ ...r.query, limit: pageQuery(r.query).limit }),
    output: (rows: AvailableNumber[]) => rows.map(presentAvailableNumber),
  }),
  route({ method: 'POST', path: '/v1/numbers', operation: buyNumberOp, status: 201, input: (r) => r.body, output: presentPhoneNumber }),
  route({
    method: 'GET', path: '/v1/numbers', operation: listNumbersOp, query: [...PAGE_QUERY, 'country', 'capabilities'],
    input: (r) => ({ ...pageQuery(r.query), country: r.query.country, capabilities: r.query.capabilities }), paginated: true, output: presentPhoneNumber,
  }),
  route({ method: 'POST', path: '/v1/numbers/port', operation: createPortOp, status: 201, input: (r) => r.body, output: presentPortRequest }),
  route({
    method: 'GET', path: '/v1/numbers/port', operation: listPortsOp, query: [...PAGE_QUERY, 'status'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status }), paginated: true, output: presentPortRequest,
  }),
  route({ method: 'GET', path: '/v1/numbers/port/{id}', operation: getPortOp, input: (r) => r.params, output: presentPortRequest, resource: 'port' }),
  route({ method: 'GET', path: '/v1/numbers/{id}', operation: getNumberOp, input: (r) => r.params, output: presentPhoneNumber, resource: 'num' }),
  route({ method: 'PATCH', path: '/v1/numbers/{id}', operation: updateNumberOp, input: (r) => ({ ...r.body, id: r.params.id }), output: presentPhoneNumber, resource: 'num' }),
  route({ method: 'DELETE', path: '/v1/numbers/{id}', operation: releaseNumberOp, status: 204, input: (r) => r.params, resource: 'num' }),
];
