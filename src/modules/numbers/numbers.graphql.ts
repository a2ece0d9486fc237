/** GraphQL twins of the numbers routes; inputs are converted to the REST wire shape and run through the same operations. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { patchWire, toWire } from '../../graphql/wire.ts';
import { NUMBER_CAPABILITIES, NUMBER_TYPES, type AvailableNumber } from '../../providers/numbers/types.ts';
import { PORT_STATUSES, type PhoneNumber, type PortRequest } from './numbers.entities.ts';
import {
  buyNumberOp, createPortOp, getNumberOp, getPortOp, listNumbersOp, listPortsOp, releaseNumberOp, searchNumbersOp, updateNumberOp,
} from './numbers.operations.ts';
import { moneyString } from './numbers.presenters.ts';

const NumberTypeEnum = builder.enumType('NumberType', { values: NUMBER_TYPES });
const NumberCapabilityEnum = builder.enumType('NumberCapability', { values: NUMBER_CAPABILITIES });
const PortStatusEnum = builder.enumType('PortRequestStatus', { values: PORT_STATUSES });

const AvailableNumberRef = builder.objectRef<AvailableNumber>('AvailableNumber').implement({
  fields: (t) => ({
    number: t.exposeString('number', { description: 'E.164' }),
    friendlyName: t.exposeString('friendlyName'),
    country: t.exposeString('country'),
    type: t.field({ type: NumberTypeEnum, resolve: (n) => n.type }),
    region: t.exposeString('region'),
    capabilities: t.field({ type: [NumberCapabilityEnum], resolve: (n) => n.capabilities }),
    monthlyCost: t.exposeString('monthlyCost', { description: 'Decimal amount in major units' }),
    currency: t.exposeString('currency'),
  }),
});

const PhoneNumberRef = builder.node(builder.objectRef<PhoneNumber>('PhoneNumber'), {
  id: { resolve: (n) => n.id },
  loadOne: (id, ctx) => run(getNumberOp, ctx, { id }),
  fields: (t) => ({
    number: t.exposeString('number', { description: 'E.164' }),
    country: t.exposeString('country'),
    type: t.field({ type: NumberTypeEnum, resolve: (n) => n.type }),
    region: t.exposeString('region'),
    friendlyName: t.exposeString('friendlyName'),
    capabilities: t.field({ type: [NumberCapabilityEnum], resolve: (n) => n.capabilities }),
    status: t.exposeString('status'),
    smsWebhookUrl: t.string({ nullable: true, resolve: (n) => n.smsWebhookUrl ?? null }),
    voiceWebhookUrl: t.string({ nullable: true, resolve: (n) => n.voiceWebhookUrl ?? null }),
    agentId: t.string({ nullable: true, resolve: (n) => n.agentId ?? null }),
    voiceRoute: t.field({ type: 'JSON', nullable: true, description: 'Where inbound calls go: { type: ivr, ivr_id } | { type: voicemail, voicemail_id } | { type: forward, to } (REST keys)', resolve: (n) => n.voiceRoute ?? null }),
    monthlyCost: t.string({ resolve: (n) => moneyString(n.monthlyCost) }),
    currency: t.exposeString('currency'),
    source: t.exposeString('source', { description: 'purchased or ported' }),
    portRequestId: t.string({ nullable: true, resolve: (n) => n.portRequestId ?? null }),
    billingPeriodStart: t.field({ type: 'DateTime', nullable: true, resolve: (n) => n.billingPeriodStart ?? null }),
    billingPeriodEnd: t.field({ type: 'DateTime', nullable: true, resolve: (n) => n.billingPeriodEnd ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const PortRequestRef = builder.node(builder.objectRef<PortRequest>('PortRequest'), {
  id: { resolve: (p) => p.id },
  loadOne: (id, ctx) => run(getPortOp, ctx, { id }),
  fields: (t) => ({
    numbers: t.exposeStringList('numbers'),
    status: t.field({ type: PortStatusEnum, resolve: (p) => p.status }),
    currentCarrier: t.exposeString('currentCarrier'),
    authorizationName: t.exposeString('authorizationName'),
    estimatedCompletion: t.expose('estimatedCompletion', { type: 'DateTime' }),
    phoneNumberIds: t.stringList({ nullable: true, description: 'Set once the port completes', resolve: (p) => (p.status === 'completed' ? p.phoneNumberIds : null) }),
    errorCode: t.string({ nullable: true, description: 'PORT_REQUEST_FAILED when rejected', resolve: (p) => (p.status === 'rejected' ? 'PORT_REQUEST_FAILED' : null) }),
    rejectionCode: t.string({ nullable: true, resolve: (p) => p.rejectionCode ?? null }),
    rejectionReason: t.string({ nullable: true, resolve: (p) => p.rejectionReason ?? null }),
    submittedAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.submittedAt ?? null }),
    completedAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.completedAt ?? null }),
    rejectedAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.rejectedAt ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const BuyNumberInput = builder.inputType('BuyNumberInput', {
  fields: (t) => ({
    number: t.string({ required: true, description: 'E.164, from availableNumbers' }),
    friendlyName: t.string({ required: false }),
    smsWebhookUrl: t.string({ required: false }),
    voiceWebhookUrl: t.string({ required: false }),
    agentId: t.string({ required: false }),
  }),
});

const UpdateNumberInput = builder.inputType('UpdateNumberInput', {
  description: 'An omitted field is left as it is; null removes it.',
  fields: (t) => ({
    friendlyName: t.string({ required: false }),
    smsWebhookUrl: t.string({ required: false }),
    voiceWebhookUrl: t.string({ required: false }),
    agentId: t.string({ required: false }),
    voiceRoute: t.field({ type: 'JSON', required: false, description: 'Where inbound calls go: { type: ivr, ivr_id } | { type: voicemail, voicemail_id } | { type: forward, to } (REST keys); null removes it' }),
  }),
});

const CreatePortRequestInput = builder.inputType('CreatePortRequestInput', {
  fields: (t) => ({
    numbers: t.stringList({ required: true, description: 'E.164 numbers to port in' }),
    currentCarrier: t.string({ required: true }),
    authorizationName: t.string({ required: true }),
    accountNumber: t.string({ required: false }),
    pin: t.string({ required: false }),
  }),
});


builder.queryFields((t) => ({
  availableNumbers: t.field({
    type: [AvailableNumberRef], ...guard('Query', 'availableNumbers', searchNumbersOp),
    description: 'Numbers for sale (test mode: the sandbox inventory), stable for a given query.',
    args: {
      country: t.arg.string({ required: true, description: 'ISO 3166-1 alpha-2' }),
      type: t.arg({ type: NumberTypeEnum, required: false }),
      capabilities: t.arg({ type: [NumberCapabilityEnum], required: false, description: 'Every listed capability is required' }),
      areaCode: t.arg.string({ required: false }),
      contains: t.arg.string({ required: false, description: 'Digits (or keypad letters) and * for any one digit' }),
      limit: t.arg.int({ required: false, description: '1-100, default 20' }),
    },
    resolve: (_r, args, ctx) => run(searchNumbersOp, ctx, toWire(args)),
  }),
  phoneNumbers: t.connection({
    type: PhoneNumberRef, ...guard('Query', 'phoneNumbers', listNumbersOp),
    args: { country: t.arg.string({ required: false }), capabilities: t.arg({ type: [NumberCapabilityEnum], required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listNumbersOp, ctx, { ...pageRequest(args), country: args.country, capabilities: args.capabilities })),
  }),
  phoneNumber: t.field({
    type: PhoneNumberRef, ...guard('Query', 'phoneNumber', getNumberOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getNumberOp, ctx, { id: String(args.id) }),
  }),
  portRequests: t.connection({
    type: PortRequestRef, ...guard('Query', 'portRequests', listPortsOp),
    args: { status: t.arg({ type: PortStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listPortsOp, ctx, { ...pageRequest(args), status: args.status })),
  }),
  portRequest: t.field({
    type: PortRequestRef, ...guard('Query', 'portRequest', getPortOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getPortOp, ctx, { id: String(args.id) }),
  }),
}));

builder.mutationFields((t) => ({
  buyNumber: t.field({
    type: PhoneNumberRef, ...guard('Mutation', 'buyNumber', buyNumberOp),
    args: { input: t.arg({ type: BuyNumberInput, required: true }) },
    resolve: (_r, args, ctx) => run(buyNumberOp, ctx, toWire(args.input)),
  }),
  updateNumber: t.field({
    type: PhoneNumberRef, ...guard('Mutation', 'updateNumber', updateNumberOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateNumberInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateNumberOp, ctx, { ...patchWire(args.input), id: String(args.id) }),
  }),
  releaseNumber: t.id({
    ...guard('Mutation', 'releaseNumber', releaseNumberOp),
    description: 'Releases the number at once (billing runs to the end of the cycle); returns its id.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(releaseNumberOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  createPortRequest: t.field({
    type: PortRequestRef, ...guard('Mutation', 'createPortRequest', createPortOp),
    args: { input: t.arg({ type: CreatePortRequestInput, required: true }) },
    resolve: (_r, args, ctx) => run(createPortOp, ctx, toWire(args.input)),
  }),
}));
