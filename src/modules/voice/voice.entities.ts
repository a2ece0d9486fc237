/**
 * Voice context: calls (with their IVR progress and step log), SIP trunks, IVR flows, conferences
 * with their participants, voicemail boxes and their messages. Every row is tenant-scoped
 * (organization + mode) like every data row of the service.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';
import type { CallStatus, CallStep, IvrAction, IvrMenu, IvrState } from './voice.states.ts';

export const Call = defineEntity({
  name: 'Call',
  tableName: 'calls',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    direction: p.string().$type<'outbound' | 'inbound'>(),
    to: p.string(),
    from: p.string(),
    agentId: p.string().nullable(),
    ivrId: p.string().nullable(),
    /** Set when the call is a conference leg. */
    conferenceId: p.string().nullable(),
    status: p.string().$type<CallStatus>(),
    record: p.boolean(),
    maxDuration: p.integer(),
    webhookUrl: p.string().nullable(),
    metadata: p.json<Record<string, unknown>>(),
    durationSeconds: p.integer().nullable(),
    /** Seconds of recorded audio (null: no recording). */
    recordingSeconds: p.integer().nullable(),
    gateway: p.string(),
    gatewayReference: p.string().nullable(),
    /** The last gateway event applied (events carry a per-call sequence and apply in order). */
    gatewaySeq: p.integer(),
    errorCode: p.string().nullable(),
    sipCode: p.integer().nullable(),
    /** Live calls paid from credits: the reservation its billed minutes are captured from (voice.billing.ts). */
    creditReservationId: p.string().nullable(),
    /** Minutes taken from the plan's included voice minutes when the call was placed, and that pool's period. */
    poolMinutes: p.integer(),
    poolPeriod: p.datetime().nullable(),
    /** What ended the call: hangup (API), remote, max_duration, ivr, gateway. */
    endReason: p.string().nullable(),
    ivrState: p.json<IvrState>().nullable(),
    /** Every status change and IVR step, in order. */
    steps: p.json<CallStep[]>(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    ringingAt: p.datetime().nullable(),
    answeredAt: p.datetime().nullable(),
    endedAt: p.datetime().nullable(),
    /** HIPAA mode: the PHI metadata keys, sealed (voice.phi.ts); `metadata` then holds the others. */
    phi: p.text().nullable(),
    /** Set when HIPAA retention deleted the recording and the PHI metadata. */
    contentPurgedAt: p.datetime().nullable(),
  },
});
export type Call = InferEntity<typeof Call>;

export const SipTrunk = defineEntity({
  name: 'SipTrunk',
  tableName: 'sip_trunks',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    terminationUri: p.string(),
    originationUris: p.json<string[]>(),
    authUsername: p.string().nullable(),
    /** Sealed (platform/crypto/seal.ts); never returned. */
    authPasswordSealed: p.string().nullable(),
    codecs: p.json<string[]>(),
    encryption: p.string().$type<'tls_srtp' | 'tls' | 'none'>(),
    status: p.string().$type<'active'>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type SipTrunk = InferEntity<typeof SipTrunk>;

export const IvrFlow = defineEntity({
  name: 'IvrFlow',
  tableName: 'ivr_flows',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    greeting: p.string(),
    language: p.string(),
    menu: p.json<IvrMenu>(),
    timeoutSeconds: p.integer(),
    maxRetries: p.integer(),
    fallbackAction: p.string().$type<Extract<IvrAction, 'voicemail' | 'transfer_number' | 'hangup'>>(),
    fallbackTarget: p.string().nullable(),
    status: p.string().$type<'active'>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type IvrFlow = InferEntity<typeof IvrFlow>;

export const Conference = defineEntity({
  name: 'Conference',
  tableName: 'conferences',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    status: p.string().$type<'waiting' | 'in_progress' | 'ended'>(),
    pin: p.string(),
    dialInNumber: p.string(),
    maxParticipants: p.integer(),
    record: p.boolean(),
    muteOnJoin: p.boolean(),
    webhookUrl: p.string().nullable(),
    participantsCount: p.integer(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    startedAt: p.datetime().nullable(),
    endedAt: p.datetime().nullable(),
  },
});
export type Conference = InferEntity<typeof Conference>;

export const ConferenceParticipant = defineEntity({
  name: 'ConferenceParticipant',
  tableName: 'conference_participants',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    conferenceId: p.string(),
    number: p.string(),
    muted: p.boolean(),
    /** The call leg that dialled the number in. */
    callId: p.string(),
    status: p.string().$type<'dialing' | 'joined' | 'left'>(),
    createdAt: p.datetime(),
    joinedAt: p.datetime().nullable(),
    leftAt: p.datetime().nullable(),
  },
});
export type ConferenceParticipant = InferEntity<typeof ConferenceParticipant>;

export const VoicemailBox = defineEntity({
  name: 'VoicemailBox',
  tableName: 'voicemail_boxes',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    greeting: p.string().nullable(),
    transcribe: p.boolean(),
    maxDuration: p.integer(),
    notificationEmail: p.string().nullable(),
    webhookUrl: p.string().nullable(),
    messagesCount: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type VoicemailBox = InferEntity<typeof VoicemailBox>;

export const VoicemailMessage = defineEntity({
  name: 'VoicemailMessage',
  tableName: 'voicemail_messages',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    voicemailId: p.string(),
    callId: p.string().nullable(),
    caller: p.string(),
    durationSeconds: p.integer(),
    transcription: p.string().nullable(),
    listened: p.boolean(),
    createdAt: p.datetime(),
    listenedAt: p.datetime().nullable(),
    /** HIPAA mode: the transcription, sealed (voice.phi.ts); `transcription` then holds null. */
    phi: p.text().nullable(),
    /** Set when HIPAA retention deleted the recording and the transcription. */
    contentPurgedAt: p.datetime().nullable(),
  },
});
export type VoicemailMessage = InferEntity<typeof VoicemailMessage>;
