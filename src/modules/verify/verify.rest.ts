/** The /v1/verify routes and the test-mode sandbox route that reads a sent code back. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import {
  checkVerificationOp, getVerificationOp, getVerifySettingsOp, listVerificationsOp, sandboxVerificationCodeOp, sendVerificationOp, updateVerifySettingsOp,
} from './verify.operations.ts';
import { presentSandboxCode, presentVerification, presentVerifySettings } from './verify.presenters.ts';

const body = (r: { body: Record<string, unknown> }) => r.body;

export const verifyRoutes = [
  route({ method: 'POST', path: '/v1/verify/send', operation: sendVerificationOp, status: 201, input: body, output: presentVerification }),
  route({ method: 'POST', path: '/v1/verify/check', operation: checkVerificationOp, input: body, output: presentVerification }),
  route({
    method: 'GET', path: '/v1/verify', operation: listVerificationsOp, query: [...PAGE_QUERY, 'status', 'channel', 'to'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status, channel: r.query.channel, to: r.query.to }),
    paginated: true, output: presentVerification,
  }),
  route({ method: 'GET', path: '/v1/verify/settings', operation: getVerifySettingsOp, output: presentVerifySettings }),
  route({ method: 'PUT', path: '/v1/verify/settings', operation: updateVerifySettingsOp, input: body, output: presentVerifySettings }),
  route({ method: 'GET', path: '/v1/verify/{id}', operation: getVerificationOp, input: (r) => r.params, output: presentVerification, resource: 'ver' }),
  route({ method: 'GET', path: '/v1/sandbox/verify/{id}/code', operation: sandboxVerificationCodeOp, input: (r) => r.params, output: presentSandboxCode, resource: 'ver' }),
];
