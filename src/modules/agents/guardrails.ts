/**
 * Guardrails, as pure functions: PII redaction (phone numbers found with libphonenumber, emails,
 * card numbers that pass the Luhn check, US social security numbers), the content filter, escalation
 * keywords, blocked topics and output checks. Every decision is returned so it can be recorded on
 * the message it concerns.
 */
import { findPhoneNumbersInText } from 'libphonenumber-js';
import type { GuardrailDecision, Guardrails } from './agents.model.ts';

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;
const CARD_CANDIDATE = /\b(?:\d[ -]?){12,18}\d\b/g;
const SSN = /\b\d{3}-\d{2}-\d{4}\b/g;
const URL_PATTERN = /\bhttps?:\/\/\S+/i;
/** A short list on purpose: the filter is a guardrail, not a moderation model. */
const PROFANITY = ['damn', 'shit', 'fuck', 'bitch', 'bastard', 'asshole', 'crap', 'idiot'];
const PROFANITY_RE = new RegExp(`\\b(${PROFANITY.join('|')})\\w*\\b`, 'i');
export const DEFAULT_MAX_OUTPUT_CHARS = 4000;
export const BLOCKED_REPLY = 'Sorry, I can’t share that. A team member will follow up if you need more help.';

export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return digits.length >= 13 && sum % 10 === 0;
}

type Found = { start: number; end: number; kind: 'email' | 'phone' | 'card' | 'ssn' };

/** Spans of PII in a text (cards before phones: a card number can look like a phone number). */
export function findPii(text: string): Found[] {
  const found: Found[] = [];
  const overlaps = (s: number, e: number) => found.some((f) => s < f.end && e > f.start);
  for (const m of text.matchAll(EMAIL)) found.push({ start: m.index, end: m.index + m[0].length, kind: 'email' });
  for (const m of text.matchAll(CARD_CANDIDATE)) {
    if (luhnValid(m[0].replace(/\D/g, '')) && !overlaps(m.index, m.index + m[0].length)) found.push({ start: m.index, end: m.index + m[0].length, kind: 'card' });
  }
  for (const m of text.matchAll(SSN)) if (!overlaps(m.index, m.index + m[0].length)) found.push({ start: m.index, end: m.index + m[0].length, kind: 'ssn' });
  for (const p of findPhoneNumbersInText(text, { defaultCountry: 'US' })) {
    if (!overlaps(p.startsAt, p.endsAt)) found.push({ start: p.startsAt, end: p.endsAt, kind: 'phone' });
  }
  return found.sort((a, b) => a.start - b.start);
}

/** The text with each PII span replaced by `[kind]`, and the kinds found. */
export function redactPii(text: string): { text: string; kinds: string[] } {
  const found = findPii(text);
  if (found.length === 0) return { text, kinds: [] };
  let out = '';
  let at = 0;
  for (const f of found) {
    out += `${text.slice(at, f.start)}[${f.kind}]`;
    at = f.end;
  }
  return { text: out + text.slice(at), kinds: [...new Set(found.map((f) => f.kind))] };
}

const matchesPhrase = (text: string, phrase: string) => new RegExp(`\\b${phrase.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`, 'i').test(text);

export type InputVerdict = {
  /** What is stored and sent to the model. */
  text: string;
  decisions: GuardrailDecision[];
  escalate: boolean;
  /** A blocked topic the message is about (the agent declines). */
  blockedTopic: string | undefined;
};

export function checkInput(g: Guardrails, message: string): InputVerdict {
  const decisions: GuardrailDecision[] = [];
  let text = message;
  if (g.pii_redaction) {
    const r = redactPii(text);
    if (r.kinds.length) decisions.push({ guardrail: 'pii_redaction', action: 'redacted', detail: r.kinds.join(',') });
    text = r.text;
  }
  const keyword = (g.escalation_keywords ?? []).find((k) => matchesPhrase(message, k));
  if (keyword) decisions.push({ guardrail: 'escalation_keywords', action: 'escalated', detail: keyword });
  const topic = (g.blocked_topics ?? []).find((t) => matchesPhrase(message, t));
  if (topic) decisions.push({ guardrail: 'blocked_topics', action: 'blocked', detail: topic });
  return { text, decisions, escalate: !!keyword, blockedTopic: topic };
}

export type OutputVerdict = { text: string; decisions: GuardrailDecision[]; blockedBy: string | undefined };

/**
 * Checks an answer (or the part streamed so far). A failed check blocks it; with PII redaction on,
 * PII is masked instead of blocking (unless `no_pii` or `no_card_numbers` is an output check).
 */
export function checkOutput(g: Guardrails, answer: string): OutputVerdict {
  const decisions: GuardrailDecision[] = [];
  const checks = new Set(g.output_checks ?? []);
  const block = (guardrail: string, detail?: string): OutputVerdict => {
    decisions.push({ guardrail, action: 'blocked', ...(detail ? { detail } : {}) });
    return { text: answer, decisions, blockedBy: guardrail };
  };
  if (g.content_filter || checks.has('no_profanity')) {
    const m = PROFANITY_RE.exec(answer);
    if (m) return block(g.content_filter ? 'content_filter' : 'no_profanity', m[1]!.toLowerCase());
  }
  const topic = (g.blocked_topics ?? []).find((t) => matchesPhrase(answer, t));
  if (topic) return block('blocked_topics', topic);
  const pii = checks.has('no_pii') || checks.has('no_card_numbers') ? findPii(answer) : [];
  if (checks.has('no_pii') && pii.length) return block('no_pii', [...new Set(pii.map((p) => p.kind))].join(','));
  if (checks.has('no_card_numbers') && pii.some((p) => p.kind === 'card')) return block('no_card_numbers');
  if (checks.has('no_urls') && URL_PATTERN.test(answer)) return block('no_urls');
  if (checks.has('max_length') && answer.length > (g.max_output_chars ?? DEFAULT_MAX_OUTPUT_CHARS)) return block('max_length', String(answer.length));
  let text = answer;
  if (g.pii_redaction) {
    const r = redactPii(answer);
    if (r.kinds.length) decisions.push({ guardrail: 'pii_redaction', action: 'redacted', detail: r.kinds.join(',') });
    text = r.text;
  }
  return { text, decisions, blockedBy: undefined };
}
