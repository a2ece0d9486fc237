/** The /v1/voice routes, the recording link route and the test-mode call scripting route. */
import { PAGE_QUERY, pageQuery, route, type RawResponse, type RestRequest } from '../../rest/route.ts';
import * as ops from './voice.operations.ts';
import * as show from './voice.presenters.ts';

const body = (r: RestRequest) => r.body;
const withId = (r: RestRequest) => ({ ...r.body, id: r.params.id });
const page = (r: RestRequest) => ({ ...pageQuery(r.query), id: r.params.id });
/** A `+` left unencoded in a query string arrives as a space: `?to=+1415…` still means +1415…. */
const plus = (v: string | undefined) => v?.replace(/^ (?=\d)/, '+');
const bool = (v: string | undefined) => (v === undefined ? undefined : v === 'true' ? true : v === 'false' ? false : v);
const audio = (r: { seconds: number; audio: string | Buffer }): RawResponse => ({
  raw: true, status: 200, contentType: 'audio/wav', body: r.audio,
  headers: { 'Cache-Control': 'private, no-store', 'Content-Disposition': 'inline; filename="recording.wav"', 'X-Recording-Duration': String(r.seconds) },
});

export const voiceRoutes = [
  route({ method: 'POST', path: '/v1/voice/calls', operation: ops.createCallOp, status: 201, input: body, output: show.presentCall }),
  route({
    method: 'GET', path: '/v1/voice/calls', operation: ops.listCallsOp, query: [...PAGE_QUERY, 'status', 'from', 'to'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status, from: plus(r.query.from), to: plus(r.query.to) }), paginated: true, output: show.presentCallSummary,
  }),
  route({ method: 'GET', path: '/v1/voice/calls/{id}', operation: ops.getCallOp, input: (r) => r.params, output: show.presentCall, resource: 'call' }),
  route({ method: 'POST', path: '/v1/voice/calls/{id}/hangup', operation: ops.hangupCallOp, input: (r) => r.params, output: show.presentHangup, resource: 'call' }),
  route({ method: 'POST', path: '/v1/sandbox/voice/calls/{id}/dtmf', operation: ops.sandboxDtmfOp, input: withId, output: show.presentCall, resource: 'call' }),
  route({
    method: 'GET', path: '/v1/voice/recordings/{id}', operation: ops.getRecordingOp, query: ['expires', 'signature'],
    input: (r) => ({ id: r.params.id, expires: r.query.expires, signature: r.query.signature }), output: audio, resource: 'rec',
  }),

  route({ method: 'POST', path: '/v1/voice/sip-trunks', operation: ops.createTrunkOp, status: 201, input: body, output: show.presentTrunk }),
  route({ method: 'GET', path: '/v1/voice/sip-trunks', operation: ops.listTrunksOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: show.presentTrunk }),
  route({ method: 'GET', path: '/v1/voice/sip-trunks/{id}', operation: ops.getTrunkOp, input: (r) => r.params, output: show.presentTrunk, resource: 'trunk' }),
  route({ method: 'PUT', path: '/v1/voice/sip-trunks/{id}', operation: ops.updateTrunkOp, input: withId, output: show.presentTrunk, resource: 'trunk' }),
  route({ method: 'DELETE', path: '/v1/voice/sip-trunks/{id}', operation: ops.deleteTrunkOp, status: 204, input: (r) => r.params, resource: 'trunk' }),

  route({ method: 'POST', path: '/v1/voice/ivr', operation: ops.createIvrOp, status: 201, input: body, output: show.presentIvr }),
  route({ method: 'GET', path: '/v1/voice/ivr', operation: ops.listIvrOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: show.presentIvr }),
  route({ method: 'GET', path: '/v1/voice/ivr/{id}', operation: ops.getIvrOp, input: (r) => r.params, output: show.presentIvr, resource: 'ivr' }),
  route({ method: 'PUT', path: '/v1/voice/ivr/{id}', operation: ops.updateIvrOp, input: withId, output: show.presentIvr, resource: 'ivr' }),
  route({ method: 'DELETE', path: '/v1/voice/ivr/{id}', operation: ops.deleteIvrOp, status: 204, input: (r) => r.params, resource: 'ivr' }),

  route({ method: 'POST', path: '/v1/voice/conferences', operation: ops.createConferenceOp, status: 201, input: body, output: show.presentConference }),
  route({ method: 'GET', path: '/v1/voice/conferences', operation: ops.listConferencesOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: show.presentConference }),
  route({ method: 'GET', path: '/v1/voice/conferences/{id}', operation: ops.getConferenceOp, input: (r) => r.params, output: show.presentConference, resource: 'conf' }),
  route({ method: 'POST', path: '/v1/voice/conferences/{id}/end', operation: ops.endConferenceOp, input: (r) => r.params, output: show.presentConference, resource: 'conf' }),
  route({
    method: 'GET', path: '/v1/voice/conferences/{id}/participants', operation: ops.listParticipantsOp, query: PAGE_QUERY, input: page,
    paginated: true, output: show.presentParticipant, resource: 'conf',
  }),
  route({ method: 'POST', path: '/v1/voice/conferences/{id}/participants', operation: ops.addParticipantOp, status: 201, input: withId, output: show.presentParticipant, resource: 'conf' }),
  route({
    method: 'DELETE', path: '/v1/voice/conferences/{id}/participants/{participantId}', operation: ops.removeParticipantOp, status: 204,
    input: (r) => ({ id: r.params.id, participant_id: r.params.participantId }), resource: 'conf',
  }),

  route({ method: 'POST', path: '/v1/voice/voicemail', operation: ops.createVoicemailOp, status: 201, input: body, output: show.presentVoicemailBox }),
  route({ method: 'GET', path: '/v1/voice/voicemail', operation: ops.listVoicemailOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: show.presentVoicemailBox }),
  route({ method: 'GET', path: '/v1/voice/voicemail/{id}', operation: ops.getVoicemailOp, input: (r) => r.params, output: show.presentVoicemailBox, resource: 'vmail' }),
  route({
    method: 'GET', path: '/v1/voice/voicemail/{id}/messages', operation: ops.listVoicemailMessagesOp, query: [...PAGE_QUERY, 'listened'],
    input: (r) => ({ ...page(r), listened: bool(r.query.listened) }), paginated: true, output: show.presentVoicemailMessage, resource: 'vmail',
  }),
  route({
    method: 'PUT', path: '/v1/voice/voicemail/{id}/messages/{messageId}', operation: ops.markVoicemailMessageOp,
    input: (r) => ({ ...r.body, id: r.params.id, message_id: r.params.messageId }), output: show.presentVoicemailMessage, resource: 'vmail',
  }),
];
