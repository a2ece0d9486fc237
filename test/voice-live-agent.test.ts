/**
 * A voice agent on a live call: baresip calls a number routed to a deployed agent, through the
 * service's SIP listener from an address the trunk's origination_uris name, and asks a question
 * rendered by espeak-ng now. The service hears it (voice activity detection), transcribes it
 * (pocketsphinx), answers through the agents' chat turn (a fake OpenAI-compatible model that looks
 * the question up with the knowledge_base tool, as a retrieval-using model would) and speaks the
 * answer (espeak-ng): the turn is on the agent's conversation with the transcribed question, and
 * what baresip heard, transcribed, holds the answer's words. Barge-in: the caller speaks over a
 * long answer, which stops well before its end.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { EspeakTts } from '../src/providers/voice/media/tts.ts';
import { PocketsphinxStt } from '../src/providers/voice/media/stt.ts';
import { decodeWav } from '../src/providers/voice/media/wav.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually } from './helpers/voice.ts';
import { concat, silence } from './helpers/audio.ts';
import { baresipCallsIn, liveMediaEnv, type MediaBaresip } from './helpers/media-sip.ts';
import { startFakeLlm, type FakeLlm } from './helpers/fakeLlm.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-live-agent-'));
const mediaDir = path.join(dir, 'media');
/** Silence before the caller speaks: the agent's greeting is spoken meanwhile. */
const LEAD_SECONDS = 5;

const SHORT_KNOWLEDGE = 'The aquarium opens every Saturday morning at nine. Admission to the aquarium costs seventeen dollars.';
const QUESTION = 'When does the aquarium open on Saturday?';
const QUESTION_WORDS = ['aquarium', 'open', 'saturday', 'when', 'does'];
const ANSWER_WORDS = ['aquarium', 'saturday', 'morning', 'seventeen', 'dollars', 'admission', 'nine', 'opens'];

const LONG_KNOWLEDGE = [
  'The planetarium was built in nineteen twenty five by the astronomical society of the city.',
  'Its dome is twenty meters wide and shows more than nine thousand stars of the northern sky.',
  'Every evening the planetarium presents a program about the planets, the moon, comets and distant galaxies.',
  'Visitors can look through the large telescope on the roof when the weather is clear.',
  'The building also holds a library of old star charts, instruments and photographs from the observatory.',
  'School classes visit the planetarium on weekday mornings, and families come on weekends.',
].join(' ');
const LONG_QUESTION = 'Tell me about the planetarium and its telescope.';
const INTERRUPTION = 'Wait, stop, I have heard enough, thank you.';

let t: TestApp;
let llm: FakeLlm;
let sip: { host: string; udpPort: number };
const baresips: MediaBaresip[] = [];
const agentLog: string[] = [];
const tts = new EspeakTts({ cacheDir: path.join(dir, 'caller-tts'), wordsPerMinute: 150 });
const stt = new PocketsphinxStt({ tmpDir: dir });

beforeAll(async () => {
  llm = await startFakeLlm();
  t = await startTestApp({
    workers: true, clock: systemClock,
    // What the service logged of the agents' turns on calls (shown when a wait fails).
    logStream: { write: (line: string) => { if (line.includes('voice agent') || line.includes('agent\'s')) agentLog.push(line.slice(0, 400)); } },
    env: liveMediaEnv(mediaDir, { LOG_LEVEL: 'info', VOICE_AGENT_VAD_HANGOVER_MS: '700', LLM_BASE_URL: llm.url, LLM_API_KEY: 'sk-fake', LLM_TIMEOUT_MS: '30000' }),
  });
  sip = await t.app.services.sipGateway.listen();
}, 60_000);
afterAll(async () => {
  await t?.close();
  await llm?.close();
  for (const b of baresips) await b.close();
});

const speech = async (text: string) => decodeWav(readFileSync(await tts.render({ text })));

/** An organization with a live trunk from 127.0.0.1 and a live number routed to a deployed live agent that knows `knowledge`. */
async function agentNumber(name: string, knowledge: string): Promise<{ org: TestOrg; number: string; agentId: string }> {
  const org = await t.createOrg('enterprise', name);
  const number = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, number]);
  const numberId = (await t.db.query('select id from phone_numbers where number = $1', [number])).rows[0].id as string;
  const trunk = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name, encryption: 'none', termination_uri: 'sip:127.0.0.1:5999', origination_uris: ['sip:127.0.0.1'] } });
  expect(trunk.status, trunk.text).toBe(201);
  const agent = await t.rest('POST', '/v1/agents', {
    key: org.liveKey,
    body: { name, type: 'conversational', model: 'fake-model', system_prompt: '[knowledge] Answer callers from the knowledge base.', channels: ['voice'], tools: [{ name: 'knowledge_base', description: 'facts' }] },
  });
  expect(agent.status, agent.text).toBe(201);
  const agentId = agent.body.data.id as string;
  const doc = await t.rest('POST', `/v1/agents/${agentId}/knowledge`, { key: org.liveKey, body: { filename: 'facts.txt', type: 'txt', content: knowledge } });
  expect(doc.status, doc.text).toBe(201);
  expect((await t.rest('POST', `/v1/agents/${agentId}/deploy`, { key: org.liveKey, body: {} })).status).toBe(200);
  const routed = await t.rest('PATCH', `/v1/numbers/${numberId}`, { key: org.liveKey, body: { agent_id: agentId } });
  expect(routed.status, routed.text).toBe(200);
  return { org, number, agentId };
}

/** baresip (its microphone `source`) calls the number; the inbound call once stored. */
async function callIn(number: string, org: TestOrg, source: Int16Array): Promise<{ baresip: MediaBaresip; call: any }> {
  const called = await baresipCallsIn({ t, org, sipPort: sip.udpPort, dir, user: '+14155550177', number, source });
  baresips.push(called.baresip);
  return called;
}

/** The agent's conversation on the call and its messages (oldest first). */
async function conversation(org: TestOrg, agentId: string, callId: string): Promise<{ id: string; messages: { role: string; content: string }[] } | undefined> {
  const list = await t.rest('GET', `/v1/agents/${agentId}/conversations`, { key: org.liveKey });
  const c = (list.body.data as any[]).find((x) => x.context?.call_id === callId);
  if (!c) return undefined;
  const m = await t.rest('GET', `/v1/agents/${agentId}/conversations/${c.id}/messages?limit=100`, { key: org.liveKey });
  const messages = (m.body.data as any[]).map((x) => ({ id: String(x.id), role: x.role as string, content: String(x.content ?? '') }));
  messages.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { id: c.id, messages };
}

/** Spans of sound (frames of 20 ms above `rms`, gaps under `gapSeconds` bridged), in seconds. */
function soundSpans(samples: Int16Array, gapSeconds = 1, level = 400): { from: number; until: number }[] {
  const spans: { from: number; until: number }[] = [];
  for (let f = 0; f * 160 < samples.length; f++) {
    let sum = 0;
    const frame = samples.subarray(f * 160, (f + 1) * 160);
    for (const s of frame) sum += s * s;
    if (Math.sqrt(sum / Math.max(1, frame.length)) < level) continue;
    const at = f * 0.02;
    const last = spans.at(-1);
    if (last && at - last.until <= gapSeconds) last.until = at + 0.02;
    else spans.push({ from: at, until: at + 0.02 });
  }
  return spans;
}

const userTurns = (c: { messages: { role: string; content: string }[] }) => c.messages.filter((m) => m.role === 'user' && m.content !== 'The call was answered.');

describe('a voice agent on a live call', () => {
  it('hears the question, answers it from its knowledge through the chat turn, and speaks the answer', async () => {
    const o = await agentNumber('agent trunk', SHORT_KNOWLEDGE);
    const question = await speech(QUESTION);
    const { baresip, call } = await callIn(o.number, o.org, concat(silence(LEAD_SECONDS), question, silence(90)));
    expect(call).toMatchObject({ direction: 'inbound', to: o.number });
    expect((await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: o.org.liveKey })).body.data.agent_id).toBe(o.agentId);

    // The question, transcribed, is a user turn of the call's conversation; the agent's answer follows it.
    const turn = await eventually('the caller\'s turn', async () => {
      const c = await conversation(o.org, o.agentId, call.id);
      const asked = c && userTurns(c)[0];
      const at = asked ? c.messages.indexOf(asked) : -1;
      return asked && c.messages[at + 1]?.role === 'assistant' ? { asked, answer: c.messages[at + 1]!, channel: c } : undefined;
    }, 180_000).catch(async (e: Error) => { throw new Error(`${e.message}; conversation: ${JSON.stringify(await conversation(o.org, o.agentId, call.id))}; service log: ${agentLog.join(' | ')}`); });
    const asked = turn.asked.content.toLowerCase();
    expect(QUESTION_WORDS.filter((w) => asked.includes(w)), `heard: ${turn.asked.content}`).not.toEqual([]);
    expect(turn.answer.content).toContain('seventeen dollars');

    // baresip hangs up when its microphone file ends; what it heard holds the spoken answer.
    await callReaches(t, o.org.liveKey, call.id, 'completed', 150_000);
    const heard = (await stt.transcribe(baresip.heard())).toLowerCase();
    expect(ANSWER_WORDS.filter((w) => heard.includes(w)), `baresip heard: ${heard}`).not.toEqual([]);
  }, 420_000);

  it('barge-in: the caller speaking over a long answer stops it, and the new utterance is heard', async () => {
    const o = await agentNumber('agent barge-in trunk', LONG_KNOWLEDGE);
    const question = await speech(LONG_QUESTION);
    const interruption = await speech(INTERRUPTION);
    // The answer as the service speaks it (its own text to speech's defaults), whole.
    const whole = decodeWav(readFileSync(await new EspeakTts({ cacheDir: path.join(dir, 'service-tts') }).render({ text: LONG_KNOWLEDGE })));
    const wholeSeconds = whole.length / 8000;
    expect(wholeSeconds).toBeGreaterThan(30);
    // The caller asks, waits while the answer is being spoken, speaks over it, then listens on.
    const askedUntil = LEAD_SECONDS + question.length / 8000;
    const WAIT = 10;
    const { baresip, call } = await callIn(o.number, o.org, concat(silence(LEAD_SECONDS), question, silence(WAIT), interruption, silence(15)));

    // The interruption is heard: a second turn of the conversation.
    const c = await eventually('the interruption\'s turn', async () => {
      const conv = await conversation(o.org, o.agentId, call.id);
      return conv && userTurns(conv).length >= 2 ? conv : undefined;
    }, 180_000).catch(async (e: Error) => { throw new Error(`${e.message}; conversation: ${JSON.stringify(await conversation(o.org, o.agentId, call.id))}; service log: ${agentLog.join(' | ')}`); });
    const [first] = userTurns(c);
    const answered = c.messages[c.messages.indexOf(first!) + 1]!;
    expect(answered.role).toBe('assistant');
    expect(answered.content).toContain('planetarium');

    await callReaches(t, o.org.liveKey, call.id, 'completed', 60_000);
    // What baresip heard after the question: the answer, cut short, then (after a pause) the reply to the interruption.
    const spans = soundSpans(decodeWav(readFileSync(baresip.heard())));
    const answer = spans.find((s) => s.from > askedUntil);
    expect(answer, `spans: ${JSON.stringify(spans)}`).toBeDefined();
    const playedSeconds = answer!.until - answer!.from;
    expect(playedSeconds, `spans: ${JSON.stringify(spans)}`).toBeGreaterThan(1);
    // Stopped well before its end: less than half of the whole answer was played.
    expect(playedSeconds, `played ${playedSeconds} s of ${wholeSeconds} s`).toBeLessThan(wholeSeconds / 2);
  }, 420_000);
});
