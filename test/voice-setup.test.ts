/**
 * Voice setup and the rest of the context over HTTP against the real database and workers: SIP
 * trunks (SIP URIs validated, password sealed and never returned), IVR flows (menus validated,
 * targets checked in the tenant) run end to end on sandbox calls (DTMF, timeouts and retries,
 * fallback, voicemail with transcription, signed callback and notification email), conferences
 * (PIN, dial-in, participants as call legs, capacity, end) and voicemail boxes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually, expectError, startReceiver, VOICE_ENV, type Hit } from './helpers/voice.ts';

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let from: string;
let receiver: { url: string; hits: Hit[]; close(): void };

beforeAll(async () => {
  receiver = await startReceiver();
  // The no-answer number rings for a minute here, so a call is certainly not answered yet when a test needs that.
  t = await startTestApp({ workers: true, clock: systemClock, env: { ...VOICE_ENV, SANDBOX_CALL_NO_ANSWER_MS: '60000' } });
  a = await t.createOrg('enterprise', 'Voice setup A');
  b = await t.createOrg('enterprise', 'Voice setup B');
  from = await buyVoiceNumber(t, a.testKey, '212');
});
afterAll(async () => {
  await t?.close();
  receiver?.close();
});

const post = (path: string, body: unknown, key = a.testKey) => t.rest('POST', path, { key, body });

describe('SIP trunks', () => {
  it('creates with defaults, seals the password and never returns it', async () => {
    const r = await post('/v1/voice/sip-trunks', { name: 'Main', termination_uri: 'sip:pbx.example.com:5061;transport=tls', auth_username: 'acme', auth_password: 's3cret-pass' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data).toMatchObject({ name: 'Main', status: 'active', codecs: ['PCMU', 'PCMA', 'OPUS'], encryption: 'tls_srtp', origination_uris: [], has_auth_password: true });
    expect(r.text).not.toContain('s3cret-pass');
    const { rows } = await t.db.query('select auth_password_sealed from sip_trunks where id = $1', [r.body.data.id]);
    expect(rows[0].auth_password_sealed).toMatch(/^v1:/);
    expect(rows[0].auth_password_sealed).not.toContain('s3cret');
    const got = await t.rest('GET', `/v1/voice/sip-trunks/${r.body.data.id}`, { key: a.testKey });
    expect(got.text).not.toContain('s3cret-pass');
    const gql = await t.gql('query($id: ID!) { sipTrunk(id: $id) { name hasAuthPassword codecs } }', { id: r.body.data.id }, { key: a.testKey });
    expect(gql.body.data.sipTrunk).toEqual({ name: 'Main', hasAuthPassword: true, codecs: ['PCMU', 'PCMA', 'OPUS'] });
  });

  it('validates SIP URIs, codecs and encryption; PUT replaces fields; DELETE answers 204 then 404', async () => {
    expectError(await post('/v1/voice/sip-trunks', { name: 'x', termination_uri: 'http://pbx.example.com' }), 422, 'VALIDATION_ERROR', 'termination_uri');
    expectError(await post('/v1/voice/sip-trunks', { name: 'x', termination_uri: 'sip:ok.example.com', origination_uris: ['sip:ok.example.com', 'pbx'] }), 422, 'VALIDATION_ERROR', 'origination_uris.1');
    expectError(await post('/v1/voice/sip-trunks', { name: 'x', termination_uri: 'sip:ok.example.com', codecs: ['MP3'] }), 422, 'VALIDATION_ERROR', 'codecs.0');
    expectError(await post('/v1/voice/sip-trunks', { name: 'x', termination_uri: 'sip:ok.example.com', encryption: 'ssl' }), 422, 'VALIDATION_ERROR', 'encryption');
    expectError(await post('/v1/voice/sip-trunks', { termination_uri: 'sip:ok.example.com' }), 422, 'MISSING_REQUIRED_FIELD', 'name');
    const id = (await post('/v1/voice/sip-trunks', { name: 'Edge', termination_uri: 'sips:edge@edge.example.net:5061', encryption: 'tls', codecs: ['OPUS', 'PCMU'] })).body.data.id;
    const put = await t.rest('PUT', `/v1/voice/sip-trunks/${id}`, { key: a.testKey, body: { name: 'Edge 2', origination_uris: ['sip:in.example.com'] } });
    expect(put.body.data).toMatchObject({ name: 'Edge 2', termination_uri: 'sips:edge@edge.example.net:5061', origination_uris: ['sip:in.example.com'], codecs: ['OPUS', 'PCMU'], encryption: 'tls' });
    expect((await t.rest('GET', '/v1/voice/sip-trunks', { key: a.testKey })).body.data.map((x: any) => x.id)).toContain(id);
    expectError(await t.rest('GET', `/v1/voice/sip-trunks/${id}`, { key: b.testKey }), 404, 'NOT_FOUND');
    expect((await t.rest('DELETE', `/v1/voice/sip-trunks/${id}`, { key: a.testKey })).status).toBe(204);
    expectError(await t.rest('GET', `/v1/voice/sip-trunks/${id}`, { key: a.testKey }), 404, 'NOT_FOUND');
  });
});

describe('IVR flows', () => {
  let box: string;
  beforeAll(async () => {
    box = (await post('/v1/voice/voicemail', { name: 'Support', notification_email: 'team@example.com', webhook_url: `${receiver.url}/vm`, max_duration: 60 })).body.data.id;
  });

  it('validates menus: unique DTMF keys, known actions, targets present and existing in the tenant', async () => {
    const base = { name: 'Main', greeting: 'Welcome' };
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'hangup' }, { key: '1', action: 'repeat' }] } }), 422, 'VALIDATION_ERROR', 'menu.options.1.key');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: 'A', action: 'hangup' }] } }), 422, 'VALIDATION_ERROR', 'menu.options.0.key');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'dance' }] } }), 422, 'VALIDATION_ERROR', 'menu.options.0.action');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'voicemail' }] } }), 422, 'VALIDATION_ERROR', 'menu.options.0.target');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'voicemail', target: 'vmail_01jd0000000000000000000000' }] } }), 404, 'NOT_FOUND', 'menu.options.0.target');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'transfer_agent', target: 'agt_01jd0000000000000000000000' }] } }), 404, 'NOT_FOUND', 'menu.options.0.target');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'transfer_number', target: '12' }] } }), 422, 'INVALID_PHONE_NUMBER', 'menu.options.0.target');
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'hangup' }] }, fallback_action: 'transfer_number' }), 422, 'MISSING_REQUIRED_FIELD', 'fallback_target');
    expectError(await post('/v1/voice/ivr', { greeting: 'x', menu: { options: [{ key: '1', action: 'hangup' }] } }), 422, 'MISSING_REQUIRED_FIELD', 'name');
    // Another tenant's box is not a target.
    const other = (await post('/v1/voice/voicemail', { name: 'B box' }, b.testKey)).body.data.id;
    expectError(await post('/v1/voice/ivr', { ...base, menu: { options: [{ key: '1', action: 'voicemail', target: other }] } }), 404, 'NOT_FOUND', 'menu.options.0.target');
  });

  it('creates with defaults and options_count; PUT updates; DELETE 204', async () => {
    const r = await post('/v1/voice/ivr', { name: 'Main', greeting: 'Welcome to Acme', menu: { options: [
      { key: '1', action: 'transfer_number', target: '+1 415 555 0100' }, { key: '2', action: 'voicemail', target: box },
      { key: '3', action: 'submenu', menu: { options: [{ key: '9', action: 'hangup' }] } }, { key: '*', action: 'repeat' },
    ] } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data).toMatchObject({ name: 'Main', status: 'active', options_count: 4, language: 'en-US', timeout_seconds: 10, max_retries: 3, fallback_action: 'voicemail' });
    expect(r.body.data.menu.options[0].target).toBe('+14155550100');
    const put = await t.rest('PUT', `/v1/voice/ivr/${r.body.data.id}`, { key: a.testKey, body: { timeout_seconds: 2, max_retries: 1 } });
    expect(put.body.data).toMatchObject({ timeout_seconds: 2, max_retries: 1, options_count: 4 });
    expect((await t.rest('GET', '/v1/voice/ivr', { key: a.testKey })).body.data[0].id).toBe(r.body.data.id);
    const tmp = (await post('/v1/voice/ivr', { name: 'Tmp', greeting: 'x', menu: { options: [{ key: '1', action: 'hangup' }] } })).body.data.id;
    expect((await t.rest('DELETE', `/v1/voice/ivr/${tmp}`, { key: a.testKey })).status).toBe(204);
    expectError(await t.rest('PUT', `/v1/voice/ivr/${tmp}`, { key: a.testKey, body: { name: 'x' } }), 404, 'NOT_FOUND');
  });

  it('runs on a call: greeting, menu, DTMF from the sandbox endpoint, submenu, and hangup', async () => {
    const ivr = (await post('/v1/voice/ivr', { name: 'Run', greeting: 'Hello', timeout_seconds: 30, menu: { options: [
      { key: '3', action: 'submenu', menu: { options: [{ key: '9', action: 'hangup' }] } },
    ] } })).body.data.id;
    // Before the answer there is nobody to press keys (a call that rings on: the answer of an ordinary
    // sandbox call comes 150 ms after placement here, sooner than a loaded machine answers the next request).
    const ringing = (await post('/v1/voice/calls', { to: '+15005550007', from, ivr_id: ivr })).body.data;
    expectError(await post(`/v1/sandbox/voice/calls/${ringing.id}/dtmf`, { digits: '3' }), 409, 'CONFLICT');
    expect((await post(`/v1/voice/calls/${ringing.id}/hangup`, {})).status).toBe(200);
    const call = (await post('/v1/voice/calls', { to: '+14155550111', from, ivr_id: ivr })).body.data;
    await callReaches(t, a.testKey, call.id, 'in_progress');
    const pressed = await post(`/v1/sandbox/voice/calls/${call.id}/dtmf`, { digits: '39' });
    expect(pressed.status, pressed.text).toBe(200);
    expect(pressed.body.data.status).toBe('completed');
    const types = pressed.body.data.steps.map((s: any) => s.type);
    expect(types).toEqual(expect.arrayContaining(['ivr_greeting', 'ivr_menu', 'dtmf', 'ivr_submenu', 'ivr_hangup']));
    expect(types.indexOf('ivr_submenu')).toBeLessThan(types.indexOf('ivr_hangup'));
    expectError(await post(`/v1/sandbox/voice/calls/${call.id}/dtmf`, { digits: '1' }), 409, 'CALL_ALREADY_ENDED');
    expectError(await post(`/v1/sandbox/voice/calls/${call.id}/dtmf`, { digits: 'x' }), 422, 'VALIDATION_ERROR', 'digits');
  });

  it('with no key pressed: replays after timeout_seconds up to max_retries, then the voicemail fallback records a transcribed message', async () => {
    const ivr = (await post('/v1/voice/ivr', { name: 'Quiet', greeting: 'Hi', timeout_seconds: 1, max_retries: 1, fallback_action: 'voicemail', fallback_target: box,
      menu: { options: [{ key: '1', action: 'hangup' }] } })).body.data.id;
    const call = (await post('/v1/voice/calls', { to: '+14155550112', from, ivr_id: ivr })).body.data;
    const recording = await eventually('voicemail recording', async () => {
      const c = (await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: a.testKey })).body.data;
      return c.steps.some((s: any) => s.type === 'voicemail_recording') ? c : undefined;
    });
    const types = recording.steps.map((s: any) => s.type);
    expect(types.filter((x: string) => x === 'ivr_timeout')).toHaveLength(2);
    expect(types).toContain('ivr_menu_replayed');
    expect(types).toContain('ivr_fallback');
    await new Promise((r) => setTimeout(r, 1100));
    await post(`/v1/voice/calls/${call.id}/hangup`, {});
    const messages = await eventually('message', async () => {
      const m = await t.rest('GET', `/v1/voice/voicemail/${box}/messages`, { key: a.testKey });
      return m.body.data.find((x: any) => x.call_id === call.id);
    });
    expect(messages).toMatchObject({ voicemail_id: box, caller: '+14155550112', listened: false });
    expect(messages.duration_seconds).toBeGreaterThanOrEqual(1);
    expect(messages.transcription).toContain('Sandbox transcription');
    expect(messages.recording_url).toContain(`/v1/voice/recordings/${messages.id}?`);
  });

  it('+15005550010 leaves a 10-second message in the flow\'s box: webhook callback and notification email', async () => {
    const ivr = (await post('/v1/voice/ivr', { name: 'Machine', greeting: 'Hi', timeout_seconds: 30, menu: { options: [{ key: '2', action: 'voicemail', target: box }] } })).body.data.id;
    const call = (await post('/v1/voice/calls', { to: '+15005550010', from, ivr_id: ivr })).body.data;
    const done = await callReaches(t, a.testKey, call.id, 'completed', 30_000);
    expect(done.steps.find((s: any) => s.type === 'speech').detail.seconds).toBe(10);
    const list = await t.rest('GET', `/v1/voice/voicemail/${box}/messages?listened=false`, { key: a.testKey });
    const m = list.body.data.find((x: any) => x.call_id === call.id);
    expect(m).toMatchObject({ duration_seconds: 10, caller: '+15005550010' });
    const hit = await eventually('voicemail callback', () => receiver.hits.find((h) => h.path === '/vm' && h.json?.data?.message_id === m.id));
    expect(hit.json.type).toBe('voicemail.received');
    expect(hit.headers['x-service-signature']).toMatch(/^[0-9a-f]{64}$/);
    const email = await eventually('notification email', async () => {
      const { rows } = await t.db.query(`select body, recipients from messages where organization_id = $1 and channel = 'email' and metadata->>'voicemail_message_id' = $2`, [a.orgId, m.id]);
      return rows[0];
    });
    expect(email.body).toContain('+15005550010');
    // Mark listened: it leaves the unlistened list; the box counts its messages.
    const marked = await t.rest('PUT', `/v1/voice/voicemail/${box}/messages/${m.id}`, { key: a.testKey, body: { listened: true } });
    expect(marked.body.data.listened).toBe(true);
    const unlistened = await t.rest('GET', `/v1/voice/voicemail/${box}/messages?listened=false`, { key: a.testKey });
    expect(unlistened.body.data.map((x: any) => x.id)).not.toContain(m.id);
    const boxNow = await t.rest('GET', `/v1/voice/voicemail/${box}`, { key: a.testKey });
    expect(boxNow.body.data.messages_count).toBeGreaterThanOrEqual(2);
    // The message's recording is served like a call's.
    const url = new URL(m.recording_url);
    const audio = await t.rest('GET', `${url.pathname}${url.search}`, { key: a.testKey });
    expect(audio.status).toBe(200);
    expect(audio.headers.get('x-recording-duration')).toBe('10');
  });
});

describe('voicemail boxes', () => {
  it('creates with defaults and validates fields', async () => {
    const r = await post('/v1/voice/voicemail', { name: 'Sales' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data).toMatchObject({ name: 'Sales', transcribe: true, max_duration: 120, messages_count: 0, greeting: null });
    expectError(await post('/v1/voice/voicemail', { name: 'x', notification_email: 'nope' }), 422, 'INVALID_EMAIL', 'notification_email');
    expectError(await post('/v1/voice/voicemail', { name: 'x', max_duration: 1 }), 422, 'VALIDATION_ERROR', 'max_duration');
    expectError(await t.rest('GET', `/v1/voice/voicemail/${r.body.data.id}/messages`, { key: b.testKey }), 404, 'NOT_FOUND');
    const gql = await t.gql('{ voicemailBoxes(first: 1) { edges { node { id name } } } }', {}, { key: a.testKey });
    expect(gql.body.data.voicemailBoxes.edges[0].node).toEqual({ id: r.body.data.id, name: 'Sales' });
  });
});

describe('conferences', () => {
  it('creates waiting with a PIN and the account\'s dial-in number; participants join as call legs; capacity; end hangs up every leg', async () => {
    const r = await post('/v1/voice/conferences', { name: 'Standup', max_participants: 2, webhook_url: `${receiver.url}/conf` });
    expect(r.status, r.text).toBe(201);
    const conf = r.body.data;
    expect(conf).toMatchObject({ name: 'Standup', status: 'waiting', dial_in_number: from, max_participants: 2, record: false });
    expect(conf.pin).toMatch(/^\d{6}$/);
    const p1 = await post(`/v1/voice/conferences/${conf.id}/participants`, { number: '+14155550121' });
    expect(p1.status, p1.text).toBe(201);
    expect(p1.body.data).toMatchObject({ status: 'dialing', muted: false, number: '+14155550121' });
    await post(`/v1/voice/conferences/${conf.id}/participants`, { number: '+14155550122', muted: true });
    expectError(await post(`/v1/voice/conferences/${conf.id}/participants`, { number: '+14155550123' }), 409, 'CONFLICT');
    const started = await eventually('in_progress', async () => {
      const c = (await t.rest('GET', `/v1/voice/conferences/${conf.id}`, { key: a.testKey })).body.data;
      return c.status === 'in_progress' && c.participants_count === 2 ? c : undefined;
    });
    expect(started.started_at).not.toBeNull();
    const leg = await t.rest('GET', `/v1/voice/calls/${p1.body.data.call_id}`, { key: a.testKey });
    expect(leg.body.data).toMatchObject({ conference_id: conf.id, from, to: '+14155550121', status: 'in_progress' });
    // Removing a participant hangs up their leg.
    expect((await t.rest('DELETE', `/v1/voice/conferences/${conf.id}/participants/${p1.body.data.id}`, { key: a.testKey })).status).toBe(204);
    const parts = await t.rest('GET', `/v1/voice/conferences/${conf.id}/participants`, { key: a.testKey });
    expect(parts.body.data.map((p: any) => p.status).sort()).toEqual(['joined', 'left']);
    const ended = await post(`/v1/voice/conferences/${conf.id}/end`, {});
    expect(ended.body.data).toMatchObject({ status: 'ended', participants_count: 0 });
    expectError(await post(`/v1/voice/conferences/${conf.id}/end`, {}), 409, 'CONFLICT');
    expectError(await post(`/v1/voice/conferences/${conf.id}/participants`, { number: '+14155550124' }), 409, 'CONFLICT');
    const { rows } = await t.db.query(`select status from calls where conference_id = $1`, [conf.id]);
    expect(rows.map((x) => x.status)).toEqual(['completed', 'completed']);
    const events = await t.db.query(`select type from events where resource_id = $1 order by sequence`, [conf.id]);
    expect(events.rows.map((e) => e.type)).toEqual([
      'conference.started', 'conference.participant_joined', 'conference.participant_joined', 'conference.participant_left', 'conference.participant_left', 'conference.ended',
    ]);
  });

  it('a test account without voice numbers gets a sandbox pool dial-in number; a dial-in number it does not own is refused', async () => {
    const r = await post('/v1/voice/conferences', { name: 'Pool' }, b.testKey);
    expect(r.status, r.text).toBe(201);
    expect(r.body.data.dial_in_number).toMatch(/^\+150055501\d\d$/);
    expectError(await post('/v1/voice/conferences', { name: 'x', dial_in_number: '+14155550199' }), 422, 'VALIDATION_ERROR', 'dial_in_number');
    expectError(await post('/v1/voice/conferences', { name: 'x', max_participants: 1 }), 422, 'VALIDATION_ERROR', 'max_participants');
    expectError(await post('/v1/voice/conferences', { name: 'x' }, b.liveKey), 503, 'CHANNEL_UNAVAILABLE');
  });
});
