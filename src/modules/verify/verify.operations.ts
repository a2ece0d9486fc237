/** The verify use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import type { VerifyService } from './verify.service.ts';
import { ADMINS, BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import { checkVerificationInput, listVerificationsInput, sendVerificationInput, updateVerifySettingsInput } from './verify.schemas.ts';

/** The services this module's operations run on. */
export type VerifyServices = { verify: VerifyService };
const op = operationsOf<VerifyServices>('verify');

export const sendVerificationOp = op({
  name: 'verify.send', endpoint: 'POST /v1/verify/send', roles: BUILDERS, input: sendVerificationInput,
  run: (ctx, input, s) => s.verify.send(ctx.scope, input),
});
export const checkVerificationOp = op({
  name: 'verify.check', endpoint: 'POST /v1/verify/check', roles: BUILDERS, input: checkVerificationInput,
  run: (ctx, input, s) => s.verify.check(ctx.scope, input),
});
export const listVerificationsOp = op({
  name: 'verify.list', endpoint: 'GET /v1/verify', roles: READERS, input: listVerificationsInput,
  run: (ctx, input, s) => s.verify.listVerifications(ctx.scope, input),
});
export const getVerificationOp = op({
  name: 'verify.get', endpoint: 'GET /v1/verify/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.verify.getVerification(ctx.scope, input.id),
});
export const getVerifySettingsOp = op({
  name: 'verify.getSettings', endpoint: 'GET /v1/verify/settings', roles: READERS, input: z.object({}),
  run: (ctx, _input, s) => s.verify.getSettings(ctx.scope),
});
export const updateVerifySettingsOp = op({
  name: 'verify.updateSettings', endpoint: 'PUT /v1/verify/settings', roles: ADMINS, input: updateVerifySettingsInput,
  run: (ctx, input, s) => s.verify.updateSettings(ctx.scope, input),
});
/** Test mode only: reveals a code, so builders only (viewers read verifications, never codes). */
export const sandboxVerificationCodeOp = op({
  name: 'verify.sandboxCode', endpoint: 'GET /v1/sandbox/verify/{id}/code', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.verify.sandboxCode(ctx.scope, input.id),
});
