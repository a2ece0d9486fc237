import { describe, expect, it } from 'vitest';
import { checkInput, checkOutput, luhnValid, redactPii } from './guardrails.ts';

describe('guardrails', () => {
  it('Luhn accepts real test card numbers only', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
  });

  it('redacts emails, phone numbers, card numbers and SSNs, not ordinary numbers', () => {
    const r = redactPii('Mail ann@example.com or call +1 415 555 0100; card 4111 1111 1111 1111; ssn 123-45-6789; order 12345');
    expect(r.text).toBe('Mail [email] or call [phone]; card [card]; ssn [ssn]; order 12345');
    expect(r.kinds.sort()).toEqual(['card', 'email', 'phone', 'ssn']);
    expect(redactPii('4111 1111 1111 1112 is not a card').text).toContain('4111 1111 1111 1112');
  });

  it('input: escalation keywords, blocked topics and redaction are decisions', () => {
    const v = checkInput({ pii_redaction: true, escalation_keywords: ['lawyer'], blocked_topics: ['politics'] }, 'My lawyer at bob@x.io wants to talk politics');
    expect(v.escalate).toBe(true);
    expect(v.blockedTopic).toBe('politics');
    expect(v.text).toBe('My lawyer at [email] wants to talk politics');
    expect(v.decisions.map((d) => d.action)).toEqual(['redacted', 'escalated', 'blocked']);
    expect(checkInput({}, 'lawyer').escalate).toBe(false);
  });

  it('output: content filter and output checks block; redaction masks otherwise', () => {
    expect(checkOutput({ content_filter: true }, 'Damn, fine.').blockedBy).toBe('content_filter');
    expect(checkOutput({ output_checks: ['no_card_numbers'] }, 'card 4111 1111 1111 1111').blockedBy).toBe('no_card_numbers');
    expect(checkOutput({ output_checks: ['no_urls'] }, 'see https://x.test/a').blockedBy).toBe('no_urls');
    expect(checkOutput({ output_checks: ['max_length'], max_output_chars: 5 }, 'too long').blockedBy).toBe('max_length');
    const redacted = checkOutput({ pii_redaction: true }, 'write to a@b.co');
    expect(redacted).toMatchObject({ blockedBy: undefined, text: 'write to [email]' });
    expect(checkOutput({}, 'Damn').blockedBy).toBeUndefined();
  });
});
