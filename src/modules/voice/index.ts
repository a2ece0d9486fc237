/**
 * Voice: outbound calls with a live lifecycle (sandbox gateway in test mode), SIP trunks, IVR
 * flows, conferences and voicemail. Needs numbers' voice-capable numbers (`voiceNumbers`) and
 * messaging's sender (voicemail notification emails); uses the agents context when installed
 * (`voiceAgents`, optional: without it every agent_id is unknown). With the HIPAA module (`phi`,
 * optional) PHI metadata and transcriptions are sealed, recordings served by the PHI access rules,
 * and both purged after the retention period (voice.phi.ts, voice.retention.ts). With billing
 * (`credits`, optional) live calls are paid by the minute from the credit balance (voice.billing.ts).
 * With contacts (`callConsent`, optional) a number whose contact opted out of voice is not called.
 */
import { readFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { SipVoiceGateway } from '../../providers/voice/sip/gateway.ts';
import { SandboxTranscriber, SandboxVoiceGateway } from '../../providers/voice/sandbox.ts';
import { sandboxRecording } from '../../providers/voice/audio.ts';
import { RtpMedia } from '../../providers/voice/media/live.ts';
import { EspeakTts } from '../../providers/voice/media/tts.ts';
import { PocketsphinxStt } from '../../providers/voice/media/stt.ts';
import { wavSeconds } from '../../providers/voice/media/wav.ts';
import { defineModule } from '../manifest.ts';
import { colonKeyedJobId } from '../../platform/jobs/jobIds.ts';
import { voiceConfig } from './voice.config.ts';
import { PhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { Call, Conference, ConferenceParticipant, IvrFlow, SipTrunk, VoicemailBox, VoicemailMessage } from './voice.entities.ts';
import { assembleCalls } from './calls/assembly.ts';
import { GATEWAY_EVENT_JOB } from './calls/gateway.ts';
import { CallDialing } from './calls/dialing.ts';
import { SandboxTimeline } from './sandbox/timeline.ts';
import type { GatewayEvent } from '../../providers/voice/types.ts';
import { ConferencesService } from './conferences/conferences.service.ts';
import { SetupService } from './setup/setup.service.ts';
import { VoicemailService } from './voicemail/voicemail.service.ts';
import { RecordingLinks, RecordingReader } from './recordings/recordings.ts';
import { registerVoiceJobs } from './voice.jobs.ts';
import { voiceRoutes } from './voice.rest.ts';
import type { VoiceServices } from './voice.operations.ts';
import { VOICE_EVENTS } from './voice.ports.ts';
import { VoicePhi } from './voice.phi.ts';
import { VoiceRetention } from './voice.retention.ts';
import { CallBilling, callCharges } from './voice.billing.ts';
import { voiceRouteTargetsPort } from './numbers.port.ts';
import './voice.graphql.ts';

/** Voice's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { call: 'Call', trunk: 'SipTrunk', ivr: 'IvrFlow', conf: 'Conference', vmail: 'VoicemailBox', vmsg: 'VoicemailMessage', cpt: 'ConferenceParticipant' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Voice's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  CALL_FAILED: { status: 500, message: 'Outbound call could not be placed' },
  SIP_ERROR: { status: 502, message: 'SIP error from trunk' },
  VOICE_GATEWAY_ERROR: { status: 502, message: 'Voice gateway error' },
  CALL_NOT_FOUND: { status: 404, message: 'Call not found or expired' },
  CALL_ALREADY_ENDED: { status: 409, message: 'Call has already ended' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const voiceModule = defineModule({
  name: 'voice',
  config: voiceConfig,
  entities: [Call, SipTrunk, IvrFlow, Conference, ConferenceParticipant, VoicemailBox, VoicemailMessage],
  ids,
  errors,
  events: VOICE_EVENTS,
  requires: ['voiceNumbers', 'messageSender'],
  optional: ['voiceAgents', 'phi', 'planQuotas', 'credits', 'callConsent'],
  create: (p, ports): VoiceServices => {
    const phi = new VoicePhi(ports.optional('phi'));
    const agents = ports.optional('voiceAgents');
    // The sandbox's steps and test calls' placements: rows of its timeline, claimed by one ticker per instance.
    const timeline = new SandboxTimeline({
      pool: p.pool, log: p.log, tickMs: p.config.voice.sandbox.tickMs, listen: { url: p.databaseUrl, connectTimeoutMs: p.config.dbConnectTimeoutMs },
    });
    const sandbox = new SandboxVoiceGateway({ timings: p.config.voice.sandbox, sink: timeline });
    // One job per (call, event seq), so a repeated placement schedules nothing new.
    const sink = { schedule: async (event: GatewayEvent, delayMs: number) => { await p.jobs.enqueueBatched(GATEWAY_EVENT_JOB, event, { startAfter: new Date(Date.now() + delayMs), id: colonKeyedJobId(event.callId, event.seq) }); } };
    const sipConfig = p.config.voice.sip;
    const mediaConfig = p.config.voice.media;
    const recordingsDir = path.join(mediaConfig.dir, 'recordings');
    const log = (level: 'warn' | 'info', message: string, detail?: Record<string, unknown>) => p.log[level](detail ?? {}, message);
    // Live calls' audio: RTP on a media thread started with the first live call (test mode never starts it).
    const media = new RtpMedia({ portMin: mediaConfig.portMin, portMax: mediaConfig.portMax, tts: new EspeakTts({ cacheDir: path.join(mediaConfig.dir, 'tts') }), log });
    // Live calls: real SIP signalling on the organization's trunk (providers/voice/sip).
    const sip = new SipVoiceGateway({
      sink, bindHost: sipConfig.bindHost, port: sipConfig.port, publicHost: sipConfig.publicHost, limits: sipConfig.limits,
      // Where SIP may go: the webhooks' outbound address policy (WEBHOOKS_ALLOW_LOOPBACK lets 127.0.0.1 through).
      policy: { allowLoopback: p.config.allowLoopback },
      tlsCa: sipConfig.tlsCaFile ? readFileSync(sipConfig.tlsCaFile, 'utf8') : undefined,
      log, media: {
        port: media, inactivityMs: mediaConfig.inactivitySeconds * 1000, recordingsDir,
        voicemailSilence: { thresholdDbfs: mediaConfig.voicemailSilenceDbfs, ms: mediaConfig.voicemailSilenceMs, initialMs: mediaConfig.voicemailInitialSilenceMs },
        // Voice agents hear the caller: utterances found by voice activity detection, read by speech to text
        // (its own decoders: a voicemail being transcribed does not hold up a caller waiting for an answer).
        agents: {
          stt: new PocketsphinxStt({ modelDir: mediaConfig.sttModelDir, tmpDir: mediaConfig.dir, concurrency: 2 }),
          listen: { thresholdDbfs: mediaConfig.agentVadDbfs, startMs: mediaConfig.agentVadStartMs, hangoverMs: mediaConfig.agentVadHangoverMs, maxMs: mediaConfig.agentMaxUtteranceSeconds * 1000 },
        },
      },
    });
    void mkdir(recordingsDir, { recursive: true }).catch((e: Error) => log('warn', `voice: the recordings directory ${recordingsDir} could not be made: ${e.message}`));
    const gateways = { forMode: (mode: 'live' | 'test') => (mode === 'test' ? sandbox : sip), transcriber: new SandboxTranscriber() };
    const links = new RecordingLinks({ appSecret: p.config.appSecret, baseUrl: p.config.publicBaseUrl, ttlSeconds: p.config.voice.recordingUrlTtlSeconds });
    const voicemail: VoicemailService = new VoicemailService({
      orm: p.orm, clock: p.clock, cursors: p.cursors, jobs: p.jobs, transcriber: gateways.transcriber, links,
      checkUrl: (v, f): string | null => routes.checkUrl(v, f), mail: ports('messageSender'), phi,
      // Live calls' messages: their recordings read by speech to text (pocketsphinx, offline).
      speech: {
        stt: new PocketsphinxStt({ modelDir: mediaConfig.sttModelDir, tmpDir: mediaConfig.dir }),
        file: (id) => path.join(recordingsDir, `${id}.wav`), log: (message, detail) => log('warn', message, detail),
      },
    });
    const setup = new SetupService({ orm: p.orm, clock: p.clock, config: p.config, cursors: p.cursors, agents });
    const { calls, placing, gateway, lifecycle, routes, lookups, inbound, locks, rows } = assembleCalls({
      orm: p.orm, pool: p.pool, clock: p.clock, config: p.config, cursors: p.cursors, jobs: p.jobs, gateways, numbers: ports('voiceNumbers'), agents, links, voicemail, phi,
      quotas: ports.optional('planQuotas'), trunk: (scope) => setup.callTrunk(scope), billing: new CallBilling(ports.optional('credits')), consent: ports.optional('callConsent'), timeline, live: (notices) => p.bus.deliverLocal(notices), watched: (callId) => p.bus.watching(callId),
      takes: p.limiter.store.rider?.(p.pool), log: (message, detail) => log('info', message, detail),
    });
    timeline.bind(gateway);
    sip.onInbound((offer) => inbound.route(offer));
    const recordings = new RecordingReader({
      links, now: () => p.clock.now(), render: sandboxRecording, phi,
      stored: async (id) => {
        if (!/^[A-Za-z0-9_-]+$/.test(id)) return undefined;
        const audio = await readFile(path.join(recordingsDir, `${id}.wav`)).catch(() => undefined);
        return audio ? { audio, seconds: wavSeconds(audio) } : undefined;
      },
      find: async (tenant, id) => {
        if (id.startsWith('vmsg_')) {
          const m = await voicemail.findMessage(tenant, id);
          return m && !m.contentPurgedAt ? { seconds: m.durationSeconds } : null;
        }
        if (!id.startsWith('call_')) return calls.scriptRecording(tenant, id);
        const call = await calls.findCall(tenant, id);
        return call && call.recordingSeconds != null ? { seconds: call.recordingSeconds } : null;
      },
    });
    const conferences = new ConferencesService({ orm: p.orm, clock: p.clock, cursors: p.cursors, calls, lifecycle, routes, lookups, placing });
    // A call script's second legs and conference joins (the Twilio surface's <Dial>).
    const callDialing = new CallDialing({ placing, lookups, lifecycle, locks, rows, conferences, jobs: p.jobs });
    return {
      calls, callPlacing: placing, callGateway: gateway, callDialing, voicemail, recordings, voiceRetention: new VoiceRetention(new PhiHousekeeping({ pool: p.pool, clock: p.clock, phi: ports.optional('phi'), batchSize: p.config.phiBatchSize })),
      setup, sipGateway: sip, sandboxTimeline: timeline,
      conferences,
    };
  },
  provides: (_s, p) => ({
    callCharges: callCharges(p.pool),
    voiceRouteTargets: voiceRouteTargetsPort(p.orm),
  }),
  routes: voiceRoutes,
  jobs: (registry, s, p) => registerVoiceJobs(registry, { gateway: s.callGateway, dialing: s.callDialing, voicemail: s.voicemail, pool: p.pool, retention: s.voiceRetention }),
  workers: (s) => ({ start: () => s.sandboxTimeline.run(), stop: () => s.sandboxTimeline.stop() }),
  close: (s) => s.sipGateway.close(),
});
