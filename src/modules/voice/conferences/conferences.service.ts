/**
 * Conferences: a room with a PIN and a dial-in number, and participants dialled in as call legs
 * (a Call with `conference_id`). The room moves waiting → in_progress when the first participant
 * joins (their leg is answered) → ended (POST …/end, which hangs up every leg). Over
 * max_participants → 409 CONFLICT. Changes emit `conference.*` events with the room's webhook_url.
 */
import { randomInt } from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../../platform/clock.ts';
import { ServiceError, notFound } from '../../../platform/errors.ts';
import { listConfigured } from '../../../platform/configured.ts';
import { newId } from '../../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../../platform/pagination.ts';
import { emitEvent, type EventType } from '../../../platform/events/events.ts';
import { Call, Conference, ConferenceParticipant } from '../voice.entities.ts';
import type { CallsService } from '../calls/calls.service.ts';
import type { CallLifecycle, DialRefusal, JoinOrder } from '../calls/lifecycle.ts';
import type { CallRoutes } from '../calls/routes.ts';
import type { CallLookupReads } from '../placing/lookups.ts';
import type { CallPlacing } from '../placing/placing.service.ts';
import { CALL_MAX_DURATION, CONFERENCE_MAX_PARTICIPANTS, type AddParticipantInput, type CreateConferenceInput } from '../voice.schemas.ts';
import { isFinal } from '../voice.states.ts';

/** Test-mode dial-in numbers when the organization owns no voice number: +1 500 555 01xx. */
export function sandboxDialIn(conferenceId: string): string {
  let h = 0;
  for (const c of conferenceId) h = (h * 31 + c.charCodeAt(0)) % 100;
  return `+15005550${String(100 + h).slice(1).padStart(3, '1')}`;
}

const PIN_PROMPT = 'Please enter the conference PIN, then press pound.';
const PIN_ATTEMPTS = 3;

export class ConferencesService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #calls: CallsService;
  readonly #lifecycle: CallLifecycle;
  readonly #routes: CallRoutes;
  readonly #lookups: CallLookupReads;
  readonly #placing: CallPlacing;

  /** Installs the legs' hooks on the lifecycle: a leg answered joins its room, a leg ended leaves it. */
  constructor(deps: {
    orm: MikroORM; clock: Clock; cursors: CursorCodec; calls: CallsService; lifecycle: CallLifecycle; routes: CallRoutes; lookups: CallLookupReads; placing: CallPlacing;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#calls = deps.calls;
    this.#lifecycle = deps.lifecycle;
    this.#routes = deps.routes;
    this.#lookups = deps.lookups;
    this.#placing = deps.placing;
    deps.lifecycle.installLegHooks({
      answered: (tx, call, now) => this.#joined(tx, call, now), ended: (tx, call, now) => this.#left(tx, call, now),
      pinAsked: (tx, call, now) => this.#askPin(tx, call, now), pinKey: (tx, call, key, now) => this.#pinKey(tx, call, key, now),
    });
  }

  async create(scope: Scope, input: CreateConferenceInput): Promise<Conference> {
    await this.#routes.route(scope);
    const webhookUrl = this.#routes.checkUrl(input.webhook_url, 'webhook_url');
    const id = newId('conf', this.#clock.now().getTime());
    const dialIn = await this.#dialIn(scope, id, input.dial_in_number ?? null);
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(Conference, {
      id, organizationId: scope.organizationId, mode: scope.mode, name: input.name, status: 'waiting',
      pin: input.pin ?? String(randomInt(0, 1_000_000)).padStart(6, '0'), dialInNumber: dialIn,
      maxParticipants: input.max_participants ?? CONFERENCE_MAX_PARTICIPANTS.default, record: input.record ?? false, muteOnJoin: input.mute_on_join ?? false,
      webhookUrl, participantsCount: 0, sequence: 1, createdAt: now, updatedAt: now, startedAt: null, endedAt: null,
    }));
  }

  /**
   * A call that is up joins the conference `room.name` (a call script's `<Dial><Conference>`): the
   * newest one of that name not ended, else a new one (Twilio's create-on-first-join; its dial-in
   * number as create() picks one). The call becomes its participant at once (it is answered
   * already), so it leaves the room when it ends, as a dialled-in leg does. Joins by the same name
   * are serialized (a transaction-scoped advisory lock), so two first joins make one room. In the
   * call's locked change; a full room is a refusal, not an error.
   */
  async joinByName(tx: EntityManager, call: Call, room: JoinOrder, now: Date): Promise<{ conferenceId: string; created: boolean } | { refused: DialRefusal }> {
    await tx.execute('select pg_advisory_xact_lock(hashtext(?))', [`conference:${call.organizationId}:${call.mode}:${room.name}`]);
    let conf = await tx.findOne(Conference, { name: room.name, status: { $ne: 'ended' } }, { orderBy: { id: 'desc' }, lockMode: LockMode.PESSIMISTIC_WRITE });
    let created = false;
    if (!conf) {
      const id = newId('conf', now.getTime());
      conf = tx.create(Conference, {
        id, organizationId: call.organizationId, mode: call.mode, name: room.name, status: 'waiting',
        pin: String(randomInt(0, 1_000_000)).padStart(6, '0'), dialInNumber: await this.#dialIn(call, id, null),
        maxParticipants: room.maxParticipants ?? CONFERENCE_MAX_PARTICIPANTS.default, record: false, muteOnJoin: false,
        webhookUrl: null, participantsCount: 0, sequence: 1, createdAt: now, updatedAt: now, startedAt: null, endedAt: null,
      });
      created = true;
      // Written now: its participant (and the call's conference_id, in the locked change's own statement) refer to it.
      await tx.flush();
    }
    const present = created ? 0 : await tx.count(ConferenceParticipant, { conferenceId: conf.id, status: { $in: ['dialing', 'joined'] } });
    if (present >= conf.maxParticipants) return { refused: { reason: 'full', message: `The conference ${room.name} is full (max_participants ${conf.maxParticipants})` } };
    const p = tx.create(ConferenceParticipant, {
      id: newId('cpt', now.getTime()), organizationId: call.organizationId, mode: call.mode, conferenceId: conf.id, number: call.to,
      muted: room.muted || conf.muteOnJoin, callId: call.id, status: 'dialing', createdAt: now, joinedAt: null, leftAt: null,
    });
    call.conferenceId = conf.id;
    this.#enter(tx, conf, p, call, now);
    return { conferenceId: conf.id, created };
  }

  /** The given number (must be an owned voice number), else the first owned one, else (test mode) a sandbox pool number. */
  async #dialIn(scope: TenantRef, id: string, wanted: string | null): Promise<string> {
    if (wanted) {
      const owned = await this.#lookups.voiceNumbers(scope, 'dial_in_number');
      if (!owned.includes(wanted)) {
        throw new ServiceError('VALIDATION_ERROR', `dial_in_number must be one of this account's voice-capable numbers: ${listConfigured(owned)}`, { field: 'dial_in_number', value: wanted, voice_numbers: owned });
      }
      return wanted;
    }
    try {
      return (await this.#lookups.voiceNumbers(scope, 'dial_in_number'))[0]!;
    } catch (e) {
      if (scope.mode === 'test' && e instanceof ServiceError && e.code === 'SENDER_NOT_CONFIGURED') return sandboxDialIn(id);
      throw e;
    }
  }

  async get(scope: TenantRef, id: string): Promise<Conference> {
    const c = await tenantEm(this.#orm, scope).findOne(Conference, { id });
    if (!c) throw notFound('Conference', id);
    return c;
  }

  list(scope: TenantRef, req: PageRequest): Promise<Page<Conference>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Conference, scope, { list: 'conferences' }, req);
  }

  async participants(scope: TenantRef, id: string, req: PageRequest): Promise<Page<ConferenceParticipant>> {
    await this.get(scope, id);
    return this.#cursors.findPage(tenantEm(this.#orm, scope), ConferenceParticipant, scope, { list: 'conference_participants', filters: { conference: id } }, req, { conferenceId: id });
  }

  /** Dials `number` into the room: a call leg from the dial-in number; the participant joins when it answers. */
  async addParticipant(scope: Scope, input: AddParticipantInput): Promise<ConferenceParticipant> {
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const conf = await tx.findOne(Conference, { id: input.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!conf) throw notFound('Conference', input.id);
      // Another tenant's id is 404 before anything is said about this account's trunk or the number.
      await this.#routes.route(scope);
      await this.#lookups.assertMayCall(scope, input.number);
      if (conf.status === 'ended') throw new ServiceError('CONFLICT', 'The conference has ended', { id: conf.id, status: conf.status });
      const present = await tx.count(ConferenceParticipant, { conferenceId: conf.id, status: { $in: ['dialing', 'joined'] } });
      if (present >= conf.maxParticipants) {
        throw new ServiceError('CONFLICT', `The conference is full (max_participants ${conf.maxParticipants})`, { id: conf.id, max_participants: conf.maxParticipants, participants: present });
      }
      const call = await this.#placing.placeInTx(tx, scope, {
        to: input.number, from: conf.dialInNumber, agentId: null, ivrId: null, conferenceId: conf.id, webhookUrl: null, record: conf.record,
        maxDuration: CALL_MAX_DURATION.default, metadata: { conference_id: conf.id },
      });
      const now = this.#clock.now();
      return tx.create(ConferenceParticipant, {
        id: newId('cpt', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, conferenceId: conf.id, number: input.number,
        muted: input.muted ?? conf.muteOnJoin, callId: call.id, status: 'dialing', createdAt: now, joinedAt: null, leftAt: null,
      });
    });
  }

  /** Hangs up the participant's leg; the participant has left. */
  async removeParticipant(scope: Scope, conferenceId: string, participantId: string): Promise<void> {
    const p = await tenantEm(this.#orm, scope).findOne(ConferenceParticipant, { id: participantId, conferenceId });
    if (!p) throw notFound('Participant', participantId);
    if (p.status === 'left') throw new ServiceError('CONFLICT', 'The participant has already left', { id: participantId, status: p.status });
    await this.#hangupLeg(scope, p.callId);
  }

  async end(scope: Scope, id: string): Promise<Conference> {
    const conf = await this.get(scope, id);
    if (conf.status === 'ended') throw new ServiceError('CONFLICT', 'The conference has already ended', { id, status: conf.status });
    const legs = await tenantEm(this.#orm, scope).find(ConferenceParticipant, { conferenceId: id, status: { $in: ['dialing', 'joined'] } });
    for (const p of legs) await this.#hangupLeg(scope, p.callId);
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOneOrFail(Conference, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (c.status === 'ended') return c;
      const now = this.#clock.now();
      c.status = 'ended';
      c.endedAt = now;
      this.#emit(tx, c, 'conference.ended', now);
      return c;
    });
  }

  async #hangupLeg(scope: Scope, callId: string): Promise<void> {
    try {
      await this.#calls.hangup(scope, callId);
    } catch (e) {
      // A leg that ended meanwhile has already left.
      if (!(e instanceof ServiceError && e.code === 'CALL_ALREADY_ENDED')) throw e;
    }
  }

  async #joined(tx: EntityManager, call: Call, now: Date): Promise<void> {
    const p = await tx.findOne(ConferenceParticipant, { callId: call.id });
    const conf = await tx.findOne(Conference, { id: call.conferenceId! }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!p || !conf || p.status !== 'dialing') return;
    if (conf.status === 'ended') return this.#lifecycle.end(tx, call, 'completed', 'conference_ended', now);
    this.#enter(tx, conf, p, call, now);
  }

  /** The participant is in the room: counted, the room started by its first participant, the events emitted. */
  #enter(tx: EntityManager, conf: Conference, p: ConferenceParticipant, call: Call, now: Date): void {
    p.status = 'joined';
    p.joinedAt = now;
    conf.participantsCount += 1;
    if (conf.status === 'waiting') {
      conf.status = 'in_progress';
      conf.startedAt = now;
      this.#emit(tx, conf, 'conference.started', now);
    }
    this.#emit(tx, conf, 'conference.participant_joined', now, { participant_id: p.id, number: p.number, call_id: call.id, muted: p.muted });
    // A live leg whose audio is here hears the room (everyone else, mixed) and is heard unless muted.
    this.#lifecycle.joinRoom(tx, call, conf.id, p.muted);
  }

  /** A live call to a dial-in number, answered: it is asked for the PIN (spoken), then its keys go to #pinKey. */
  #askPin(tx: EntityManager, call: Call, now: Date): void {
    this.#lifecycle.step(call, 'conference_pin_asked', now);
    this.#lifecycle.say(tx, call, { prompt: 0, texts: [PIN_PROMPT], language: 'en-US' });
  }

  /**
   * A key of a caller entering a PIN: digits gather until `#`; a PIN of a conference (not ended)
   * whose dial-in number the caller called makes it a participant (joined at once: the room's
   * audio, `conference.participant_joined`); a wrong one asks again, and PIN_ATTEMPTS wrong ones
   * end the call (end_reason `conference_pin_invalid`).
   */
  async #pinKey(tx: EntityManager, call: Call, key: string, now: Date): Promise<void> {
    const pin = call.ivrState!.pin!;
    if (key !== '#') {
      call.ivrState = { ...call.ivrState!, pin: { ...pin, entered: (pin.entered + key).slice(-16) } };
      return;
    }
    const conf = await tx.findOne(Conference, { dialInNumber: call.to, pin: pin.entered, status: { $ne: 'ended' } });
    const present = conf ? await tx.count(ConferenceParticipant, { conferenceId: conf.id, status: { $in: ['dialing', 'joined'] } }) : 0;
    if (!conf || present >= conf.maxParticipants) {
      const attempts = pin.attempts + 1;
      call.ivrState = { ...call.ivrState!, pin: { entered: '', attempts } };
      this.#lifecycle.step(call, 'conference_pin_invalid', now, { attempts, ...(conf ? { reason: 'full' } : {}) });
      if (attempts >= PIN_ATTEMPTS) return this.#lifecycle.end(tx, call, 'completed', 'conference_pin_invalid', now);
      this.#lifecycle.say(tx, call, { prompt: 0, texts: [conf ? 'The conference is full.' : 'That PIN is not valid.', PIN_PROMPT], language: 'en-US' });
      return;
    }
    call.conferenceId = conf.id;
    call.ivrState = { ...call.ivrState!, pin: undefined };
    this.#lifecycle.step(call, 'conference_pin_accepted', now, { conference_id: conf.id });
    tx.create(ConferenceParticipant, {
      id: newId('cpt', now.getTime()), organizationId: call.organizationId, mode: call.mode, conferenceId: conf.id, number: call.from,
      muted: conf.muteOnJoin, callId: call.id, status: 'dialing', createdAt: now, joinedAt: null, leftAt: null,
    });
    await tx.flush();
    await this.#joined(tx, call, now);
  }

  async #left(tx: EntityManager, call: Call, now: Date): Promise<void> {
    if (!isFinal(call.status)) return;
    await this.#leave(tx, call, now);
  }

  /** A call still up leaves the conference it is in (a call script moved on: a new document); it is no longer its leg. */
  async leave(tx: EntityManager, call: Call, now: Date): Promise<void> {
    if (!call.conferenceId) return;
    await this.#leave(tx, call, now);
    call.conferenceId = null;
  }

  async #leave(tx: EntityManager, call: Call, now: Date): Promise<void> {
    const p = await tx.findOne(ConferenceParticipant, { callId: call.id, status: { $ne: 'left' } });
    if (!p || p.status === 'left') return;
    const conf = await tx.findOne(Conference, { id: p.conferenceId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    const wasIn = p.status === 'joined';
    p.status = 'left';
    p.leftAt = now;
    if (conf && wasIn) {
      conf.participantsCount = Math.max(0, conf.participantsCount - 1);
      this.#emit(tx, conf, 'conference.participant_left', now, { participant_id: p.id, number: p.number, call_id: call.id });
    }
  }

  #emit(tx: EntityManager, c: Conference, type: EventType, now: Date, extra: Record<string, unknown> = {}): void {
    c.sequence += 1;
    c.updatedAt = now;
    emitEvent(tx, c, {
      type, resourceType: 'conference', resourceId: c.id, sequence: c.sequence,
      data: {
        id: c.id, conference_id: c.id, name: c.name, status: c.status, participants: c.participantsCount, max_participants: c.maxParticipants,
        ...extra, ...(c.webhookUrl ? { webhook_url: c.webhookUrl } : {}),
      },
    }, now);
  }
}
