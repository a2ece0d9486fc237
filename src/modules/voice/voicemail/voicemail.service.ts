/**
 * Voicemail boxes and their messages. A message is deposited by a call (an IVR's voicemail
 * action or fallback, or a caller who leaves a message) inside the call's transaction: it is
 * transcribed (transcription adapter), counted on the box, announced by `voicemail.received`
 * (with the box's webhook_url, so the webhooks fan-out sends the signed callback), and the box's
 * notification_email gets an email through messaging (a job after the commit).
 *
 * A live call's message has its audio (the gateway recorded it under the message's id): with
 * `transcribe` it is stored untranscribed and a job after the commit runs the speech-to-text
 * adapter on the recording (never inside the call's transaction: a minute of audio takes seconds),
 * stores the text (sealed in HIPAA mode) and only then announces it and sends the email.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../../platform/clock.ts';
import { ServiceError, notFound } from '../../../platform/errors.ts';
import { newId } from '../../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../../platform/pagination.ts';
import { emitEvent } from '../../../platform/events/events.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import type { Transcriber } from '../../../providers/voice/types.ts';
import type { SpeechToText } from '../../../providers/voice/media/stt.ts';
import type { MessageSenderPort } from '../../messaging/messaging.ports.ts';
import { VoicemailBox, VoicemailMessage, type Call } from '../voice.entities.ts';
import { VOICEMAIL_MAX_DURATION, type CreateVoicemailInput } from '../voice.schemas.ts';
import type { RecordingLinks } from '../recordings/recordings.ts';
import { openVoicemail, sealTranscription, type VoicePhi } from '../voice.phi.ts';

export const VOICEMAIL_NOTIFY_JOB = 'voice.voicemail-notify';
export const VOICEMAIL_TRANSCRIBE_JOB = 'voice.voicemail-transcribe';
export type VoicemailNotify = { organizationId: string; mode: 'live' | 'test'; messageId: string };
/** What a live call's voicemail greeting says when its box has none. */
export const DEFAULT_GREETING = 'Please leave a message after the tone. Press the pound key when you are done.';
/** Recorded audio and the speech-to-text adapter that reads it (live calls' messages). */
export type VoicemailSpeech = { stt: SpeechToText; file: (recordingId: string) => string; log: (message: string, detail: Record<string, unknown>) => void };
export type VoicemailMessageView = VoicemailMessage & { recordingUrl: string };

export class VoicemailService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #transcriber: Transcriber;
  readonly #links: RecordingLinks;
  readonly #checkUrl: (value: string | null | undefined, field: string) => string | null;
  readonly #mail: MessageSenderPort;
  readonly #phi: VoicePhi;
  readonly #speech: VoicemailSpeech | undefined;

  constructor(deps: {
    orm: MikroORM; clock: Clock; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue'>; transcriber: Transcriber; links: RecordingLinks;
    checkUrl: (value: string | null | undefined, field: string) => string | null; mail: MessageSenderPort; phi: VoicePhi; speech?: VoicemailSpeech;
  }) {
    this.#phi = deps.phi;
    this.#speech = deps.speech;
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#transcriber = deps.transcriber;
    this.#links = deps.links;
    this.#checkUrl = deps.checkUrl;
    this.#mail = deps.mail;
  }

  async create(scope: Scope, input: CreateVoicemailInput): Promise<VoicemailBox> {
    const webhookUrl = this.#checkUrl(input.webhook_url, 'webhook_url');
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(VoicemailBox, {
      id: newId('vmail', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, greeting: input.greeting ?? null,
      transcribe: input.transcribe ?? true, maxDuration: input.max_duration ?? VOICEMAIL_MAX_DURATION.default, notificationEmail: input.notification_email ?? null,
      webhookUrl, messagesCount: 0, createdAt: now, updatedAt: now,
    }));
  }

  async get(scope: TenantRef, id: string): Promise<VoicemailBox> {
    const box = await tenantEm(this.#orm, scope).findOne(VoicemailBox, { id });
    if (!box) throw notFound('Voicemail box', id);
    return box;
  }

  list(scope: TenantRef, req: PageRequest): Promise<Page<VoicemailBox>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), VoicemailBox, scope, { list: 'voicemail_boxes' }, req);
  }

  /** HIPAA mode: transcriptions opened (and the read logged) or redacted, by the caller's PHI access. */
  async messages(scope: Scope, id: string, req: PageRequest & { listened?: boolean | null }): Promise<Page<VoicemailMessageView>> {
    await this.get(scope, id);
    const filters = { voicemail: id, listened: req.listened ?? null };
    const where: Record<string, unknown> = { voicemailId: id };
    if (req.listened !== undefined && req.listened !== null) where.listened = req.listened;
    const page = await this.#cursors.findPage(tenantEm(this.#orm, scope), VoicemailMessage, scope, { list: 'voicemail_messages', filters }, req, where);
    return { ...page, items: await this.#phi.voicemails(scope, page.items.map((m) => this.view(m)), 'voice.listVoicemailMessages') };
  }

  async markListened(scope: Scope, boxId: string, messageId: string, listened: boolean): Promise<VoicemailMessageView> {
    const now = this.#clock.now();
    const message = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const m = await tx.findOne(VoicemailMessage, { id: messageId, voicemailId: boxId });
      if (!m) throw notFound('Voicemail message', messageId);
      m.listened = listened;
      m.listenedAt = listened ? (m.listenedAt ?? now) : null;
      return m;
    });
    return (await this.#phi.voicemails(scope, [this.view(message)], 'voice.markVoicemailMessage'))[0]!;
  }

  view(m: VoicemailMessage): VoicemailMessageView {
    return Object.assign(m, { recordingUrl: this.#links.url(m, m.id, this.#clock.now()) });
  }

  async findMessage(tenant: TenantRef, id: string): Promise<VoicemailMessage | null> {
    return tenantEm(this.#orm, tenant).findOne(VoicemailMessage, { id });
  }

  /**
   * A message of `seconds` (capped by the box's max_duration) from the call's far end, in the call's
   * transaction. `recording`: a live call's message, its audio recorded under that id (the message
   * takes it); transcribed after the commit (transcribeRecorded) when the box transcribes.
   */
  async deposit(tx: EntityManager, call: Call, boxId: string, seconds: number, now: Date, recording?: string): Promise<VoicemailMessage | null> {
    const box = await tx.findOne(VoicemailBox, { id: boxId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!box) return null;
    const id = recording ?? newId('vmsg', now.getTime());
    // Who left it: the far end (an inbound call's caller, an outbound call's callee).
    const caller = call.direction === 'inbound' ? call.from : call.to;
    const duration = Math.round(Math.min(box.maxDuration, Math.max(1, seconds)));
    const later = !!recording && box.transcribe && !!this.#speech;
    const transcription = box.transcribe && !recording ? await this.#transcriber.transcribe({ messageId: id, seconds: duration, caller }) : null;
    // HIPAA mode: the transcription is stored sealed and the event carries none.
    const codec = await this.#phi.writer(call.organizationId);
    const message = tx.create(VoicemailMessage, {
      id, organizationId: call.organizationId, mode: call.mode, voicemailId: box.id, callId: call.id, caller, durationSeconds: duration,
      ...(codec ? sealTranscription(id, transcription, codec) : { transcription, phi: null }), listened: false, createdAt: now, listenedAt: null,
    });
    box.messagesCount += 1;
    box.updatedAt = now;
    const ref: VoicemailNotify = { organizationId: call.organizationId, mode: call.mode, messageId: id };
    if (later) await this.#jobs.enqueue(VOICEMAIL_TRANSCRIBE_JOB, ref, { em: tx });
    else await this.#announce(tx, box, message, transcription, !!codec, now);
    return message;
  }

  /** `voicemail.received` (the transcription only outside HIPAA mode) and the notification email's job. */
  async #announce(tx: EntityManager, box: VoicemailBox, m: VoicemailMessage, transcription: string | null, sealed: boolean, now: Date): Promise<void> {
    emitEvent(tx, m, {
      type: 'voicemail.received', resourceType: 'voicemail_message', resourceId: m.id, sequence: 1,
      data: {
        id: m.id, message_id: m.id, voicemail_id: box.id, call_id: m.callId, caller: m.caller, duration_seconds: m.durationSeconds,
        ...(sealed ? { transcription: null, transcription_redacted: true } : { transcription }),
        created_at: m.createdAt.toISOString(), ...(box.webhookUrl ? { webhook_url: box.webhookUrl } : {}),
      },
    }, now);
    if (box.notificationEmail) {
      await this.#jobs.enqueue(VOICEMAIL_NOTIFY_JOB, { organizationId: m.organizationId, mode: m.mode, messageId: m.id } satisfies VoicemailNotify, { em: tx });
    }
  }

  /**
   * The transcription job of a live call's message: the speech-to-text adapter reads its recording
   * (outside any transaction), then the text is stored (sealed in HIPAA mode) and the message
   * announced. A recording the adapter cannot read (no engine, a missing file) leaves the
   * transcription null, and the message is announced all the same.
   */
  async transcribeRecorded(tenant: TenantRef, messageId: string): Promise<void> {
    const stored = await tenantEm(this.#orm, tenant).findOne(VoicemailMessage, { id: messageId });
    if (!stored || stored.transcription !== null || stored.phi !== null || !this.#speech) return;
    let text: string | null = null;
    try {
      text = await this.#speech.stt.transcribe(this.#speech.file(messageId), { language: 'en-US' });
    } catch (e) {
      this.#speech.log(`voice: voicemail ${messageId} not transcribed: ${(e as Error).message}`, { message_id: messageId, engine: this.#speech.stt.name });
    }
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const m = await tx.findOne(VoicemailMessage, { id: messageId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!m || m.transcription !== null || m.phi !== null) return;
      const box = await tx.findOne(VoicemailBox, { id: m.voicemailId });
      const codec = await this.#phi.writer(m.organizationId);
      Object.assign(m, codec ? sealTranscription(m.id, text, codec) : { transcription: text, phi: null });
      if (box) await this.#announce(tx, box, m, text, !!codec, this.#clock.now());
    });
  }

  /** The notification job: one email per message (at least once: a job retried after the send may send again). */
  async notify(scope: Scope, messageId: string): Promise<void> {
    const em = tenantEm(this.#orm, scope);
    const stored = await em.findOne(VoicemailMessage, { id: messageId });
    if (!stored) return;
    // The email goes through messaging, which seals it in HIPAA mode.
    const codec = await this.#phi.opener(scope.organizationId, [stored.phi]);
    const m = codec ? openVoicemail(stored, codec) : stored;
    const box = await em.findOne(VoicemailBox, { id: m.voicemailId });
    if (!box?.notificationEmail) return;
    const lines = [
      `New voicemail in ${box.name} from ${m.caller} (${m.durationSeconds} s) at ${m.createdAt.toISOString()}.`,
      ...(m.transcription ? ['', `Transcription: ${m.transcription}`] : []),
      '', `Listen: ${this.#links.url(m, m.id, this.#clock.now())}`,
    ];
    try {
      await this.#mail.sendEmail(scope, { to: [box.notificationEmail], subject: `New voicemail from ${m.caller}`, text: lines.join('\n'), metadata: { voicemail_message_id: m.id } });
    } catch (e) {
      // An undeliverable address is the box's configuration, not a reason to retry for ever.
      if (!(e instanceof ServiceError)) throw e;
    }
  }
}
