/**
 * Voice TwiML, run by voice's call engine: installed as voice's call script (ScriptHooks), it is
 * told on the call's locked row when a call created through Calls.json (`Twiml`, or `Url`:
 * `twilio_twiml` / `twilio_url` in its metadata) is answered, of each key pressed (the sandbox DTMF
 * route, a live gateway's keys) and when one of its timers fires. Each verb is a step on the call
 * (its timeline through every surface). Where the call is in its document is a `twiml_runs` row
 * written with the call's change. Documents are fetched (`Url`, `<Redirect>`, a `<Gather>`'s
 * `action`) by a job, outside the row lock, with a signed form POST of Twilio's call parameters
 * (fetch.ts); its answer is run under the lock again if the call is still where it asked.
 */
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Call } from '../../modules/voice/voice.entities.ts';
import type { DialedLeg, ScriptControl, ScriptHooks } from '../../modules/voice/calls/lifecycle.ts';
import type { CallStatus } from '../../modules/voice/voice.states.ts';
import { sqlQuery } from '../../platform/db/sql.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { toSid } from '../sids.ts';
import { readDial, type DialVerb } from './dial.ts';
import { parseTwiml, TwimlError, type Verb } from './parse.ts';

export const TWIML_FETCH_JOB = 'twilio.twiml-fetch';

/** A fetch to make: the document's URL and what is posted beyond the call's parameters (`Digits`). */
export type TwimlFetch = { organizationId: string; mode: 'live' | 'test'; callId: string; url: string; extra: Record<string, string>; gen: number; reason: 'url' | 'redirect' | 'action' | 'recording_status' };

type Gathering = { digits: string; numDigits: number | null; finishOnKey: string; action: string | null };
/** A `<Dial>` under way: the leg it placed or the conference it joined, and where its outcome goes. */
type Dialing = { legId: string | null; conferenceId: string | null; action: string | null; hangupOnStar: boolean; answeredAt: string | null };
type Recording = { since: string; maxLength: number; finishOnKey: string; action: string | null; statusCallback: string | null };
/**
 * A call's progress: its document's verbs, the next, a gather or a recording under way, the
 * lengths of the recordings `<Record>` made (in order: their ids), and the generation a timer or
 * fetch must match.
 */
export type TwimlState = {
  verbs: Verb[]; at: number; gen: number; base: string | null; gather: Gathering | null; record?: Recording | null; recordings?: number[];
  dial?: Dialing | null;
  waiting: 'pause' | 'gather' | 'record' | 'fetch' | 'dial' | null;
};

/** A dialed leg's end in Twilio's DialCallStatus words. */
const DIAL_STATUS: Partial<Record<CallStatus, string>> = { completed: 'completed', busy: 'busy', no_answer: 'no-answer', failed: 'failed', cancelled: 'canceled' };

/** A `<Record>`'s recording id: its number on the call, and the call (served by voice's recordings route). */
export const recordingId = (callId: string, n: number) => `twrec_${n}_${callId}`;
const RECORDING_ID = /^twrec_(\d+)_(call_[A-Za-z0-9]+)$/;
/** Its Twilio SID: RE and 32 hex digits of the id's hash (stable). */
export const recordingSid = (id: string) => `RE${createHash('sha256').update(id).digest('hex').slice(0, 32)}`;

type Enqueue = (tx: EntityManager, fetch: TwimlFetch) => Promise<void>;

/** Twilio's limit on verbs run without waiting (a document of Redirects to itself ends here). */
const MAX_STEPS = 200;

const trx = (tx: EntityManager) => tx.getTransactionContext<Transaction<unknown>>()!;

export class TwimlEngine implements ScriptHooks {
  #control: ScriptControl | undefined;
  readonly #enqueue: Enqueue;
  readonly #read: (text: string, values: unknown[]) => Promise<{ state: TwimlState }[]>;

  constructor(deps: { enqueue: Enqueue; read: (text: string, values: unknown[]) => Promise<{ state: TwimlState }[]> }) {
    this.#enqueue = deps.enqueue;
    this.#read = deps.read;
  }

  async recording(tenant: TenantRef, id: string): Promise<{ seconds: number } | null> {
    const m = RECORDING_ID.exec(id);
    if (!m) return null;
    const rows = await this.#read('select state from twiml_runs where call_id = $1 and organization_id = $2 and mode = $3', [m[2], tenant.organizationId, tenant.mode]);
    const seconds = rows[0]?.state.recordings?.[Number(m[1]) - 1];
    return seconds === undefined ? null : { seconds };
  }

  bind(control: ScriptControl): void {
    this.#control = control;
  }

  get #calls(): ScriptControl {
    if (!this.#control) throw new Error('the TwiML engine is not installed');
    return this.#control;
  }

  async #load(tx: EntityManager, callId: string): Promise<TwimlState | null> {
    const rows = await sqlQuery<{ state: TwimlState }>(trx(tx), 'select state from twiml_runs where call_id = $1', [callId]);
    return rows[0]?.state ?? null;
  }

  async #save(tx: EntityManager, call: Call, state: TwimlState, now: Date): Promise<void> {
    await sqlQuery(trx(tx), `insert into twiml_runs (call_id, organization_id, mode, state, updated_at) values ($1, $2, $3, $4, $5)
      on conflict (call_id) do update set state = excluded.state, updated_at = excluded.updated_at`, [call.id, call.organizationId, call.mode, JSON.stringify(state), now]);
  }

  async answered(tx: EntityManager, call: Call, now: Date): Promise<void> {
    const twiml = call.metadata?.twilio_twiml;
    const url = call.metadata?.twilio_url;
    if (!scripted(call)) return;
    if (call.mode !== 'test') {
      // Live calls' media (what would speak, play and hear) does not run TwiML yet: the call stays up as a native call.
      this.#calls.step(call, 'twiml_not_run', now, { reason: 'TwiML runs on test-mode (sandbox) calls only for now' });
      return;
    }
    if (typeof twiml === 'string') {
      const state: TwimlState = { verbs: [], at: 0, gen: 0, base: null, gather: null, waiting: null };
      return this.#document(tx, call, state, twiml, now);
    }
    if (typeof url === 'string') {
      const state: TwimlState = { verbs: [], at: 0, gen: 0, base: null, gather: null, waiting: 'fetch' };
      await this.#fetch(tx, call, state, url, {}, 'url', now);
    }
  }

  /** A fetched document arrived (fetch.ts), or its fetch failed: run or end, if the call still waits for it. */
  async fetched(tx: EntityManager, call: Call, fetch: TwimlFetch, outcome: { body: string } | { error: TwimlError }, now: Date): Promise<void> {
    if (call.status !== 'in_progress') return;
    const state = await this.#load(tx, call.id);
    if (!state || state.gen !== fetch.gen || state.waiting !== 'fetch') return;
    if ('error' in outcome) return this.#fail(tx, call, state, outcome.error, now, { url: fetch.url });
    this.#calls.step(call, 'twiml_fetched', now, { url: fetch.url, reason: fetch.reason });
    return this.#document(tx, call, { ...state, base: fetch.url, waiting: null }, outcome.body, now);
  }

  async key(tx: EntityManager, call: Call, key: string, now: Date): Promise<void> {
    if (!scripted(call) || call.mode !== 'test') return;
    const state = await this.#load(tx, call.id);
    if (state?.waiting === 'dial' && state.dial?.hangupOnStar && state.dial.legId && key === '*') {
      // The caller leaves the dialed party: the leg is hung up, and its end goes on with the document.
      this.#calls.step(call, 'twiml_dial_hangup_on_star', now, { dial_call_sid: toSid(state.dial.legId) });
      return this.#calls.hangupLeg(tx, call, state.dial.legId, 'hangup_on_star');
    }
    if (state?.waiting === 'record' && state.record && state.record.finishOnKey.includes(key)) return this.#recorded(tx, call, state, state.record, now, key);
    const gather = state?.gather;
    if (!state || !gather || state.waiting !== 'gather') return;
    if (key === gather.finishOnKey) return this.#gathered(tx, call, state, gather, now, 'finish_on_key');
    const next = { ...gather, digits: gather.digits + key };
    if (next.numDigits !== null && next.digits.length >= next.numDigits) return this.#gathered(tx, call, state, next, now, 'num_digits');
    await this.#save(tx, call, { ...state, gather: next }, now);
  }

  /**
   * The call's document replaced (Calls.json's update with `Twiml` or `Url`), as Twilio does it: the
   * verb under way is interrupted (a pause, gather or recording given up; a dialed leg hung up; a
   * conference left) and the new document starts at once; a call not answered yet starts with it.
   * The generation moves on, so a timer or fetch of the old document changes nothing.
   */
  async replace(tx: EntityManager, call: Call, script: Record<string, string>, now: Date): Promise<void> {
    const { twilio_twiml: _t, twilio_url: _u, ...rest } = call.metadata ?? {};
    call.metadata = { ...rest, ...(script.twiml !== undefined ? { twilio_twiml: script.twiml } : { twilio_url: script.url }) };
    if (call.status !== 'in_progress') return;
    if (call.mode !== 'test') {
      this.#calls.step(call, 'twiml_not_run', now, { reason: 'TwiML runs on test-mode (sandbox) calls only for now' });
      return;
    }
    const state: TwimlState = (await this.#load(tx, call.id)) ?? { verbs: [], at: 0, gen: 0, base: null, gather: null, waiting: null };
    if (state.waiting === 'dial' && state.dial?.legId) await this.#calls.hangupLeg(tx, call, state.dial.legId, 'redirected');
    if (state.waiting === 'dial' && state.dial?.conferenceId) await this.#calls.leave(tx, call, now);
    this.#calls.step(call, 'twiml_replaced', now, { by: script.twiml !== undefined ? 'twiml' : 'url', ...(script.url ? { url: script.url } : {}), interrupted: state.waiting });
    const next: TwimlState = { ...state, gen: state.gen + 1, base: null, gather: null, record: null, dial: null, waiting: null };
    if (script.twiml !== undefined) return this.#document(tx, call, next, script.twiml, now);
    return this.#fetch(tx, call, { ...next, waiting: 'fetch' }, script.url ?? '', {}, 'url', now);
  }

  /** The call is ending: a leg its `<Dial>` placed (ringing or talking) is hung up with it, as Twilio hangs up the child call. */
  async ended(tx: EntityManager, call: Call): Promise<void> {
    if (!scripted(call)) return;
    const state = await this.#load(tx, call.id);
    if (state?.waiting === 'dial' && state.dial?.legId) await this.#calls.hangupLeg(tx, call, state.dial.legId, 'dialing_call_ended');
  }

  /** The leg a `<Dial><Number>` placed was answered (a step) or ended: its outcome to the action, or on to the next verb. */
  async dialed(tx: EntityManager, call: Call, leg: DialedLeg, event: 'answered' | 'ended', now: Date): Promise<void> {
    if (!scripted(call)) return;
    const state = await this.#load(tx, call.id);
    const dial = state?.dial;
    if (!state || state.waiting !== 'dial' || !dial || dial.legId !== leg.id) return;
    if (event === 'answered') {
      // Live calls: where the two legs' media are bridged (the voice media's bridge); the sandbox has no audio to join.
      this.#calls.step(call, 'twiml_dial_answered', now, { dial_call_sid: toSid(leg.id), to: leg.to });
      return this.#save(tx, call, { ...state, dial: { ...dial, answeredAt: now.toISOString() } }, now);
    }
    const status = DIAL_STATUS[leg.status] ?? 'failed';
    const after: TwimlState = { ...state, gen: state.gen + 1, dial: null, waiting: null };
    return this.#dialDone(tx, call, after, dial.action, { DialCallStatus: status, DialCallSid: toSid(leg.id), DialCallDuration: String(leg.durationSeconds ?? 0) }, now, leg.sipCode ? { sip_code: leg.sipCode } : {});
  }

  /** A `<Dial>` ended: its step, then its action (posted with the outcome) or the next verb. */
  async #dialDone(tx: EntityManager, call: Call, state: TwimlState, action: string | null, outcome: Record<string, string>, now: Date, detail: Record<string, unknown> = {}): Promise<void> {
    this.#calls.step(call, 'twiml_dial_done', now, {
      dial_call_status: outcome.DialCallStatus, ...(outcome.DialCallSid ? { dial_call_sid: outcome.DialCallSid } : {}), dial_call_duration: Number(outcome.DialCallDuration ?? 0), ...detail,
    });
    if (action === null) return this.#run(tx, call, state, now);
    return this.#fetch(tx, call, state, action, outcome, 'action', now);
  }

  /**
   * Runs a `<Dial>` verb: a leg placed to its number (the call waits for the leg's end), or the call
   * joined to its conference (it stays there until it ends); 'next' when the document goes on at once.
   */
  async #dial(tx: EntityManager, call: Call, s: TwimlState, verb: Verb, now: Date): Promise<'next' | 'done'> {
    let dial: DialVerb;
    try {
      dial = readDial(verb);
    } catch (e) {
      if (!(e instanceof TwimlError)) throw e;
      await this.#fail(tx, call, s, e, now);
      return 'done';
    }
    const action = absolute(dial.action ?? undefined, s.base);
    if (action === undefined) {
      await this.#fail(tx, call, s, new TwimlError(11200, `HTTP retrieval failure: the Dial action ${dial.action} is relative and the document has no URL`), now);
      return 'done';
    }
    const t = dial.target;
    const skipped = dial.skipped.length ? { skipped: dial.skipped } : {};
    const waiting = (d: Omit<Dialing, 'action' | 'hangupOnStar' | 'answeredAt'>): TwimlState => ({ ...s, gen: s.gen + 1, waiting: 'dial', dial: { ...d, action, hangupOnStar: dial.hangupOnStar, answeredAt: null } });
    switch (t.kind) {
      case 'unsupported':
        this.#calls.step(call, 'twiml_unsupported', now, { verb: 'Dial', noun: t.noun });
        return 'next';
      case 'sip':
        // Calls go to E.164 numbers only: the dial fails as an undeliverable one does, and the call goes on.
        this.#calls.step(call, 'twiml_dial', now, { sip: t.uri, ...skipped });
        await this.#dialDone(tx, call, { ...s, gen: s.gen + 1 }, action, { DialCallStatus: 'failed', DialCallDuration: '0' }, now, { code: 13224, message: 'Dial: this service dials E.164 numbers only, not SIP URIs' });
        return 'done';
      case 'conference': {
        const joined = await this.#calls.join(tx, call, { name: t.name, muted: t.muted, maxParticipants: t.maxParticipants }, now);
        if ('refused' in joined) {
          this.#calls.step(call, 'twiml_dial', now, { conference: t.name });
          await this.#dialDone(tx, call, { ...s, gen: s.gen + 1 }, action, { DialCallStatus: 'failed', DialCallDuration: '0' }, now, { reason: joined.refused.reason, message: joined.refused.message });
          return 'done';
        }
        this.#calls.step(call, 'twiml_dial_conference', now, { conference: t.name, conference_id: joined.conferenceId, created: joined.created, muted: t.muted, ...skipped });
        await this.#save(tx, call, waiting({ legId: null, conferenceId: joined.conferenceId }), now);
        return 'done';
      }
      case 'number': {
        const placed = await this.#calls.dial(tx, call, { to: t.to, callerId: dial.callerId, timeoutSeconds: dial.timeout, record: dial.record, maxDuration: dial.timeLimit });
        if ('refused' in placed) {
          if (placed.refused.reason === 'caller_id') {
            await this.#fail(tx, call, s, new TwimlError(13214, `Dial: Invalid callerId value: ${placed.refused.message}`), now);
            return 'done';
          }
          this.#calls.step(call, 'twiml_dial', now, { number: t.to });
          await this.#dialDone(tx, call, { ...s, gen: s.gen + 1 }, action, { DialCallStatus: 'failed', DialCallDuration: '0' }, now, { code: 13225, reason: placed.refused.reason, message: placed.refused.message });
          return 'done';
        }
        this.#calls.step(call, 'twiml_dial', now, {
          number: t.to, caller_id: placed.leg.from, timeout: dial.timeout, dial_call_sid: toSid(placed.leg.id), leg_call_id: placed.leg.id, action, ...skipped,
        });
        await this.#save(tx, call, waiting({ legId: placed.leg.id, conferenceId: null }), now);
        return 'done';
      }
    }
  }

  async timedOut(tx: EntityManager, call: Call, gen: number, now: Date): Promise<void> {
    const state = await this.#load(tx, call.id);
    if (!state || state.gen !== gen) return;
    if (state.waiting === 'pause') return this.#run(tx, call, { ...state, waiting: null }, now);
    if (state.waiting === 'gather' && state.gather) return this.#gathered(tx, call, state, state.gather, now, 'timeout');
    if (state.waiting === 'record' && state.record) return this.#recorded(tx, call, state, state.record, now, null);
  }

  /** A recording ended (a finishOnKey key, or maxLength): kept, its callback posted, its action fetched or the next verb run. */
  async #recorded(tx: EntityManager, call: Call, state: TwimlState, record: Recording, now: Date, key: string | null): Promise<void> {
    const seconds = Math.min(record.maxLength, Math.max(0, Math.round((now.getTime() - Date.parse(record.since)) / 1000)));
    const recordings = [...(state.recordings ?? []), seconds];
    const id = recordingId(call.id, recordings.length);
    const url = this.#calls.recordingUrl(call, id, now);
    const sid = recordingSid(id);
    this.#calls.step(call, 'twiml_recorded', now, { recording_sid: sid, duration: seconds, reason: key === null ? 'max_length' : 'finish_on_key', ...(key ? { digits: key } : {}) });
    const after: TwimlState = { ...state, gen: state.gen + 1, record: null, recordings, waiting: null };
    const params = { RecordingUrl: url, RecordingDuration: String(seconds), RecordingSid: sid };
    if (record.statusCallback) {
      await this.#enqueue(tx, {
        organizationId: call.organizationId, mode: call.mode, callId: call.id, url: record.statusCallback, gen: after.gen, reason: 'recording_status',
        extra: { ...params, RecordingStatus: 'completed', RecordingChannels: '1', RecordingSource: 'RecordVerb', RecordingStartTime: record.since },
      });
    }
    if (record.action === null) return this.#run(tx, call, after, now);
    return this.#fetch(tx, call, after, record.action, { ...params, ...(key ? { Digits: key } : {}) }, 'action', now);
  }

  async #gathered(tx: EntityManager, call: Call, state: TwimlState, gather: Gathering, now: Date, why: 'finish_on_key' | 'num_digits' | 'timeout'): Promise<void> {
    const after: TwimlState = { ...state, gen: state.gen + 1, gather: null, waiting: null };
    this.#calls.step(call, 'twiml_gather_done', now, { digits: gather.digits, reason: why });
    // No digits: on to the next verb, as Twilio does; digits with an action: its answer replaces this document.
    if (gather.digits === '' || gather.action === null) return this.#run(tx, call, after, now);
    return this.#fetch(tx, call, after, gather.action, { Digits: gather.digits, FinishedOnKey: why === 'finish_on_key' ? gather.finishOnKey : '' }, 'action', now);
  }

  async #document(tx: EntityManager, call: Call, state: TwimlState, xml: string, now: Date): Promise<void> {
    let verbs: Verb[];
    try {
      verbs = parseTwiml(xml);
    } catch (e) {
      if (e instanceof TwimlError) return this.#fail(tx, call, state, e, now);
      throw e;
    }
    return this.#run(tx, call, { ...state, verbs, at: 0, gather: null, waiting: null }, now);
  }

  async #fail(tx: EntityManager, call: Call, state: TwimlState, error: TwimlError, now: Date, detail: Record<string, unknown> = {}): Promise<void> {
    this.#calls.step(call, 'twiml_error', now, { code: error.code, message: error.message, ...detail });
    await this.#save(tx, call, { ...state, gen: state.gen + 1, gather: null, waiting: null }, now);
    await this.#calls.end(tx, call, 'completed', 'twiml_error', now);
  }

  async #fetch(tx: EntityManager, call: Call, state: TwimlState, raw: string, extra: Record<string, string>, reason: TwimlFetch['reason'], now: Date): Promise<void> {
    let url: string;
    try {
      url = new URL(raw, state.base ?? undefined).toString();
    } catch {
      return this.#fail(tx, call, state, new TwimlError(11200, `HTTP retrieval failure: ${raw} is not an absolute URL (the document has no URL to resolve it against)`), now);
    }
    const gen = state.gen + 1;
    this.#calls.step(call, 'twiml_fetch', now, { url, reason, ...(extra.Digits ? { digits: extra.Digits } : {}) });
    await this.#save(tx, call, { ...state, gen, waiting: 'fetch' }, now);
    await this.#enqueue(tx, { organizationId: call.organizationId, mode: call.mode, callId: call.id, url, extra, gen, reason });
  }

  /** Runs verbs from `state.at` until one waits (Pause, Gather, a fetch) or ends the call; the end of the document hangs up. */
  async #run(tx: EntityManager, call: Call, state: TwimlState, now: Date): Promise<void> {
    let s = state;
    for (let n = 0; n < MAX_STEPS; n++) {
      const verb = s.verbs[s.at];
      if (!verb) {
        this.#calls.step(call, 'twiml_end', now);
        await this.#save(tx, call, { ...s, gen: s.gen + 1, waiting: null }, now);
        return this.#calls.end(tx, call, 'completed', 'twiml_end', now);
      }
      s = { ...s, at: s.at + 1 };
      switch (verb.name) {
        case 'Say': case 'Play':
          this.#calls.step(call, verb.name === 'Say' ? 'twiml_say' : 'twiml_play', now, spoken(verb));
          continue;
        case 'Pause': {
          const length = seconds(verb.attrs.length, 1);
          this.#calls.step(call, 'twiml_pause', now, { length });
          s = { ...s, gen: s.gen + 1, waiting: 'pause' };
          await this.#save(tx, call, s, now);
          return this.#calls.timer(tx, { callId: call.id, kind: 'script', prompt: s.gen }, call, length);
        }
        case 'Gather': {
          const input = verb.attrs.input ?? 'dtmf';
          const timeout = seconds(verb.attrs.timeout, 5);
          const numDigits = verb.attrs.numDigits === undefined ? null : Math.max(1, Number.parseInt(verb.attrs.numDigits, 10) || 1);
          const finishOnKey = verb.attrs.finishOnKey ?? '#';
          const action = absolute(verb.attrs.action, s.base);
          if (action === undefined) return this.#fail(tx, call, s, new TwimlError(11200, `HTTP retrieval failure: the Gather action ${verb.attrs.action} is relative and the document has no URL`), now);
          this.#calls.step(call, 'twiml_gather', now, { input, timeout, num_digits: numDigits, finish_on_key: finishOnKey, action });
          for (const child of verb.children) if (child.name === 'Say' || child.name === 'Play') this.#calls.step(call, child.name === 'Say' ? 'twiml_say' : 'twiml_play', now, spoken(child));
          s = { ...s, gen: s.gen + 1, waiting: 'gather', gather: { digits: '', numDigits, finishOnKey, action } };
          await this.#save(tx, call, s, now);
          return this.#calls.timer(tx, { callId: call.id, kind: 'script', prompt: s.gen }, call, timeout);
        }
        case 'Record': {
          const maxLength = Math.max(1, seconds(verb.attrs.maxLength, 3600));
          const finishOnKey = verb.attrs.finishOnKey ?? '1234567890*#';
          const action = absolute(verb.attrs.action, s.base);
          const statusCallback = absolute(verb.attrs.recordingStatusCallback, s.base);
          if (action === undefined || statusCallback === undefined) return this.#fail(tx, call, s, new TwimlError(11200, 'HTTP retrieval failure: a Record URL is relative and the document has no URL'), now);
          this.#calls.step(call, 'twiml_record', now, { max_length: maxLength, finish_on_key: finishOnKey, action });
          s = { ...s, gen: s.gen + 1, waiting: 'record', record: { since: now.toISOString(), maxLength, finishOnKey, action, statusCallback } };
          await this.#save(tx, call, s, now);
          return this.#calls.timer(tx, { callId: call.id, kind: 'script', prompt: s.gen }, call, maxLength);
        }
        case 'Redirect':
          this.#calls.step(call, 'twiml_redirect', now, { url: verb.text });
          return this.#fetch(tx, call, s, verb.text, {}, 'redirect', now);
        case 'Hangup':
          this.#calls.step(call, 'twiml_hangup', now);
          await this.#save(tx, call, { ...s, gen: s.gen + 1, waiting: null }, now);
          return this.#calls.end(tx, call, 'completed', 'twiml_hangup', now);
        case 'Dial':
          if ((await this.#dial(tx, call, s, verb, now)) === 'next') continue;
          return;
        case 'Reject': {
          // The call is answered by the time its TwiML runs (outbound-api): it is hung up, the reason kept.
          const reason = verb.attrs.reason === 'busy' ? 'busy' : 'rejected';
          this.#calls.step(call, 'twiml_reject', now, { reason });
          await this.#save(tx, call, { ...s, gen: s.gen + 1, waiting: null }, now);
          return this.#calls.end(tx, call, 'completed', 'twiml_reject', now);
        }
        default:
          // Not run here (docs/twilio.md): noted, and the document goes on as Twilio goes on past a verb it skips.
          this.#calls.step(call, 'twiml_unsupported', now, { verb: verb.name });
          continue;
      }
    }
    return this.#fail(tx, call, s, new TwimlError(12100, `Document parse failure: more than ${MAX_STEPS} verbs without a wait`), now);
  }
}

/** A `<Say>`'s or `<Play>`'s step detail (the sandbox speaks and plays nothing: the step is the record). */
function spoken(verb: Verb): Record<string, unknown> {
  const loop = verb.attrs.loop === undefined ? 1 : Number.parseInt(verb.attrs.loop, 10) || 0;
  return verb.name === 'Say'
    ? { text: verb.text, ...(verb.attrs.voice ? { voice: verb.attrs.voice } : {}), ...(verb.attrs.language ? { language: verb.attrs.language } : {}), loop }
    : { url: verb.text, loop };
}

/** Whether the call was created with TwiML (Calls.json's `Twiml` or `Url`, kept in its metadata). */
function scripted(call: Call): boolean {
  return typeof call.metadata?.twilio_twiml === 'string' || typeof call.metadata?.twilio_url === 'string';
}

/** A verb's URL attribute made absolute against the document's URL: null when absent, undefined when it cannot be. */
function absolute(raw: string | undefined, base: string | null): string | null | undefined {
  if (raw === undefined || raw === '') return null;
  try {
    return new URL(raw, base ?? undefined).toString();
  } catch {
    return undefined;
  }
}

function seconds(raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, 600) : fallback;
}
