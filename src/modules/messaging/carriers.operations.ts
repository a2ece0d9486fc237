/** Connector and route operations (docs/messaging.md, "Carriers"), shared by REST and GraphQL. */
import { operationsOf } from '../../context.ts';
import { ADMINS, READERS } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import type { CarriersService } from './carriers.service.ts';
import { createConnectorInput, createRouteInput, listCarriersInput, updateConnectorInput, updateRouteInput } from './carriers.schemas.ts';

const op = operationsOf<{ carriers: CarriersService }>('messaging');

export const createConnectorOp = op({
  name: 'messaging.createConnector', endpoint: 'POST /v1/messages/connectors', roles: ADMINS, input: createConnectorInput,
  run: (ctx, input, s) => s.carriers.createConnector(ctx.scope, input),
});
export const listConnectorsOp = op({
  name: 'messaging.listConnectors', endpoint: 'GET /v1/messages/connectors', roles: READERS, input: listCarriersInput,
  run: (ctx, input, s) => s.carriers.listConnectors(ctx.scope, input),
});
export const getConnectorOp = op({
  name: 'messaging.getConnector', endpoint: 'GET /v1/messages/connectors/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.carriers.getConnector(ctx.scope, input.id),
});
export const updateConnectorOp = op({
  name: 'messaging.updateConnector', endpoint: 'PATCH /v1/messages/connectors/{id}', roles: ADMINS, input: updateConnectorInput,
  run: (ctx, input, s) => s.carriers.updateConnector(ctx.scope, input),
});
export const deleteConnectorOp = op({
  name: 'messaging.deleteConnector', endpoint: 'DELETE /v1/messages/connectors/{id}', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.carriers.removeConnector(ctx.scope, input.id),
});

export const createRouteOp = op({
  name: 'messaging.createRoute', endpoint: 'POST /v1/messages/routes', roles: ADMINS, input: createRouteInput,
  run: (ctx, input, s) => s.carriers.createRoute(ctx.scope, input),
});
export const listRoutesOp = op({
  name: 'messaging.listRoutes', endpoint: 'GET /v1/messages/routes', roles: READERS, input: listCarriersInput,
  run: (ctx, input, s) => s.carriers.listRoutes(ctx.scope, input),
});
export const getRouteOp = op({
  name: 'messaging.getRoute', endpoint: 'GET /v1/messages/routes/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.carriers.getRoute(ctx.scope, input.id),
});
export const updateRouteOp = op({
  name: 'messaging.updateRoute', endpoint: 'PATCH /v1/messages/routes/{id}', roles: ADMINS, input: updateRouteInput,
  run: (ctx, input, s) => s.carriers.updateRoute(ctx.scope, input),
});
export const deleteRouteOp = op({
  name: 'messaging.deleteRoute', endpoint: 'DELETE /v1/messages/routes/{id}', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.carriers.removeRoute(ctx.scope, input.id),
});
