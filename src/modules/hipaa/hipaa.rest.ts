/** The /v1/settings/hipaa routes. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import { getHipaaOp, listPhiAccessLogOp, updateBaaOp, updateHipaaOp } from './hipaa.operations.ts';
import { presentHipaa, presentPhiAccess } from './hipaa.presenters.ts';

const body = (r: { body: Record<string, unknown> }) => r.body;

export const hipaaRoutes = [
  route({ method: 'GET', path: '/v1/settings/hipaa', operation: getHipaaOp, output: presentHipaa }),
  route({ method: 'PUT', path: '/v1/settings/hipaa', operation: updateHipaaOp, input: body, output: presentHipaa }),
  route({ method: 'PUT', path: '/v1/settings/hipaa/baa', operation: updateBaaOp, input: body, output: presentHipaa }),
  route({
    method: 'GET', path: '/v1/settings/hipaa/phi-access-log', operation: listPhiAccessLogOp, query: PAGE_QUERY,
    input: (r) => pageQuery(r.query), paginated: true, output: presentPhiAccess,
  }),
];
