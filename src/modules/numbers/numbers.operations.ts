/**
 * The numbers use cases as operations: roles, rate-limit endpoint and input schema, declared once.
 * Reads (including search) are for READERS; buying, configuring and releasing for BUILDERS (the
 * developers who provision numbers for their apps); porting for ADMINS, because it signs a letter
 * of authorization on behalf of the business.
 */
import { LIMITS, limitsRow } from '../../platform/ratelimit/plans.ts';
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import type { NumbersService } from './numbers.service.ts';
import { ADMINS, BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import { buyNumberInput, createPortInput, listNumbersInput, listPortsInput, searchNumbersInput, updateNumberInput } from './numbers.schemas.ts';

/** The services this module's operations run on. */
export type NumbersServices = { numbers: NumbersService };
const op = operationsOf<NumbersServices>('numbers');

export const searchNumbersOp = op({
  name: 'numbers.search', endpoint: 'GET /v1/numbers/available', limits: limitsRow(30, 120, 300, 600), roles: READERS, input: searchNumbersInput,
  run: (ctx, input, s) => s.numbers.search(ctx.scope, input),
});
export const buyNumberOp = op({
  name: 'numbers.buy', endpoint: 'POST /v1/numbers', limits: LIMITS.fewWrites, roles: BUILDERS, input: buyNumberInput,
  run: (ctx, input, s) => s.numbers.buy(ctx.scope, input),
});
export const listNumbersOp = op({
  name: 'numbers.list', endpoint: 'GET /v1/numbers', limits: LIMITS.read, roles: READERS, input: listNumbersInput,
  run: (ctx, input, s) => s.numbers.list(ctx.scope, input),
});
export const getNumberOp = op({
  name: 'numbers.get', endpoint: 'GET /v1/numbers/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.numbers.get(ctx.scope, input.id),
});
export const updateNumberOp = op({
  name: 'numbers.update', endpoint: 'PATCH /v1/numbers/{id}', roles: BUILDERS, input: z.intersection(idInput, updateNumberInput),
  run: (ctx, { id, ...patch }, s) => s.numbers.update(ctx.scope, id, patch),
});
export const releaseNumberOp = op({
  name: 'numbers.release', endpoint: 'DELETE /v1/numbers/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.numbers.release(ctx.scope, input.id),
});
export const createPortOp = op({
  name: 'numbers.createPort', endpoint: 'POST /v1/numbers/port', roles: ADMINS, input: createPortInput,
  run: (ctx, input, s) => s.numbers.createPort(ctx.scope, input),
});
export const listPortsOp = op({
  name: 'numbers.listPorts', endpoint: 'GET /v1/numbers/port', roles: READERS, input: listPortsInput,
  run: (ctx, input, s) => s.numbers.listPorts(ctx.scope, input),
});
export const getPortOp = op({
  name: 'numbers.getPort', endpoint: 'GET /v1/numbers/port/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.numbers.getPort(ctx.scope, input.id),
});
