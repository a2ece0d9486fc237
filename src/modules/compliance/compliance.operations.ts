/** The compliance (10DLC) use cases as operations. Registrations are admin work: builders register, readers read. */
import { operationsOf } from '../../context.ts';
import { BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import type { ComplianceService } from './compliance.service.ts';
import { createBrandInput, createTenDlcInput, listBrandsInput, listTenDlcInput } from './compliance.schemas.ts';

export type ComplianceServices = { compliance: ComplianceService };
const op = operationsOf<ComplianceServices>('compliance');

export const createBrandOp = op({
  name: 'compliance.createBrand', endpoint: 'POST /v1/compliance/brands', roles: BUILDERS, input: createBrandInput,
  run: (ctx, input, s) => s.compliance.createBrand(ctx.scope, input),
});
export const listBrandsOp = op({
  name: 'compliance.listBrands', endpoint: 'GET /v1/compliance/brands', roles: READERS, input: listBrandsInput,
  run: (ctx, input, s) => s.compliance.listBrands(ctx.scope, input),
});
export const getBrandOp = op({
  name: 'compliance.getBrand', endpoint: 'GET /v1/compliance/brands/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.compliance.getBrand(ctx.scope, input.id),
});
export const createTenDlcOp = op({
  name: 'compliance.createCampaign', endpoint: 'POST /v1/compliance/campaigns', roles: BUILDERS, input: createTenDlcInput,
  run: (ctx, input, s) => s.compliance.createCampaign(ctx.scope, input),
});
export const listTenDlcOp = op({
  name: 'compliance.listCampaigns', endpoint: 'GET /v1/compliance/campaigns', roles: READERS, input: listTenDlcInput,
  run: (ctx, input, s) => s.compliance.listCampaigns(ctx.scope, input),
});
export const getTenDlcOp = op({
  name: 'compliance.getCampaign', endpoint: 'GET /v1/compliance/campaigns/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.compliance.getCampaign(ctx.scope, input.id),
});
