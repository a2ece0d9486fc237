/** Access fixtures of the voice module: calls, recordings, SIP trunks, IVR flows, conferences and voicemail (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

const ivrBody = () => ({ name: 'fixture', greeting: 'Hello', menu: { options: [{ key: '1', action: 'hangup' }] } });

export default defineAccessFixtures(({ t, a, unique, phone, buyable, makeFixture }) => {
  /** A voice number of tenant A: calls and their fixtures place calls from it. */
  let voiceFrom = '';
  return {
    beforeAll: async () => {
      voiceFrom = (await t.rest('POST', '/v1/numbers', { key: a.testKey, body: { number: buyable() } })).body.data.number;
    },
    fixtures: {
      call: async () => (await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { to: phone(), from: voiceFrom } })).body.data.id,
      trunk: async () => (await t.rest('POST', '/v1/voice/sip-trunks', { key: a.testKey, body: { name: 'fixture', termination_uri: 'sip:trunk.example.com' } })).body.data.id,
      ivr: async () => (await t.rest('POST', '/v1/voice/ivr', { key: a.testKey, body: ivrBody() })).body.data.id,
      conf: async () => (await t.rest('POST', '/v1/voice/conferences', { key: a.testKey, body: { name: 'fixture' } })).body.data.id,
      vmail: async () => (await t.rest('POST', '/v1/voice/voicemail', { key: a.testKey, body: { name: 'fixture' } })).body.data.id,
      // A recording link (`<call id>?expires=…&signature=…`) of a finished, recorded call of tenant A.
      rec: async () => {
        const id = await makeFixture('call');
        await t.db.query(`update calls set status = 'completed', record = true, recording_seconds = 3, duration_seconds = 3 where id = $1`, [id]);
        const url = new URL((await t.rest('GET', `/v1/voice/calls/${id}`, { key: a.testKey })).body.data.recording_url);
        return `${id}${url.search}`;
      },
    },
    restBodies: {
      'POST /v1/voice/calls': () => ({ to: phone(), from: voiceFrom }),
      'POST /v1/voice/calls/{id}/hangup': {},
      'POST /v1/sandbox/voice/calls/{id}/dtmf': { digits: '1' },
      'POST /v1/voice/sip-trunks': { name: 'matrix', termination_uri: 'sip:trunk.example.com' },
      'PUT /v1/voice/sip-trunks/{id}': { name: 'matrix' },
      'POST /v1/voice/ivr': ivrBody,
      'PUT /v1/voice/ivr/{id}': { name: 'matrix' },
      'POST /v1/voice/conferences': { name: 'matrix' },
      'POST /v1/voice/conferences/{id}/participants': () => ({ number: phone() }),
      'POST /v1/voice/conferences/{id}/end': {},
      'POST /v1/voice/voicemail': { name: 'matrix' },
      'PUT /v1/voice/voicemail/{id}/messages/{messageId}': { listened: true },
    },
    subFixtures: {
      'DELETE /v1/voice/conferences/{id}/participants/{participantId}': async (conf) =>
        (await t.rest('POST', `/v1/voice/conferences/${conf}/participants`, { key: a.testKey, body: { number: phone() } })).body.data.id,
      'PUT /v1/voice/voicemail/{id}/messages/{messageId}': async (box) => {
        const id = `vmsg_01jd${String(unique()).padStart(22, '0')}`;
        await t.db.query(`insert into voicemail_messages (id, organization_id, mode, voicemail_id, caller, duration_seconds, listened, created_at)
          values ($1, $2, 'test', $3, '+14155550100', 3, false, now())`, [id, a.orgId, box]);
        return id;
      },
    },
    gqlSamples: {
      'Query.calls': { doc: '{ calls(first: 1, status: busy) { edges { cursor } } }' },
      'Query.call': { doc: 'query($id: ID!) { call(id: $id) { id steps { type } } }', resource: 'call' },
      'Query.sipTrunks': { doc: '{ sipTrunks(first: 1) { edges { cursor } } }' },
      'Query.sipTrunk': { doc: 'query($id: ID!) { sipTrunk(id: $id) { id } }', resource: 'trunk' },
      'Query.ivrFlows': { doc: '{ ivrFlows(first: 1) { edges { cursor } } }' },
      'Query.ivrFlow': { doc: 'query($id: ID!) { ivrFlow(id: $id) { id optionsCount } }', resource: 'ivr' },
      'Query.conferences': { doc: '{ conferences(first: 1) { edges { cursor } } }' },
      'Query.conference': { doc: 'query($id: ID!) { conference(id: $id) { id pin } }', resource: 'conf' },
      'Query.conferenceParticipants': { doc: 'query($id: ID!) { conferenceParticipants(id: $id, first: 1) { edges { cursor } } }', resource: 'conf' },
      'Query.voicemailBoxes': { doc: '{ voicemailBoxes(first: 1) { edges { cursor } } }' },
      'Query.voicemailBox': { doc: 'query($id: ID!) { voicemailBox(id: $id) { id } }', resource: 'vmail' },
      'Query.voicemailMessages': { doc: 'query($id: ID!) { voicemailMessages(id: $id, first: 1) { edges { cursor } } }', resource: 'vmail' },
      'Mutation.createCall': { doc: 'mutation($to: String!, $from: String!) { createCall(input: { to: $to, from: $from }) { id } }', vars: () => ({ to: phone(), from: voiceFrom }) },
      'Mutation.hangupCall': { doc: 'mutation($id: ID!) { hangupCall(id: $id) { id } }', resource: 'call' },
      'Mutation.sandboxCallDtmf': { doc: 'mutation($id: ID!) { sandboxCallDtmf(id: $id, digits: "1") { id } }', resource: 'call' },
      'Mutation.createSipTrunk': { doc: 'mutation { createSipTrunk(input: { name: "x", terminationUri: "sip:trunk.example.com" }) { id } }' },
      'Mutation.updateSipTrunk': { doc: 'mutation($id: ID!) { updateSipTrunk(id: $id, input: { name: "x" }) { id } }', resource: 'trunk' },
      'Mutation.deleteSipTrunk': { doc: 'mutation($id: ID!) { deleteSipTrunk(id: $id) }', resource: 'trunk' },
      'Mutation.createIvrFlow': { doc: 'mutation { createIvrFlow(input: { name: "x", greeting: "Hi", menu: { options: [{ key: "1", action: "hangup" }] } }) { id } }' },
      'Mutation.updateIvrFlow': { doc: 'mutation($id: ID!) { updateIvrFlow(id: $id, input: { name: "x" }) { id } }', resource: 'ivr' },
      'Mutation.deleteIvrFlow': { doc: 'mutation($id: ID!) { deleteIvrFlow(id: $id) }', resource: 'ivr' },
      'Mutation.createConference': { doc: 'mutation { createConference(input: { name: "x" }) { id } }' },
      'Mutation.addConferenceParticipant': { doc: 'mutation($id: ID!, $n: String!) { addConferenceParticipant(id: $id, number: $n) { id } }', resource: 'conf', vars: () => ({ n: phone() }) },
      'Mutation.removeConferenceParticipant': { doc: 'mutation($id: ID!) { removeConferenceParticipant(id: $id, participantId: "cpt_01jd0000000000000000000000") }', resource: 'conf' },
      'Mutation.endConference': { doc: 'mutation($id: ID!) { endConference(id: $id) { id } }', resource: 'conf' },
      'Mutation.createVoicemailBox': { doc: 'mutation { createVoicemailBox(input: { name: "x" }) { id } }' },
      'Mutation.markVoicemailMessage': { doc: 'mutation($id: ID!) { markVoicemailMessage(id: $id, messageId: "vmsg_01jd0000000000000000000000") { id } }', resource: 'vmail' },
    },
  };
});
