/**
 * `node bench/voice-agent.ts`: a voice agent's speech round trip on a live call (issue 40): the
 * caller stops speaking → the first packet of the agent's spoken answer, p50/p99 over
 * BENCH_AGENT_VOICE_TURNS (20) turns, with the shares of its stages:
 *
 *   hangover   the silence voice activity detection waits for before it calls the utterance ended
 *              (VOICE_AGENT_VAD_HANGOVER_MS, here BENCH_AGENT_VOICE_HANGOVER_MS, 700);
 *   stt        speech to text of the utterance (pocketsphinx, offline);
 *   agent      the agent's turn: the sandbox model through the AI SDK (first token
 *              BENCH_AGENT_VOICE_FIRST_TOKEN_MS, 120, as SANDBOX_LLM_FIRST_TOKEN_MS; 15 ms a chunk);
 *              the service's own work on a chat turn is the agents bench's figure (a few ms);
 *   tts        text to speech of the answer (espeak-ng), its decoding, and the media clock's next
 *              20 ms tick: until its first packet reaches the caller.
 *
 * The call is the service's own media (RtpMedia, the media thread) and conversation loop
 * (providers/voice/sip/conversation.ts, what the SIP gateway runs for an agent); the caller is an
 * RTP socket in this process that speaks an espeak-ng question (G.711 µ-law, 20 ms packets), then
 * listens: the moment its last voiced packet left and the first voiced packet of the answer came
 * are the round trip. It asks the next question as soon as the answer begins (barge-in stops it).
 * Needs espeak-ng and pocketsphinx (apt-get install -y espeak-ng pocketsphinx pocketsphinx-en-us).
 * Results: bench/results/voice-agent.json.
 */
import dgram from 'node:dgram';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCleanup, createLog, envNumber, finite, fmt, runMain, sleep, table, writeResults } from './support.ts';
import { RtpMedia } from '../src/providers/voice/media/live.ts';
import { EspeakTts } from '../src/providers/voice/media/tts.ts';
import { PocketsphinxStt } from '../src/providers/voice/media/stt.ts';
import { decodeWav } from '../src/providers/voice/media/wav.ts';
import { decodeG711, encodeG711 } from '../src/providers/voice/media/g711.ts';
import { rms } from '../src/providers/voice/media/vad.ts';
import { buildRtp, parseRtp } from '../src/providers/voice/media/rtp.ts';
import { CallConversation, type TurnTiming } from '../src/providers/voice/sip/conversation.ts';
import { SandboxLanguageModel } from '../src/providers/llm/sandbox.ts';
import { loadAi } from '../src/providers/llm/types.ts';

const TURNS = envNumber('BENCH_AGENT_VOICE_TURNS', 20, 1, true);
const HANGOVER_MS = envNumber('BENCH_AGENT_VOICE_HANGOVER_MS', 700, 100, true);
const FIRST_TOKEN_MS = envNumber('BENCH_AGENT_VOICE_FIRST_TOKEN_MS', 120, 0, true);
const QUESTIONS = [
  'What time does the store open tomorrow morning?', 'Can I change the delivery address of my order?', 'How much does the premium subscription cost?',
  'Where is the nearest pharmacy from the station?', 'Please tell me the balance of my account.',
];
const log = createLog('voice-agent');
const { onCleanup, cleanup } = createCleanup(log);
const FRAME = 160;

type Sample = { roundTripMs: number; hangoverMs: number; sttMs: number; agentMs: number; ttsMs: number; heard: string };

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(s.length * p))]! : NaN;
};

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-voice-agent-'));
  onCleanup('temp dir', async () => rmSync(dir, { recursive: true, force: true }));
  const tts = new EspeakTts({ cacheDir: path.join(dir, 'tts') });
  const stt = new PocketsphinxStt({ tmpDir: dir });
  if (!stt.available || tts.available === false) throw new Error('needs espeak-ng and pocketsphinx: apt-get install -y espeak-ng pocketsphinx pocketsphinx-en-us');
  const caller = new EspeakTts({ cacheDir: path.join(dir, 'caller'), wordsPerMinute: 150 });
  const questions = await Promise.all(QUESTIONS.map(async (q) => decodeWav(readFileSync(await caller.render({ text: q })))));
  const portMin = 30000 + 2 * Math.floor(Math.random() * 4000);
  const media = new RtpMedia({ portMin, portMax: portMin + 100, tts, log: (level, message) => log(`${level}: ${message}`) });
  onCleanup('media', () => media.close());
  const model = new SandboxLanguageModel('sandbox-1', { firstTokenMs: FIRST_TOKEN_MS, chunkMs: 15 });
  const ai = await loadAi();

  // The caller: an RTP socket sending 20 ms µ-law packets (silence, or the question being asked).
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  onCleanup('caller socket', async () => { socket.close(); });
  const call = await media.offer({ callId: 'bench-agent', address: '127.0.0.1', encryption: 'none', codecs: ['PCMU'] });
  const servicePort = Number(/^m=audio (\d+)/m.exec(call.localSdp)![1]);
  const port = socket.address().port;
  await call.accept(['v=0', 'o=- 1 1 IN IP4 127.0.0.1', 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', `m=audio ${port} RTP/AVP 0 101`, 'a=rtpmap:0 PCMU/8000', 'a=rtpmap:101 telephone-event/8000', 'a=sendrecv', ''].join('\r\n'));

  let speaking: Int16Array<ArrayBufferLike> | undefined;
  let at = 0;
  let lastVoiceSentAt = 0;
  let waiting: ((t: number) => void) | undefined;
  let seq = 0;
  let ts = 0;
  const silence: Int16Array<ArrayBufferLike> = new Int16Array(FRAME);
  const start = performance.now();
  let sent = 0;
  const pump = setInterval(() => {
    // Paced by the clock: as many packets as are due.
    const due = Math.floor((performance.now() - start) / 20);
    for (; sent < due; sent++) {
      let frame = silence;
      if (speaking) {
        frame = speaking.subarray(at, at + FRAME);
        at += FRAME;
        if (rms(frame) > 300) lastVoiceSentAt = performance.now();
        if (at >= speaking.length) speaking = undefined;
        if (frame.length < FRAME) { const f = new Int16Array(FRAME); f.set(frame); frame = f; }
      }
      socket.send(buildRtp({ payloadType: 0, marker: seq === 0, sequence: seq++ & 0xffff, timestamp: (ts += FRAME) >>> 0, ssrc: 0x1234, payload: Buffer.from(encodeG711('PCMU', frame)) }), servicePort, '127.0.0.1');
    }
  }, 5);
  onCleanup('caller pump', async () => clearInterval(pump));
  socket.on('message', (b) => {
    const p = parseRtp(b);
    if (!p || p.payloadType !== 0 || !waiting) return;
    if (rms(decodeG711('PCMU', p.payload)) < 300) return;
    const w = waiting;
    waiting = undefined;
    w(performance.now());
  });

  const timings: TurnTiming[] = [];
  const conversation = new CallConversation({
    media: call, stt, talk: {
      language: 'en-US',
      reply: async (text) => {
        const r = ai.streamText({ model, prompt: text });
        let out = '';
        for await (const d of r.textStream) out += d;
        return { text: out, ended: false };
      },
    },
    listen: { thresholdDbfs: -40, startMs: 100, hangoverMs: HANGOVER_MS, maxMs: 30_000 },
    up: () => true, log: (level, message) => log(`${level}: ${message}`), onTurn: (t) => timings.push(t),
  });
  await conversation.start();
  await sleep(500);

  const samples: Sample[] = [];
  let unanswered = 0;
  for (let i = 0; i < TURNS + 1; i++) {
    const before = timings.length;
    const answered = new Promise<number | undefined>((resolve) => {
      waiting = resolve;
      setTimeout(() => { if (waiting === resolve) { waiting = undefined; resolve(undefined); } }, 20_000);
    });
    await sleep(100); // the answer before this one has stopped (barge-in)
    speaking = questions[i % questions.length];
    at = 0;
    const firstPacket = await answered;
    const t = timings[before];
    if (firstPacket === undefined || !t) { unanswered += 1; log(`turn ${i}: no answer`); await sleep(2000); continue; }
    if (i === 0) continue; // warm-up: the first decoder start and model load
    samples.push({ roundTripMs: firstPacket - lastVoiceSentAt, hangoverMs: t.silentMs, sttMs: t.sttMs, agentMs: t.agentMs, ttsMs: firstPacket - t.answeredAt, heard: t.heard });
    log(`turn ${i}: ${fmt(firstPacket - lastVoiceSentAt, 0)} ms (heard "${t.heard}")`);
  }
  clearInterval(pump);
  await call.close();
  await media.close();

  const stages = ['roundTripMs', 'hangoverMs', 'sttMs', 'agentMs', 'ttsMs'] as const;
  const rows = [['stage', 'p50 ms', 'p99 ms', 'mean share %']];
  const meanRoundTrip = samples.reduce((n, s) => n + s.roundTripMs, 0) / Math.max(1, samples.length);
  for (const k of stages) {
    const xs = samples.map((s) => s[k]);
    const mean = xs.reduce((n, x) => n + x, 0) / Math.max(1, xs.length);
    rows.push([k === 'roundTripMs' ? 'round trip' : k.replace('Ms', ''), fmt(pct(xs, 0.5), 0), fmt(pct(xs, 0.99), 0), k === 'roundTripMs' ? '100' : fmt((100 * mean) / meanRoundTrip, 0)]);
  }
  console.log(`\nVoice agent speech round trip: caller stops speaking → first packet of the answer, ${samples.length} turns (${unanswered} unanswered; ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
  console.log(table(rows));
  const out = writeResults('voice-agent', {
    turns: samples.length, unanswered, hangoverMs: HANGOVER_MS, firstTokenMs: FIRST_TOKEN_MS,
    figures: Object.fromEntries(stages.map((k) => [k, { p50: finite(pct(samples.map((s) => s[k]), 0.5)), p99: finite(pct(samples.map((s) => s[k]), 0.99)) }])),
  });
  log(`results: ${out}`);
}

await runMain(main, log, cleanup);
