/**
 * `<Dial>` read from its verb: what to dial (one noun: `<Number>`, `<Conference>`, `<Sip>`, or the
 * verb's own text as a number) and its attributes, checked as Twilio checks them. A value Twilio
 * refuses is a TwimlError with Twilio's code (132xx), which ends the call; a noun this service
 * does not dial (`<Client>`, `<Queue>`, `<Application>`) is `unsupported` (skipped, as an
 * unsupported verb is); `<Sip>` is `sip` (this service places calls to E.164 numbers only: the
 * dial fails with 13224 and the call goes on).
 */
import { TwimlError, type Verb } from './parse.ts';

export type DialTarget =
  | { kind: 'number'; to: string }
  | { kind: 'conference'; name: string; muted: boolean; maxParticipants: number | null }
  | { kind: 'sip'; uri: string }
  | { kind: 'unsupported'; noun: string };

export type DialVerb = {
  target: DialTarget;
  /** Nouns after the first (Twilio rings several numbers at once; here the first is dialed). */
  skipped: string[];
  action: string | null; timeout: number; callerId: string | null; record: boolean; hangupOnStar: boolean; timeLimit: number | null;
};

const NOUNS = new Set(['Number', 'Sip', 'Conference', 'Client', 'Queue', 'Application']);
const RECORD = new Set(['do-not-record', 'record-from-answer', 'record-from-ringing', 'record-from-answer-dual', 'record-from-ringing-dual', 'true', 'false']);
const E164 = /^\+[1-9]\d{1,14}$/;

function integer(raw: string | undefined, min: number, max: number, code: number, what: string): number | null {
  if (raw === undefined) return null;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new TwimlError(code, `Dial: Invalid ${what} value ${raw} (an integer from ${min} to ${max})`);
  return n;
}

function flag(raw: string | undefined, code: number, what: string): boolean {
  if (raw === undefined) return false;
  if (raw !== 'true' && raw !== 'false') throw new TwimlError(code, `Dial: Invalid ${what} value ${raw} (true or false)`);
  return raw === 'true';
}

export function readDial(verb: Verb): DialVerb {
  const a = verb.attrs;
  if (a.method !== undefined && !['GET', 'POST'].includes(a.method.toUpperCase())) throw new TwimlError(13210, `Dial: Invalid method value ${a.method}`);
  const timeout = integer(a.timeout, 1, 600, 13212, 'timeout') ?? 30;
  const hangupOnStar = flag(a.hangupOnStar, 13213, 'hangupOnStar');
  if (a.callerId !== undefined && !E164.test(a.callerId)) throw new TwimlError(13214, `Dial: Invalid callerId value ${a.callerId}`);
  if (a.record !== undefined && !RECORD.has(a.record)) throw new TwimlError(13215, `Dial: Invalid record value ${a.record}`);
  const timeLimit = integer(a.timeLimit, 1, 14_400, 13216, 'timeLimit');
  for (const child of verb.children) {
    if (!NOUNS.has(child.name)) throw new TwimlError(12200, `Schema validation warning: <Dial> cannot contain <${child.name}>`);
  }
  const nouns = verb.children.length > 0 ? verb.children : verb.text ? [{ name: 'Number', attrs: {}, text: verb.text, children: [] }] : [];
  const first = nouns[0];
  if (!first) throw new TwimlError(13223, 'Dial: Invalid phone number format: <Dial> has nothing to dial (no number, <Number>, <Conference> or <Sip>)');
  return {
    target: target(first), skipped: nouns.slice(1).map((n) => `${n.name}:${n.text}`),
    action: a.action ?? null, timeout, callerId: a.callerId ?? null, record: a.record !== undefined && a.record !== 'do-not-record' && a.record !== 'false', hangupOnStar, timeLimit,
  };
}

function target(noun: Verb): DialTarget {
  switch (noun.name) {
    case 'Number': {
      const to = noun.text.replace(/[\s()-]/g, '');
      if (!E164.test(to)) throw new TwimlError(13223, `Dial: Invalid phone number format: ${noun.text || '(empty)'} is not an E.164 number`);
      return { kind: 'number', to };
    }
    case 'Conference': {
      if (!noun.text) throw new TwimlError(12200, 'Schema validation warning: <Conference> needs the conference\'s name');
      if (noun.text.length > 128) throw new TwimlError(12200, 'Schema validation warning: a conference name is at most 128 characters');
      const muted = noun.attrs.muted === undefined ? false : noun.attrs.muted === 'true';
      if (noun.attrs.muted !== undefined && !['true', 'false'].includes(noun.attrs.muted)) throw new TwimlError(13230, `Dial->Conference: Invalid muted value ${noun.attrs.muted}`);
      const max = noun.attrs.maxParticipants === undefined ? null : Number(noun.attrs.maxParticipants);
      if (max !== null && (!Number.isInteger(max) || max < 2 || max > 250)) throw new TwimlError(12200, `Schema validation warning: maxParticipants ${noun.attrs.maxParticipants} is not an integer from 2 to 250`);
      return { kind: 'conference', name: noun.text, muted, maxParticipants: max };
    }
    case 'Sip':
      return { kind: 'sip', uri: noun.text };
    default:
      return { kind: 'unsupported', noun: noun.name };
  }
}
