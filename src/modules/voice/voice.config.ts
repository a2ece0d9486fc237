/** Voice's settings (`config.voice`); documented in docs/configuration.md. */
import os from 'node:os';
import path from 'node:path';
import type { EnvReader } from '../../platform/env.ts';

export function voiceConfig(env: EnvReader) {
  return {
    /** Lifetime of a signed recording link. */
    recordingUrlTtlSeconds: env.int('VOICE_RECORDING_URL_TTL_SECONDS', 3600, 'lifetime of a signed recording link (`recording_url`, built on `PUBLIC_BASE_URL`)', { min: 60 }),
    /** The live SIP gateway's signalling address (UDP and TCP on one port; 0: any free port). */
    sip: {
      bindHost: env.string('SIP_BIND_HOST', 'address the live SIP gateway binds for signalling (UDP and TCP); the loopback default reaches no trunk elsewhere: set the interface\'s address (or `0.0.0.0`) and `SIP_PUBLIC_HOST` to place live calls', '127.0.0.1'),
      port: env.int('SIP_PORT', 0, 'port of the live SIP gateway (UDP and TCP; `0`: any free port, chosen when the first live call is placed)', { max: 65_535 }),
      publicHost: env.string('SIP_PUBLIC_HOST', 'address written in Via and Contact, where the trunk sends responses and BYEs; unset → `SIP_BIND_HOST`, or this host\'s first external IPv4'),
      tlsCaFile: env.string('SIP_TLS_CA_FILE', 'PEM file of CA certificates trusted for TLS trunks besides the system\'s'),
      /** What the signalling listener accepts (providers/voice/sip/transport.ts). */
      limits: {
        maxMessageBytes: env.int('SIP_MAX_MESSAGE_BYTES', 65_535, 'largest SIP message (start line, headers and body) the gateway reads, on UDP or TCP; a TCP request over it is answered 513 and its connection closed (headers alone: at most 16 KiB and 256)', { min: 1024, max: 1_048_576 }),
        idleTimeoutMs: env.int('SIP_TCP_IDLE_TIMEOUT_MS', 60_000, 'a TCP connection accepted by the SIP gateway is closed when it completes no message for this long (idle, or sending too slowly)', { min: 50 }),
        maxConnectionsPerAddress: env.int('SIP_TCP_MAX_CONNECTIONS_PER_ADDRESS', 16, 'TCP connections the SIP gateway accepts from one source address at a time (more are closed at once)', { min: 1 }),
        maxConnections: env.int('SIP_TCP_MAX_CONNECTIONS', 1024, 'TCP connections the SIP gateway accepts at a time, from all sources', { min: 1 }),
      },
    },
    /** Live calls' audio (providers/voice/media): RTP ports, silence limit, where prompts and recordings go. */
    media: {
      portMin: env.int('VOICE_MEDIA_PORT_MIN', 40_000, 'live calls\' audio: lowest RTP port (each call takes an even port and the odd one above it for RTCP, on `SIP_BIND_HOST`)', { min: 1024, max: 65_534 }),
      portMax: env.int('VOICE_MEDIA_PORT_MAX', 49_999, 'live calls\' audio: highest RTP port', { min: 1025, max: 65_535 }),
      inactivitySeconds: env.int('VOICE_MEDIA_INACTIVITY_SECONDS', 30, 'a live call whose far end sends no audio (RTP) for this long is hung up (`end_reason: "media_timeout"`)', { min: 1 }),
      /** Live voicemail: the caller's recording ends after silenceMs without a frame at or above silenceDbfs. */
      voicemailSilenceMs: env.int('VOICE_VOICEMAIL_SILENCE_MS', 3000, 'live calls\' voicemail: the recording ends once the caller, having spoken, has been silent this long (since the last voiced 20 ms frame); the message keeps only the caller\'s voice (0.1 s either side)', { min: 500, max: 60_000 }),
      voicemailInitialSilenceMs: env.int('VOICE_VOICEMAIL_INITIAL_SILENCE_MS', 10_000, 'live calls\' voicemail: the recording ends when the caller has not started speaking this long after the beep (no message is left)', { min: 500, max: 120_000 }),
      voicemailSilenceDbfs: env.int('VOICE_VOICEMAIL_SILENCE_DBFS', -40, 'live calls\' voicemail: a 20 ms frame from the caller whose RMS is below this (dB of full scale) is silence', { min: -90, max: -1 }),
      /** Voice agents on live calls: the caller's utterance ends after agentHangoverMs without a frame at or above agentVadDbfs. */
      agentVadDbfs: env.int('VOICE_AGENT_VAD_DBFS', -40, 'voice agents on live calls: a 20 ms frame from the caller whose RMS is at or above this (dB of full scale) is voice (voice activity detection)', { min: -90, max: -1 }),
      agentVadStartMs: env.int('VOICE_AGENT_VAD_START_MS', 100, 'voice agents on live calls: the caller has begun an utterance after this much voice in a row (what the agent says stops then: barge-in)', { min: 20, max: 2000 }),
      agentVadHangoverMs: env.int('VOICE_AGENT_VAD_HANGOVER_MS', 700, 'voice agents on live calls: the caller\'s utterance has ended after this much silence (then it is transcribed and answered)', { min: 100, max: 10_000 }),
      agentMaxUtteranceSeconds: env.int('VOICE_AGENT_MAX_UTTERANCE_SECONDS', 30, 'voice agents on live calls: an utterance longer than this is cut and answered as it is', { min: 1, max: 300 }),
      /** Speech to text (voicemail transcription of live calls): pocketsphinx's model folder. */
      sttModelDir: env.string('VOICE_STT_MODEL_DIR', 'live calls\' voicemail transcription and voice agents\' hearing (pocketsphinx, offline): the model folder, holding `en-us/`, `en-us.lm.bin` and `cmudict-en-us.dict` (Debian\'s `pocketsphinx-en-us`)', '/usr/share/pocketsphinx/model/en-us'),
      dir: env.string('VOICE_MEDIA_DIR', 'live calls\' spoken prompts (text-to-speech cache, `tts/`) and recordings (`recordings/<call id>.wav`, served through `recording_url`); keep it on persistent storage in production', path.join(os.tmpdir(), 'omnichannel-voice')),
    },
    /** Sandbox calls: ringing after ringMs, answered answerMs later; magic no-answer numbers give up after noAnswerMs of ringing. */
    sandbox: {
      ringMs: env.int('SANDBOX_CALL_RING_MS', 1000, 'sandbox calls: initiated → ringing after this (see Voice)'),
      answerMs: env.int('SANDBOX_CALL_ANSWER_MS', 2000, 'sandbox calls: ringing → answered after this'),
      noAnswerMs: env.int('SANDBOX_CALL_NO_ANSWER_MS', 30_000, 'sandbox calls: the no-answer number gives up after this much ringing'),
      tickMs: env.int('SANDBOX_CALL_TICK_MS', 100, 'sandbox calls: how often each instance running the workers looks for due steps of test calls (steps this instance scheduled, or that an instance without workers wrote and announced, wake it when due)', { min: 10 }),
    },
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { voice: ReturnType<typeof voiceConfig> }
}
