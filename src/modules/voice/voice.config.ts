/** Voice's settings (`config.voice`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function voiceConfig(env: EnvReader) {
  return {
    /** Lifetime of a signed recording link. */
    recordingUrlTtlSeconds: env.int('VOICE_RECORDING_URL_TTL_SECONDS', 3600, 'lifetime of a signed recording link (`recording_url`, built on `PUBLIC_BASE_URL`)', { min: 60 }),
    /** The live SIP gateway's signalling address (UDP and TCP on one port; 0: any free port). */
    sip: {
      bindHost: env.string('SIP_BIND_HOST', 'address the live SIP gateway binds for signalling (UDP and TCP)', '0.0.0.0'),
      port: env.int('SIP_PORT', 0, 'port of the live SIP gateway (UDP and TCP; `0`: any free port, chosen when the first live call is placed)', { max: 65_535 }),
      publicHost: env.string('SIP_PUBLIC_HOST', 'address written in Via and Contact, where the trunk sends responses and BYEs; unset → `SIP_BIND_HOST`, or this host\'s first external IPv4'),
      tlsCaFile: env.string('SIP_TLS_CA_FILE', 'PEM file of CA certificates trusted for TLS trunks besides the system\'s'),
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
