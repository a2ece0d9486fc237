/** The voice use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { LIMITS, limitsRow } from '../../platform/ratelimit/plans.ts';
import type { SandboxTimeline } from './sandbox/timeline.ts';
import type { CallGateway } from './calls/gateway.ts';
import type { CallDialing } from './calls/dialing.ts';
import type { CallPlacing } from './placing/placing.service.ts';
import type { SipVoiceGateway } from '../../providers/voice/sip/gateway.ts';
import { operationsOf } from '../../context.ts';
import { BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import type { CallsService } from './calls/calls.service.ts';
import type { ConferencesService } from './conferences/conferences.service.ts';
import type { SetupService } from './setup/setup.service.ts';
import type { VoicemailService } from './voicemail/voicemail.service.ts';
import type { RecordingReader } from './recordings/recordings.ts';
import type { VoiceRetention } from './voice.retention.ts';
import {
  addParticipantInput, createCallInput, createConferenceInput, createIvrInput, createTrunkInput, createVoicemailInput, dtmfInput,
  listCallsInput, listVoicemailMessagesInput, markListenedInput, pageOfInput, participantInput, recordingInput, updateIvrInput, updateTrunkInput,
} from './voice.schemas.ts';

export type VoiceServices = { calls: CallsService; callPlacing: CallPlacing; callGateway: CallGateway; callDialing: CallDialing; setup: SetupService; conferences: ConferencesService; voicemail: VoicemailService; recordings: RecordingReader; voiceRetention: VoiceRetention; sipGateway: SipVoiceGateway; sandboxTimeline: SandboxTimeline };
const op = operationsOf<VoiceServices>('voice');

// ---- calls ----
/**
 * The consent and numbers lookups (reads) run while the rate-limit admission is in flight:
 * `prepare`. A test call that fits is written by their statement together with the request's take
 * (CallPlacing.prepare): never for a refused request.
 */
export const createCallOp = op({
  name: 'voice.createCall', endpoint: 'POST /v1/voice/calls', limits: limitsRow(10, 60, 200, 600), roles: BUILDERS, input: createCallInput,
  prepare: (ctx, i, s) => s.callPlacing.prepare(ctx.scope, i, ctx.admissionTake), run: (ctx, i, s, prepared) => s.callPlacing.create(ctx.scope, i, prepared),
});
export const listCallsOp = op({ name: 'voice.listCalls', endpoint: 'GET /v1/voice/calls', limits: LIMITS.read, roles: READERS, input: listCallsInput, run: (ctx, i, s) => s.calls.list(ctx.scope, i) });
export const getCallOp = op({ name: 'voice.getCall', endpoint: 'GET /v1/voice/calls/{id}', roles: READERS, input: idInput, run: (ctx, i, s) => s.calls.get(ctx.scope, i.id) });
export const hangupCallOp = op({ name: 'voice.hangupCall', endpoint: 'POST /v1/voice/calls/{id}/hangup', limits: LIMITS.send, roles: BUILDERS, input: idInput, run: (ctx, i, s) => s.calls.hangup(ctx.scope, i.id) });
/** Test mode only: keys pressed by the far end of an answered sandbox call. */
export const sandboxDtmfOp = op({ name: 'voice.sandboxDtmf', endpoint: 'POST /v1/sandbox/voice/calls/{id}/dtmf', roles: BUILDERS, input: dtmfInput, run: (ctx, i, s) => s.calls.sandboxDtmf(ctx.scope, i.id, i.digits) });
export const getRecordingOp = op({
  name: 'voice.getRecording', endpoint: 'GET /v1/voice/recordings/{id}', roles: READERS, input: recordingInput,
  run: (ctx, i, s) => s.recordings.read(ctx.scope, i.id, Number(i.expires), i.signature),
});

// ---- SIP trunks ----
export const createTrunkOp = op({ name: 'voice.createTrunk', endpoint: 'POST /v1/voice/sip-trunks', roles: BUILDERS, input: createTrunkInput, run: (ctx, i, s) => s.setup.createTrunk(ctx.scope, i) });
export const listTrunksOp = op({ name: 'voice.listTrunks', endpoint: 'GET /v1/voice/sip-trunks', roles: READERS, input: pageInput, run: (ctx, i, s) => s.setup.listTrunks(ctx.scope, i) });
export const getTrunkOp = op({ name: 'voice.getTrunk', endpoint: 'GET /v1/voice/sip-trunks/{id}', roles: READERS, input: idInput, run: (ctx, i, s) => s.setup.getTrunk(ctx.scope, i.id) });
export const updateTrunkOp = op({ name: 'voice.updateTrunk', endpoint: 'PUT /v1/voice/sip-trunks/{id}', roles: BUILDERS, input: updateTrunkInput, run: (ctx, i, s) => s.setup.updateTrunk(ctx.scope, i) });
export const deleteTrunkOp = op({ name: 'voice.deleteTrunk', endpoint: 'DELETE /v1/voice/sip-trunks/{id}', roles: BUILDERS, input: idInput, run: (ctx, i, s) => s.setup.deleteTrunk(ctx.scope, i.id) });

// ---- IVR ----
export const createIvrOp = op({ name: 'voice.createIvr', endpoint: 'POST /v1/voice/ivr', roles: BUILDERS, input: createIvrInput, run: (ctx, i, s) => s.setup.createIvr(ctx.scope, i) });
export const listIvrOp = op({ name: 'voice.listIvr', endpoint: 'GET /v1/voice/ivr', roles: READERS, input: pageInput, run: (ctx, i, s) => s.setup.listIvr(ctx.scope, i) });
export const getIvrOp = op({ name: 'voice.getIvr', endpoint: 'GET /v1/voice/ivr/{id}', roles: READERS, input: idInput, run: (ctx, i, s) => s.setup.getIvr(ctx.scope, i.id) });
export const updateIvrOp = op({ name: 'voice.updateIvr', endpoint: 'PUT /v1/voice/ivr/{id}', roles: BUILDERS, input: updateIvrInput, run: (ctx, i, s) => s.setup.updateIvr(ctx.scope, i) });
export const deleteIvrOp = op({ name: 'voice.deleteIvr', endpoint: 'DELETE /v1/voice/ivr/{id}', roles: BUILDERS, input: idInput, run: (ctx, i, s) => s.setup.deleteIvr(ctx.scope, i.id) });

// ---- conferences ----
export const createConferenceOp = op({ name: 'voice.createConference', endpoint: 'POST /v1/voice/conferences', roles: BUILDERS, input: createConferenceInput, run: (ctx, i, s) => s.conferences.create(ctx.scope, i) });
export const listConferencesOp = op({ name: 'voice.listConferences', endpoint: 'GET /v1/voice/conferences', roles: READERS, input: pageInput, run: (ctx, i, s) => s.conferences.list(ctx.scope, i) });
export const getConferenceOp = op({ name: 'voice.getConference', endpoint: 'GET /v1/voice/conferences/{id}', roles: READERS, input: idInput, run: (ctx, i, s) => s.conferences.get(ctx.scope, i.id) });
export const listParticipantsOp = op({ name: 'voice.listParticipants', endpoint: 'GET /v1/voice/conferences/{id}/participants', roles: READERS, input: pageOfInput, run: (ctx, i, s) => s.conferences.participants(ctx.scope, i.id, i) });
export const addParticipantOp = op({ name: 'voice.addParticipant', endpoint: 'POST /v1/voice/conferences/{id}/participants', roles: BUILDERS, input: addParticipantInput, run: (ctx, i, s) => s.conferences.addParticipant(ctx.scope, i) });
export const removeParticipantOp = op({
  name: 'voice.removeParticipant', endpoint: 'DELETE /v1/voice/conferences/{id}/participants/{participantId}', roles: BUILDERS, input: participantInput,
  run: (ctx, i, s) => s.conferences.removeParticipant(ctx.scope, i.id, i.participant_id),
});
export const endConferenceOp = op({ name: 'voice.endConference', endpoint: 'POST /v1/voice/conferences/{id}/end', roles: BUILDERS, input: idInput, run: (ctx, i, s) => s.conferences.end(ctx.scope, i.id) });

// ---- voicemail ----
export const createVoicemailOp = op({ name: 'voice.createVoicemail', endpoint: 'POST /v1/voice/voicemail', roles: BUILDERS, input: createVoicemailInput, run: (ctx, i, s) => s.voicemail.create(ctx.scope, i) });
export const listVoicemailOp = op({ name: 'voice.listVoicemail', endpoint: 'GET /v1/voice/voicemail', roles: READERS, input: pageInput, run: (ctx, i, s) => s.voicemail.list(ctx.scope, i) });
export const getVoicemailOp = op({ name: 'voice.getVoicemail', endpoint: 'GET /v1/voice/voicemail/{id}', roles: READERS, input: idInput, run: (ctx, i, s) => s.voicemail.get(ctx.scope, i.id) });
export const listVoicemailMessagesOp = op({
  name: 'voice.listVoicemailMessages', endpoint: 'GET /v1/voice/voicemail/{id}/messages', roles: READERS, input: listVoicemailMessagesInput,
  run: (ctx, i, s) => s.voicemail.messages(ctx.scope, i.id, i),
});
export const markVoicemailMessageOp = op({
  name: 'voice.markVoicemailMessage', endpoint: 'PUT /v1/voice/voicemail/{id}/messages/{messageId}', roles: BUILDERS, input: markListenedInput,
  run: (ctx, i, s) => s.voicemail.markListened(ctx.scope, i.id, i.message_id, i.listened ?? true),
});
