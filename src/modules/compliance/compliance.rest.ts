/** The /v1/compliance routes (the spec's three, plus listing and getting brands and campaigns). */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import { createBrandOp, createTenDlcOp, getBrandOp, getTenDlcOp, listBrandsOp, listTenDlcOp } from './compliance.operations.ts';
import { presentBrand, presentTenDlc } from './compliance.presenters.ts';

export const complianceRoutes = [
  route({ method: 'POST', path: '/v1/compliance/brands', operation: createBrandOp, status: 201, input: (r) => r.body, output: presentBrand }),
  route({
    method: 'GET', path: '/v1/compliance/brands', operation: listBrandsOp, query: [...PAGE_QUERY, 'status'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status }), paginated: true, output: presentBrand,
  }),
  route({ method: 'GET', path: '/v1/compliance/brands/{id}', operation: getBrandOp, input: (r) => r.params, output: presentBrand, resource: 'brand' }),
  route({ method: 'POST', path: '/v1/compliance/campaigns', operation: createTenDlcOp, status: 201, input: (r) => r.body, output: presentTenDlc }),
  route({
    method: 'GET', path: '/v1/compliance/campaigns', operation: listTenDlcOp, query: [...PAGE_QUERY, 'status', 'brand_id'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status, brand_id: r.query.brand_id }), paginated: true, output: presentTenDlc,
  }),
  route({ method: 'GET', path: '/v1/compliance/campaigns/{id}', operation: getTenDlcOp, input: (r) => r.params, output: presentTenDlc, resource: 'dlc' }),
];
