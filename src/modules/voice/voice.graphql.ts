/** GraphQL twins of the voice routes, run through the same operations, and the live `callUpdated` subscription. */
import { builder } from '../../graphql/builder.ts';
import { liveStream, resourceNotices } from '../../graphql/live.ts';
import type { LiveNotice } from '../../platform/events/bus.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { patchWire, toWire } from '../../graphql/wire.ts';
import type { Conference, ConferenceParticipant, IvrFlow, SipTrunk, VoicemailBox } from './voice.entities.ts';
import type { CallView } from './calls/lifecycle.ts';
import type { VoicemailMessageView } from './voicemail/voicemail.service.ts';
import { CALL_STATUSES, countOptions, type CallStep } from './voice.states.ts';
import { CODECS, ENCRYPTIONS } from './voice.schemas.ts';
import * as ops from './voice.operations.ts';

const CallStatusEnum = builder.enumType('CallStatus', { values: CALL_STATUSES });
const EncryptionEnum = builder.enumType('SipEncryption', { values: ENCRYPTIONS });
const CodecEnum = builder.enumType('SipCodec', { values: CODECS });
const FallbackEnum = builder.enumType('IvrFallbackAction', { values: ['voicemail', 'transfer_number', 'hangup'] as const });

const CallStepRef = builder.objectRef<CallStep>('CallStep').implement({
  fields: (t) => ({
    at: t.field({ type: 'DateTime', resolve: (s) => new Date(s.at) }),
    type: t.exposeString('type'),
    detail: t.field({ type: 'JSON', nullable: true, resolve: (s) => s.detail ?? null }),
  }),
});

export const CallRef = builder.node(builder.objectRef<CallView>('Call'), {
  id: { resolve: (c) => c.id },
  loadOne: (id, ctx) => run(ops.getCallOp, ctx, { id }),
  fields: (t) => ({
    to: t.exposeString('to'),
    from: t.exposeString('from'),
    direction: t.exposeString('direction'),
    status: t.field({ type: CallStatusEnum, resolve: (c) => c.status }),
    agentId: t.exposeString('agentId', { nullable: true }),
    ivrId: t.exposeString('ivrId', { nullable: true }),
    conferenceId: t.exposeString('conferenceId', { nullable: true }),
    record: t.exposeBoolean('record'),
    maxDuration: t.exposeInt('maxDuration'),
    webhookUrl: t.exposeString('webhookUrl', { nullable: true }),
    metadata: t.expose('metadata', { type: 'JSON' }),
    durationSeconds: t.exposeInt('durationSeconds', { nullable: true }),
    recordingUrl: t.exposeString('recordingUrl', { nullable: true, description: 'Signed, expiring link to the audio (authenticate to fetch it)' }),
    price: t.int({
      nullable: true, description: 'What the ledger charged for the call (minutes past the included ones), in the smallest currency unit (cents); null until charged and for calls never charged',
      resolve: (c) => c.charge?.amount ?? null,
    }),
    priceUnit: t.string({ nullable: true, description: 'Currency code of price (usd); null with it', resolve: (c) => c.charge?.currency ?? null }),
    errorCode: t.exposeString('errorCode', { nullable: true }),
    sipCode: t.exposeInt('sipCode', { nullable: true }),
    endReason: t.exposeString('endReason', { nullable: true }),
    steps: t.field({ type: [CallStepRef], resolve: (c) => c.steps }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    ringingAt: t.expose('ringingAt', { type: 'DateTime', nullable: true }),
    answeredAt: t.expose('answeredAt', { type: 'DateTime', nullable: true }),
    endedAt: t.expose('endedAt', { type: 'DateTime', nullable: true }),
  }),
});

const SipTrunkRef = builder.node(builder.objectRef<SipTrunk>('SipTrunk'), {
  id: { resolve: (x) => x.id },
  loadOne: (id, ctx) => run(ops.getTrunkOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    terminationUri: t.exposeString('terminationUri'),
    originationUris: t.exposeStringList('originationUris'),
    authUsername: t.exposeString('authUsername', { nullable: true }),
    hasAuthPassword: t.boolean({ resolve: (x) => x.authPasswordSealed != null }),
    codecs: t.exposeStringList('codecs'),
    encryption: t.field({ type: EncryptionEnum, resolve: (x) => x.encryption }),
    status: t.exposeString('status'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const IvrFlowRef = builder.node(builder.objectRef<IvrFlow>('IvrFlow'), {
  id: { resolve: (x) => x.id },
  loadOne: (id, ctx) => run(ops.getIvrOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    greeting: t.exposeString('greeting'),
    language: t.exposeString('language'),
    menu: t.expose('menu', { type: 'JSON' }),
    optionsCount: t.int({ resolve: (x) => countOptions(x.menu) }),
    timeoutSeconds: t.exposeInt('timeoutSeconds'),
    maxRetries: t.exposeInt('maxRetries'),
    fallbackAction: t.field({ type: FallbackEnum, resolve: (x) => x.fallbackAction }),
    fallbackTarget: t.exposeString('fallbackTarget', { nullable: true }),
    status: t.exposeString('status'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const ConferenceRef = builder.node(builder.objectRef<Conference>('Conference'), {
  id: { resolve: (x) => x.id },
  loadOne: (id, ctx) => run(ops.getConferenceOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    status: t.exposeString('status'),
    pin: t.exposeString('pin'),
    dialInNumber: t.exposeString('dialInNumber'),
    maxParticipants: t.exposeInt('maxParticipants'),
    record: t.exposeBoolean('record'),
    muteOnJoin: t.exposeBoolean('muteOnJoin'),
    webhookUrl: t.exposeString('webhookUrl', { nullable: true }),
    participantsCount: t.exposeInt('participantsCount'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    startedAt: t.expose('startedAt', { type: 'DateTime', nullable: true }),
    endedAt: t.expose('endedAt', { type: 'DateTime', nullable: true }),
  }),
});

const ParticipantRef = builder.objectRef<ConferenceParticipant>('ConferenceParticipant').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    conferenceId: t.exposeString('conferenceId'),
    number: t.exposeString('number'),
    muted: t.exposeBoolean('muted'),
    status: t.exposeString('status'),
    callId: t.exposeString('callId'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    joinedAt: t.expose('joinedAt', { type: 'DateTime', nullable: true }),
    leftAt: t.expose('leftAt', { type: 'DateTime', nullable: true }),
  }),
});

const VoicemailBoxRef = builder.node(builder.objectRef<VoicemailBox>('VoicemailBox'), {
  id: { resolve: (x) => x.id },
  loadOne: (id, ctx) => run(ops.getVoicemailOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    greeting: t.exposeString('greeting', { nullable: true }),
    transcribe: t.exposeBoolean('transcribe'),
    maxDuration: t.exposeInt('maxDuration'),
    notificationEmail: t.exposeString('notificationEmail', { nullable: true }),
    webhookUrl: t.exposeString('webhookUrl', { nullable: true }),
    messagesCount: t.exposeInt('messagesCount'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const VoicemailMessageRef = builder.objectRef<VoicemailMessageView>('VoicemailMessage').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    voicemailId: t.exposeString('voicemailId'),
    callId: t.exposeString('callId', { nullable: true }),
    caller: t.exposeString('caller'),
    durationSeconds: t.exposeInt('durationSeconds'),
    transcription: t.exposeString('transcription', { nullable: true }),
    recordingUrl: t.exposeString('recordingUrl'),
    listened: t.exposeBoolean('listened'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

// ---- inputs ----

const CreateCallInput = builder.inputType('CreateCallInput', {
  fields: (t) => ({
    to: t.string({ required: true }), from: t.string({ required: true }), agentId: t.string(), ivrId: t.string(), webhookUrl: t.string(),
    record: t.boolean(), maxDuration: t.int({ description: 'Seconds, 1-14400; default 3600' }), metadata: t.field({ type: 'JSON' }),
  }),
});
const trunkFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0], required: boolean) => ({
  name: t.string({ required }), terminationUri: t.string({ required }), originationUris: t.stringList(), authUsername: t.string(),
  authPassword: t.string({ description: 'Stored sealed; never returned' }), codecs: t.field({ type: [CodecEnum] }), encryption: t.field({ type: EncryptionEnum }),
});
const CreateSipTrunkInput = builder.inputType('CreateSipTrunkInput', { fields: (t) => trunkFields(t, true) });
const UpdateSipTrunkInput = builder.inputType('UpdateSipTrunkInput', { fields: (t) => trunkFields(t, false) });
const ivrFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0], required: boolean) => ({
  name: t.string({ required }), greeting: t.string({ required }), language: t.string(),
  menu: t.field({ type: 'JSON', required, description: '{ options: [{ key, action, target?, prompt?, menu? }] }' }),
  timeoutSeconds: t.int(), maxRetries: t.int(), fallbackAction: t.field({ type: FallbackEnum }), fallbackTarget: t.string(),
});
const CreateIvrFlowInput = builder.inputType('CreateIvrFlowInput', { fields: (t) => ivrFields(t, true) });
const UpdateIvrFlowInput = builder.inputType('UpdateIvrFlowInput', { fields: (t) => ivrFields(t, false) });
const CreateConferenceInput = builder.inputType('CreateConferenceInput', {
  fields: (t) => ({
    name: t.string({ required: true }), maxParticipants: t.int(), record: t.boolean(), muteOnJoin: t.boolean(), webhookUrl: t.string(),
    pin: t.string(), dialInNumber: t.string(),
  }),
});
const CreateVoicemailBoxInput = builder.inputType('CreateVoicemailBoxInput', {
  fields: (t) => ({
    name: t.string({ required: true }), greeting: t.string(), transcribe: t.boolean(), maxDuration: t.int(), notificationEmail: t.string(), webhookUrl: t.string(),
  }),
});

builder.queryFields((t) => ({
  calls: t.connection({
    type: CallRef, ...guard('Query', 'calls', ops.listCallsOp),
    args: { status: t.arg({ type: CallStatusEnum }), from: t.arg.string(), to: t.arg.string() },
    resolve: async (_r, a, ctx) => toConnection(await run(ops.listCallsOp, ctx, { ...pageRequest(a), status: a.status ?? undefined, from: a.from ?? undefined, to: a.to ?? undefined })),
  }),
  call: t.field({ type: CallRef, ...guard('Query', 'call', ops.getCallOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.getCallOp, ctx, { id: String(a.id) }) }),
  sipTrunks: t.connection({ type: SipTrunkRef, ...guard('Query', 'sipTrunks', ops.listTrunksOp), resolve: async (_r, a, ctx) => toConnection(await run(ops.listTrunksOp, ctx, pageRequest(a))) }),
  sipTrunk: t.field({ type: SipTrunkRef, ...guard('Query', 'sipTrunk', ops.getTrunkOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.getTrunkOp, ctx, { id: String(a.id) }) }),
  ivrFlows: t.connection({ type: IvrFlowRef, ...guard('Query', 'ivrFlows', ops.listIvrOp), resolve: async (_r, a, ctx) => toConnection(await run(ops.listIvrOp, ctx, pageRequest(a))) }),
  ivrFlow: t.field({ type: IvrFlowRef, ...guard('Query', 'ivrFlow', ops.getIvrOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.getIvrOp, ctx, { id: String(a.id) }) }),
  conferences: t.connection({ type: ConferenceRef, ...guard('Query', 'conferences', ops.listConferencesOp), resolve: async (_r, a, ctx) => toConnection(await run(ops.listConferencesOp, ctx, pageRequest(a))) }),
  conference: t.field({ type: ConferenceRef, ...guard('Query', 'conference', ops.getConferenceOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.getConferenceOp, ctx, { id: String(a.id) }) }),
  conferenceParticipants: t.connection({
    type: ParticipantRef, ...guard('Query', 'conferenceParticipants', ops.listParticipantsOp), args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, a, ctx) => toConnection(await run(ops.listParticipantsOp, ctx, { ...pageRequest(a), id: String(a.id) })),
  }),
  voicemailBoxes: t.connection({ type: VoicemailBoxRef, ...guard('Query', 'voicemailBoxes', ops.listVoicemailOp), resolve: async (_r, a, ctx) => toConnection(await run(ops.listVoicemailOp, ctx, pageRequest(a))) }),
  voicemailBox: t.field({ type: VoicemailBoxRef, ...guard('Query', 'voicemailBox', ops.getVoicemailOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.getVoicemailOp, ctx, { id: String(a.id) }) }),
  voicemailMessages: t.connection({
    type: VoicemailMessageRef, ...guard('Query', 'voicemailMessages', ops.listVoicemailMessagesOp), args: { id: t.arg.id({ required: true }), listened: t.arg.boolean() },
    resolve: async (_r, a, ctx) => toConnection(await run(ops.listVoicemailMessagesOp, ctx, { ...pageRequest(a), id: String(a.id), listened: a.listened ?? undefined })),
  }),
}));

builder.mutationFields((t) => ({
  createCall: t.field({
    type: CallRef, ...guard('Mutation', 'createCall', ops.createCallOp), args: { input: t.arg({ type: CreateCallInput, required: true }) },
    resolve: (_r, a, ctx) => run(ops.createCallOp, ctx, toWire(a.input)),
  }),
  hangupCall: t.field({ type: CallRef, ...guard('Mutation', 'hangupCall', ops.hangupCallOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.hangupCallOp, ctx, { id: String(a.id) }) }),
  sandboxCallDtmf: t.field({
    type: CallRef, ...guard('Mutation', 'sandboxCallDtmf', ops.sandboxDtmfOp), description: 'Test mode only: the far end of an answered call presses keys.',
    args: { id: t.arg.id({ required: true }), digits: t.arg.string({ required: true }) },
    resolve: (_r, a, ctx) => run(ops.sandboxDtmfOp, ctx, { id: String(a.id), digits: a.digits }),
  }),
  createSipTrunk: t.field({ type: SipTrunkRef, ...guard('Mutation', 'createSipTrunk', ops.createTrunkOp), args: { input: t.arg({ type: CreateSipTrunkInput, required: true }) }, resolve: (_r, a, ctx) => run(ops.createTrunkOp, ctx, toWire(a.input)) }),
  updateSipTrunk: t.field({
    type: SipTrunkRef, ...guard('Mutation', 'updateSipTrunk', ops.updateTrunkOp), args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateSipTrunkInput, required: true }) },
    resolve: (_r, a, ctx) => run(ops.updateTrunkOp, ctx, { ...patchWire(a.input as Record<string, unknown>), id: String(a.id) }),
  }),
  deleteSipTrunk: t.boolean({ ...guard('Mutation', 'deleteSipTrunk', ops.deleteTrunkOp), args: { id: t.arg.id({ required: true }) }, resolve: async (_r, a, ctx) => { await run(ops.deleteTrunkOp, ctx, { id: String(a.id) }); return true; } }),
  createIvrFlow: t.field({ type: IvrFlowRef, ...guard('Mutation', 'createIvrFlow', ops.createIvrOp), args: { input: t.arg({ type: CreateIvrFlowInput, required: true }) }, resolve: (_r, a, ctx) => run(ops.createIvrOp, ctx, toWire(a.input)) }),
  updateIvrFlow: t.field({
    type: IvrFlowRef, ...guard('Mutation', 'updateIvrFlow', ops.updateIvrOp), args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateIvrFlowInput, required: true }) },
    resolve: (_r, a, ctx) => run(ops.updateIvrOp, ctx, { ...(toWire(a.input) as Record<string, unknown>), id: String(a.id) }),
  }),
  deleteIvrFlow: t.boolean({ ...guard('Mutation', 'deleteIvrFlow', ops.deleteIvrOp), args: { id: t.arg.id({ required: true }) }, resolve: async (_r, a, ctx) => { await run(ops.deleteIvrOp, ctx, { id: String(a.id) }); return true; } }),
  createConference: t.field({ type: ConferenceRef, ...guard('Mutation', 'createConference', ops.createConferenceOp), args: { input: t.arg({ type: CreateConferenceInput, required: true }) }, resolve: (_r, a, ctx) => run(ops.createConferenceOp, ctx, toWire(a.input)) }),
  addConferenceParticipant: t.field({
    type: ParticipantRef, ...guard('Mutation', 'addConferenceParticipant', ops.addParticipantOp),
    args: { id: t.arg.id({ required: true }), number: t.arg.string({ required: true }), muted: t.arg.boolean() },
    resolve: (_r, a, ctx) => run(ops.addParticipantOp, ctx, { id: String(a.id), number: a.number, muted: a.muted ?? undefined }),
  }),
  removeConferenceParticipant: t.boolean({
    ...guard('Mutation', 'removeConferenceParticipant', ops.removeParticipantOp), args: { id: t.arg.id({ required: true }), participantId: t.arg.id({ required: true }) },
    resolve: async (_r, a, ctx) => { await run(ops.removeParticipantOp, ctx, { id: String(a.id), participant_id: String(a.participantId) }); return true; },
  }),
  endConference: t.field({ type: ConferenceRef, ...guard('Mutation', 'endConference', ops.endConferenceOp), args: { id: t.arg.id({ required: true }) }, resolve: (_r, a, ctx) => run(ops.endConferenceOp, ctx, { id: String(a.id) }) }),
  createVoicemailBox: t.field({ type: VoicemailBoxRef, ...guard('Mutation', 'createVoicemailBox', ops.createVoicemailOp), args: { input: t.arg({ type: CreateVoicemailBoxInput, required: true }) }, resolve: (_r, a, ctx) => run(ops.createVoicemailOp, ctx, toWire(a.input)) }),
  markVoicemailMessage: t.field({
    type: VoicemailMessageRef, ...guard('Mutation', 'markVoicemailMessage', ops.markVoicemailMessageOp),
    args: { id: t.arg.id({ required: true }), messageId: t.arg.id({ required: true }), listened: t.arg.boolean({ required: false, defaultValue: true }) },
    resolve: (_r, a, ctx) => run(ops.markVoicemailMessageOp, ctx, { id: String(a.id), message_id: String(a.messageId), listened: a.listened ?? true }),
  }),
}));

builder.subscriptionFields((t) => ({
  callUpdated: t.field({
    type: CallRef, ...guard('Subscription', 'callUpdated', { endpoint: 'GET /v1/voice/calls/{id}', roles: ops.getCallOp.roles }),
    description: 'The call now, then again after each status change (across instances, through the event bus).',
    args: { id: t.arg.id({ required: true }) },
    subscribe: (_r, args, ctx) => {
      const id = String(args.id);
      const notices = resourceNotices(ctx, id);
      const current = () => run(ops.getCallOp, ctx, { id });
      // A change this instance committed is shown as committed (no second read); others are read.
      // Never an older state than one already sent (two changes told out of order): read then.
      const calls = (ctx.modules.get('voice') as Partial<ops.VoiceServices> | undefined)?.calls;
      let sequence = 0;
      const sent = (c: CallView) => {
        sequence = Math.max(sequence, c.sequence);
        return c;
      };
      const load = async (n: LiveNotice) => {
        const committed = await calls?.committed(ctx.scope, id, n.id);
        return sent(committed && committed.sequence >= sequence ? committed : await current());
      };
      return liveStream(notices, load, async () => sent(await current()));
    },
    resolve: (c) => c,
  }),
}));
