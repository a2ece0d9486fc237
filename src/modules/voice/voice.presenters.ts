/** REST shapes (snake_case) of the voice resources. No shape carries a SIP password. */
import type { Conference, ConferenceParticipant, IvrFlow, SipTrunk, VoicemailBox } from './voice.entities.ts';
import type { CallView } from './calls/lifecycle.ts';
import type { VoicemailMessageView } from './voicemail/voicemail.service.ts';
import { countOptions } from './voice.states.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/**
 * `price`: what the ledger charged for the call (the minutes past the plan's included ones), an
 * integer in the smallest currency unit (cents), positive; `price_unit`: its currency code (`usd`).
 * Both null until the call ended and was charged, and for calls never charged (test mode, included minutes).
 */
export function presentCallSummary(c: CallView) {
  return {
    id: c.id, direction: c.direction, to: c.to, from: c.from, status: c.status, duration_seconds: c.durationSeconds, recording_url: c.recordingUrl,
    price: c.charge?.amount ?? null, price_unit: c.charge?.currency ?? null,
    created_at: iso(c.createdAt), ended_at: iso(c.endedAt),
  };
}

export function presentCall(c: CallView) {
  return {
    ...presentCallSummary(c),
    direction: c.direction, agent_id: c.agentId, ivr_id: c.ivrId, conference_id: c.conferenceId, record: c.record, max_duration: c.maxDuration,
    webhook_url: c.webhookUrl, metadata: c.metadata, error_code: c.errorCode, sip_code: c.sipCode, end_reason: c.endReason,
    answered_at: iso(c.answeredAt), ringing_at: iso(c.ringingAt), updated_at: iso(c.updatedAt), steps: c.steps,
  };
}

export function presentHangup(c: CallView) {
  return { id: c.id, status: c.status, ended_at: iso(c.endedAt), duration_seconds: c.durationSeconds, end_reason: c.endReason };
}

export function presentTrunk(t: SipTrunk) {
  return {
    id: t.id, name: t.name, termination_uri: t.terminationUri, origination_uris: t.originationUris, auth_username: t.authUsername,
    has_auth_password: t.authPasswordSealed != null, codecs: t.codecs, encryption: t.encryption, status: t.status,
    created_at: iso(t.createdAt), updated_at: iso(t.updatedAt),
  };
}

export function presentIvr(f: IvrFlow) {
  return {
    id: f.id, name: f.name, status: f.status, options_count: countOptions(f.menu), greeting: f.greeting, language: f.language, menu: f.menu,
    timeout_seconds: f.timeoutSeconds, max_retries: f.maxRetries, fallback_action: f.fallbackAction, fallback_target: f.fallbackTarget,
    created_at: iso(f.createdAt), updated_at: iso(f.updatedAt),
  };
}

export function presentConference(c: Conference) {
  return {
    id: c.id, name: c.name, status: c.status, pin: c.pin, dial_in_number: c.dialInNumber, max_participants: c.maxParticipants, record: c.record,
    mute_on_join: c.muteOnJoin, webhook_url: c.webhookUrl, participants_count: c.participantsCount,
    created_at: iso(c.createdAt), started_at: iso(c.startedAt), ended_at: iso(c.endedAt),
  };
}

export function presentParticipant(p: ConferenceParticipant) {
  return {
    id: p.id, conference_id: p.conferenceId, number: p.number, muted: p.muted, status: p.status, call_id: p.callId,
    created_at: iso(p.createdAt), joined_at: iso(p.joinedAt), left_at: iso(p.leftAt),
  };
}

export function presentVoicemailBox(b: VoicemailBox) {
  return {
    id: b.id, name: b.name, greeting: b.greeting, transcribe: b.transcribe, max_duration: b.maxDuration, notification_email: b.notificationEmail,
    webhook_url: b.webhookUrl, messages_count: b.messagesCount, created_at: iso(b.createdAt),
  };
}

export function presentVoicemailMessage(m: VoicemailMessageView) {
  return {
    id: m.id, voicemail_id: m.voicemailId, call_id: m.callId, caller: m.caller, duration_seconds: m.durationSeconds, transcription: m.transcription,
    recording_url: m.recordingUrl, listened: m.listened, created_at: iso(m.createdAt), listened_at: iso(m.listenedAt),
  };
}
