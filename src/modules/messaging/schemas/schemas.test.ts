import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { parseInput } from '../../../platform/operations.ts';
import { ServiceError } from '../../../platform/errors.ts';
import { createTemplateInput, updateTemplateInput } from './templates.ts';
import { isAllowedWebhookUrl, isHttpsUrl } from './shared.ts';
import { listMessagesInput } from './messages.ts';
import { sendEmailInput } from './email.ts';
import { sendRcsInput } from './rcs.ts';
import { sendSmsInput } from './sms.ts';
import { sendViberInput } from './viber.ts';
import { sendWhatsAppInput } from './whatsapp.ts';

const TO = '+15005550001';
const MB = 1024 * 1024;

/** The code, details.field and message parseInput throws for `raw`. */
function rejection(schema: z.ZodType<unknown>, raw: unknown): { code: string; field: unknown; message: string } {
  try {
    parseInput(schema, raw);
  } catch (e) {
    if (e instanceof ServiceError) return { code: e.code, field: e.details.field, message: e.message };
    throw e;
  }
  throw new Error(`expected ${JSON.stringify(raw)?.slice(0, 200)} to be rejected`);
}

function expectRejected(schema: z.ZodType<unknown>, raw: unknown, code: string, field?: string): string {
  const r = rejection(schema, raw);
  expect({ code: r.code, field: r.field }, r.message).toEqual({ code, field });
  return r.message;
}

describe('common send fields', () => {
  const base = { to: TO, body: 'hi' };

  it('keeps from, webhook_url and metadata, and refuses unknown keys', () => {
    const out = parseInput(sendSmsInput, { ...base, from: ' Acme ', webhook_url: 'https://hooks.example.com/x?y=1', metadata: { a: 'x', b: 1, c: true, d: null } });
    expect(out).toStrictEqual({ to: TO, body: 'hi', from: 'Acme', webhook_url: 'https://hooks.example.com/x?y=1', metadata: { a: 'x', b: 1, c: true, d: null } });
    const message = expectRejected(sendSmsInput, { ...base, extra: 1, organization_id: 'org_x' }, 'VALIDATION_ERROR', 'extra');
    expect(message).toBe('2 problems: Received unknown parameter: extra; Received unknown parameter: organization_id');
  });

  it('treats null optional fields as absent', () => {
    expect(parseInput(sendSmsInput, { ...base, from: null, webhook_url: null, metadata: null, template_id: null })).toStrictEqual({ to: TO, body: 'hi' });
  });

  it('accepts https webhooks and plain http only for localhost and 127.0.0.1', () => {
    for (const url of ['https://example.com/hook', 'http://localhost:4000/hook', 'http://127.0.0.1/hook', 'https://localhost/x']) {
      expect(parseInput(sendSmsInput, { ...base, webhook_url: url }).webhook_url, url).toBe(url);
    }
    for (const url of ['http://example.com/hook', 'ftp://example.com/x', 'not a url', '/relative', 'https://user:pw@example.com/', 'http://10.0.0.1/x', `https://e.com/${'a'.repeat(2048)}`]) {
      expectRejected(sendSmsInput, { ...base, webhook_url: url }, 'VALIDATION_ERROR', 'webhook_url');
    }
    expect(isAllowedWebhookUrl('http://[::1]:8080/x')).toBe(true);
    expect(isHttpsUrl('http://localhost/x')).toBe(false);
  });

  it('limits metadata to 50 scalar values within 8 KB', () => {
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]));
    expect(parseInput(sendSmsInput, { ...base, metadata: fifty }).metadata).toEqual(fifty);
    expect(expectRejected(sendSmsInput, { ...base, metadata: { ...fifty, k50: 1 } }, 'VALIDATION_ERROR', 'metadata')).toMatch(/at most 50 keys/);
    expectRejected(sendSmsInput, { ...base, metadata: { big: 'x'.repeat(8 * 1024) } }, 'VALIDATION_ERROR', 'metadata');
    expect(parseInput(sendSmsInput, { ...base, metadata: { big: 'x'.repeat(8 * 1024 - 10) } }).metadata).toBeDefined();
    expectRejected(sendSmsInput, { ...base, metadata: { nested: { a: 1 } } }, 'VALIDATION_ERROR', 'metadata.nested');
    expectRejected(sendSmsInput, { ...base, metadata: { list: [1] } }, 'VALIDATION_ERROR', 'metadata.list');
    expectRejected(sendSmsInput, { ...base, metadata: ['a'] }, 'VALIDATION_ERROR', 'metadata');
    expectRejected(sendSmsInput, { ...base, metadata: 'a=b' }, 'VALIDATION_ERROR', 'metadata');
  });

  it('rejects a non-object body', () => {
    expectRejected(sendSmsInput, 'hello', 'VALIDATION_ERROR', undefined);
    expectRejected(sendSmsInput, null, 'VALIDATION_ERROR', undefined);
  });
});

describe('sendSmsInput', () => {
  it('normalizes the recipient to E.164 and keeps the body as sent', () => {
    expect(parseInput(sendSmsInput, { to: '+1 (415) 555-2671', body: '  Hello  ' })).toStrictEqual({ to: '+14155552671', body: '  Hello  ' });
  });

  it('accepts template_id with variables instead of a body', () => {
    expect(parseInput(sendSmsInput, { to: TO, template_id: 'tpl_1', variables: { code: 1234, name: 'Ada' } }))
      .toStrictEqual({ to: TO, template_id: 'tpl_1', variables: { code: 1234, name: 'Ada' } });
  });

  it('requires to, and rejects an invalid or non-E.164 number', () => {
    expectRejected(sendSmsInput, { body: 'hi' }, 'MISSING_REQUIRED_FIELD', 'to');
    expectRejected(sendSmsInput, { to: '14155552671', body: 'hi' }, 'INVALID_PHONE_NUMBER', 'to');
    expectRejected(sendSmsInput, { to: '+1234', body: 'hi' }, 'INVALID_PHONE_NUMBER', 'to');
    expectRejected(sendSmsInput, { to: 'bob@example.com', body: 'hi' }, 'INVALID_PHONE_NUMBER', 'to');
    expectRejected(sendSmsInput, { to: 14155552671, body: 'hi' }, 'VALIDATION_ERROR', 'to');
  });

  it('requires a body (or template_id); empty or blank counts as missing', () => {
    expectRejected(sendSmsInput, { to: TO }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendSmsInput, { to: TO, body: '' }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendSmsInput, { to: TO, body: '   ' }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendSmsInput, { to: TO, body: null }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendSmsInput, { to: TO, variables: { a: 1 } }, 'MISSING_REQUIRED_FIELD', 'body');
  });

  it('rejects body together with template_id', () => {
    expectRejected(sendSmsInput, { to: TO, body: 'hi', template_id: 'tpl_1' }, 'VALIDATION_ERROR', 'template_id');
  });

  it('allows 1600 characters (code points) and rejects 1601 with MESSAGE_TOO_LONG', () => {
    expect(parseInput(sendSmsInput, { to: TO, body: 'a'.repeat(1600) }).body).toHaveLength(1600);
    expectRejected(sendSmsInput, { to: TO, body: 'a'.repeat(1601) }, 'MESSAGE_TOO_LONG', 'body');
    // 1600 emoji are 3200 UTF-16 units but 1600 characters.
    expect(parseInput(sendSmsInput, { to: TO, body: '😀'.repeat(1600) }).body).toBeDefined();
    expectRejected(sendSmsInput, { to: TO, body: '😀'.repeat(1601) }, 'MESSAGE_TOO_LONG', 'body');
  });

  it('rejects a non-string body and non-object variables', () => {
    expectRejected(sendSmsInput, { to: TO, body: 42 }, 'VALIDATION_ERROR', 'body');
    expectRejected(sendSmsInput, { to: TO, template_id: 'tpl_1', variables: ['a'] }, 'VALIDATION_ERROR', 'variables');
  });

  it('reports the first problem in field order (to before body)', () => {
    expectRejected(sendSmsInput, { to: 'x', body: 'a'.repeat(2000) }, 'INVALID_PHONE_NUMBER', 'to');
  });
});

describe('sendWhatsAppInput', () => {
  const template = { name: 'order_update', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ada' }] }] };

  it('accepts { to, text: { body } }', () => {
    expect(parseInput(sendWhatsAppInput, { to: TO, text: { body: 'Hello' } })).toStrictEqual({ to: TO, kind: 'text', text: { body: 'Hello' } });
  });

  it('accepts { to, type: text, body } and { to, type: text, text: { body } }', () => {
    expect(parseInput(sendWhatsAppInput, { to: TO, type: 'text', body: 'Hello' })).toStrictEqual({ to: TO, kind: 'text', text: { body: 'Hello' } });
    expect(parseInput(sendWhatsAppInput, { to: TO, type: 'text', text: { body: 'Hello' } })).toStrictEqual({ to: TO, kind: 'text', text: { body: 'Hello' } });
  });

  it('accepts a top-level body without type as text', () => {
    expect(parseInput(sendWhatsAppInput, { to: TO, body: 'Hello' })).toStrictEqual({ to: TO, kind: 'text', text: { body: 'Hello' } });
  });

  it('accepts { to, template } and { to, type: template, template }', () => {
    const expected = { to: TO, kind: 'template', template };
    expect(parseInput(sendWhatsAppInput, { to: TO, template })).toStrictEqual(expected);
    expect(parseInput(sendWhatsAppInput, { to: TO, type: 'template', template })).toStrictEqual(expected);
  });

  it('normalizes template language objects, defaults components and lower-cases component types', () => {
    expect(parseInput(sendWhatsAppInput, { to: TO, template: { name: 'hello_world', language: { code: 'en_US', policy: 'deterministic' } } }))
      .toStrictEqual({ to: TO, kind: 'template', template: { name: 'hello_world', language: 'en_US', components: [] } });
    const out = parseInput(sendWhatsAppInput, {
      to: TO, type: 'template',
      template: { name: 'x', language: 'tr', components: [{ type: 'BODY', parameters: [{ type: 'text', text: '1' }, { text: '2' }, { type: 'currency' }] }, { type: 'header' }] },
    });
    expect(out.template).toStrictEqual({
      name: 'x', language: 'tr',
      components: [{ type: 'body', parameters: [{ type: 'text', text: '1' }, { type: 'text', text: '2' }, { type: 'currency' }] }, { type: 'header', parameters: [] }],
    });
  });

  it('requires template.name and template.language', () => {
    expectRejected(sendWhatsAppInput, { to: TO, template: { language: 'en' } }, 'MISSING_REQUIRED_FIELD', 'template.name');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: '', language: 'en' } }, 'MISSING_REQUIRED_FIELD', 'template.name');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: 'x' } }, 'MISSING_REQUIRED_FIELD', 'template.language');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: 'x', language: {} } }, 'MISSING_REQUIRED_FIELD', 'template.language.code');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: 'x', language: 'english!' } }, 'VALIDATION_ERROR', 'template.language');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: 'x', language: 5 } }, 'VALIDATION_ERROR', 'template.language');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: 'x', language: 'en', components: {} } }, 'VALIDATION_ERROR', 'template.components');
    expectRejected(sendWhatsAppInput, { to: TO, template: { name: 'x', language: 'en', components: [{ parameters: [] }] } }, 'MISSING_REQUIRED_FIELD', 'template.components.0.type');
  });

  it('requires one of text, template or media', () => {
    expectRejected(sendWhatsAppInput, { to: TO }, 'MISSING_REQUIRED_FIELD', 'text');
    expectRejected(sendWhatsAppInput, { to: TO, body: '' }, 'MISSING_REQUIRED_FIELD', 'text');
    expectRejected(sendWhatsAppInput, { to: TO, type: 'text' }, 'MISSING_REQUIRED_FIELD', 'text');
    expectRejected(sendWhatsAppInput, { to: TO, text: {} }, 'MISSING_REQUIRED_FIELD', 'text.body');
    expectRejected(sendWhatsAppInput, { to: TO, text: { body: ' ' } }, 'MISSING_REQUIRED_FIELD', 'text.body');
    expectRejected(sendWhatsAppInput, { to: TO, type: 'template' }, 'MISSING_REQUIRED_FIELD', 'template');
    expectRejected(sendWhatsAppInput, { to: TO, type: 'image' }, 'MISSING_REQUIRED_FIELD', 'media');
    expectRejected(sendWhatsAppInput, { text: { body: 'x' } }, 'MISSING_REQUIRED_FIELD', 'to');
  });

  it('rejects more than one kind of content without a type, and unknown types', () => {
    expectRejected(sendWhatsAppInput, { to: TO, text: { body: 'x' }, template }, 'VALIDATION_ERROR', 'template');
    expectRejected(sendWhatsAppInput, { to: TO, template, media: { type: 'image', url: 'https://e.com/a.png' } }, 'VALIDATION_ERROR', 'media');
    expectRejected(sendWhatsAppInput, { to: TO, type: 'sticker', text: { body: 'x' } }, 'VALIDATION_ERROR', 'type');
  });

  it('uses the content named by type when several are given', () => {
    expect(parseInput(sendWhatsAppInput, { to: TO, type: 'template', template, text: { body: 'ignored' } }).kind).toBe('template');
  });

  it('limits text bodies to 4096 characters with MESSAGE_TOO_LONG', () => {
    expect(parseInput(sendWhatsAppInput, { to: TO, text: { body: 'a'.repeat(4096) } }).text?.body).toHaveLength(4096);
    expectRejected(sendWhatsAppInput, { to: TO, text: { body: 'a'.repeat(4097) } }, 'MESSAGE_TOO_LONG', 'text.body');
    expectRejected(sendWhatsAppInput, { to: TO, type: 'text', body: 'a'.repeat(4097) }, 'MESSAGE_TOO_LONG', 'body');
  });

  it('validates the recipient', () => {
    expectRejected(sendWhatsAppInput, { to: '555-1234', text: { body: 'x' } }, 'INVALID_PHONE_NUMBER', 'to');
  });

  describe('media', () => {
    const image = { url: 'https://cdn.example.com/cat.jpg', mime_type: 'image/jpeg', size_bytes: 1000, caption: 'A cat' };

    it('accepts { to, media: { type, url, … } }', () => {
      expect(parseInput(sendWhatsAppInput, { to: TO, media: { type: 'image', ...image } }))
        .toStrictEqual({ to: TO, kind: 'media', media: { type: 'image', ...image } });
    });

    it('accepts { to, type: image|video|document|audio, media: { url, … } }', () => {
      expect(parseInput(sendWhatsAppInput, { to: TO, type: 'image', media: image })).toStrictEqual({ to: TO, kind: 'media', media: { type: 'image', ...image } });
      expect(parseInput(sendWhatsAppInput, { to: TO, type: 'document', media: { url: 'https://e.com/x.pdf', filename: 'x.pdf', mime_type: 'application/pdf' } }))
        .toStrictEqual({ to: TO, kind: 'media', media: { type: 'document', url: 'https://e.com/x.pdf', filename: 'x.pdf', mime_type: 'application/pdf' } });
      expect(parseInput(sendWhatsAppInput, { to: TO, type: 'video', media: { url: 'https://e.com/v.mp4', mime_type: 'video/3gpp' } }).media?.type).toBe('video');
      expect(parseInput(sendWhatsAppInput, { to: TO, type: 'audio', media: { url: 'https://e.com/a.ogg', mime_type: 'Audio/OGG; codecs=opus' } }).media)
        .toStrictEqual({ type: 'audio', url: 'https://e.com/a.ogg', mime_type: 'audio/ogg; codecs=opus' });
    });

    it('needs a media type and a matching one', () => {
      expectRejected(sendWhatsAppInput, { to: TO, media: { url: 'https://e.com/a.png' } }, 'MISSING_REQUIRED_FIELD', 'media.type');
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { type: 'video', url: 'https://e.com/a.png' } }, 'VALIDATION_ERROR', 'media.type');
      expectRejected(sendWhatsAppInput, { to: TO, media: { type: 'gif', url: 'https://e.com/a.png' } }, 'VALIDATION_ERROR', 'media.type');
    });

    it('requires an https url', () => {
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: {} }, 'MISSING_REQUIRED_FIELD', 'media.url');
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { url: '' } }, 'MISSING_REQUIRED_FIELD', 'media.url');
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { url: 'http://e.com/a.png' } }, 'VALIDATION_ERROR', 'media.url');
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { url: 'file:///etc/passwd' } }, 'VALIDATION_ERROR', 'media.url');
    });

    it('enforces the size limits per type with MEDIA_TOO_LARGE', () => {
      const cases = [['image', 5 * MB, 'image/png'], ['video', 16 * MB, 'video/mp4'], ['audio', 16 * MB, 'audio/mpeg'], ['document', 100 * MB, 'application/pdf']] as const;
      for (const [type, limit, mime] of cases) {
        const media = { url: 'https://e.com/f', mime_type: mime };
        expect(parseInput(sendWhatsAppInput, { to: TO, type, media: { ...media, size_bytes: limit } }).media?.size_bytes, type).toBe(limit);
        expectRejected(sendWhatsAppInput, { to: TO, type, media: { ...media, size_bytes: limit + 1 } }, 'MEDIA_TOO_LARGE', 'media.size_bytes');
        expectRejected(sendWhatsAppInput, { to: TO, media: { type, ...media, size_bytes: limit + 1 } }, 'MEDIA_TOO_LARGE', 'media.size_bytes');
      }
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { url: 'https://e.com/f', size_bytes: -1 } }, 'VALIDATION_ERROR', 'media.size_bytes');
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { url: 'https://e.com/f', size_bytes: 1.5 } }, 'VALIDATION_ERROR', 'media.size_bytes');
    });

    it('allows only the spec MIME types per media type', () => {
      for (const [type, mime] of [['image', 'image/gif'], ['image', 'image/webp'], ['video', 'video/quicktime'], ['audio', 'audio/wav'], ['image', 'video/mp4']] as const) {
        expectRejected(sendWhatsAppInput, { to: TO, type, media: { url: 'https://e.com/f', mime_type: mime } }, 'VALIDATION_ERROR', 'media.mime_type');
      }
      for (const [type, mime] of [['image', 'image/jpeg'], ['image', 'image/png'], ['video', 'video/mp4'], ['video', 'video/3gpp'], ['audio', 'audio/aac'], ['audio', 'audio/mpeg'], ['audio', 'audio/ogg'], ['document', 'text/csv']] as const) {
        expect(parseInput(sendWhatsAppInput, { to: TO, type, media: { url: 'https://e.com/f', mime_type: mime } }).media?.mime_type).toBe(mime);
      }
      expectRejected(sendWhatsAppInput, { to: TO, type: 'document', media: { url: 'https://e.com/f', mime_type: 'not a mime' } }, 'VALIDATION_ERROR', 'media.mime_type');
    });

    it('limits captions to 1024 characters', () => {
      expectRejected(sendWhatsAppInput, { to: TO, type: 'image', media: { url: 'https://e.com/f', caption: 'c'.repeat(1025) } }, 'MESSAGE_TOO_LONG', 'media.caption');
    });
  });
});

describe('sendEmailInput', () => {
  it('accepts a single address, lower-cased, as a one-element array', () => {
    expect(parseInput(sendEmailInput, { to: 'Bounce@Sandbox.TEST', subject: 'Hi', text: 'Body' }))
      .toStrictEqual({ to: ['bounce@sandbox.test'], subject: 'Hi', text: 'Body' });
  });

  it('accepts an array of up to 50 addresses and drops duplicates', () => {
    const fifty = Array.from({ length: 50 }, (_, i) => `user${i}@example.com`);
    expect(parseInput(sendEmailInput, { to: fifty, subject: 'Hi', html: '<p>x</p>' }).to).toEqual(fifty);
    expect(parseInput(sendEmailInput, { to: ['A@x.io', 'a@X.io', 'b@x.io'], subject: 'Hi', html: '<p>x</p>' }).to).toEqual(['a@x.io', 'b@x.io']);
    expect(expectRejected(sendEmailInput, { to: [...fifty, 'one@more.com'], subject: 'Hi', text: 'x' }, 'VALIDATION_ERROR', 'to')).toMatch(/at most 50/);
  });

  it('keeps html, text, from, reply_to, webhook_url and metadata', () => {
    expect(parseInput(sendEmailInput, {
      to: ['a@example.com'], subject: 'S', html: '<b>x</b>', text: 'x', from: 'Sender@Example.com', reply_to: 'Reply@Example.com',
      webhook_url: 'https://h.example.com', metadata: { k: 'v' },
    })).toStrictEqual({
      to: ['a@example.com'], subject: 'S', html: '<b>x</b>', text: 'x', from: 'sender@example.com', reply_to: 'reply@example.com',
      webhook_url: 'https://h.example.com', metadata: { k: 'v' },
    });
  });

  it('requires to and rejects invalid addresses with INVALID_EMAIL on the element', () => {
    expectRejected(sendEmailInput, { subject: 'S', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'to');
    expectRejected(sendEmailInput, { to: [], subject: 'S', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'to');
    expectRejected(sendEmailInput, { to: '', subject: 'S', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'to');
    expectRejected(sendEmailInput, { to: 'nope', subject: 'S', text: 'x' }, 'INVALID_EMAIL', 'to');
    expectRejected(sendEmailInput, { to: ['ok@example.com', 'bad@'], subject: 'S', text: 'x' }, 'INVALID_EMAIL', 'to.1');
    expectRejected(sendEmailInput, { to: ['ok@example.com', 5], subject: 'S', text: 'x' }, 'VALIDATION_ERROR', 'to.1');
    expectRejected(sendEmailInput, { to: { address: 'a@b.co' }, subject: 'S', text: 'x' }, 'VALIDATION_ERROR', 'to');
  });

  it('validates from and reply_to as emails', () => {
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S', text: 'x', from: 'Acme <a@b.co>' }, 'INVALID_EMAIL', 'from');
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S', text: 'x', reply_to: 'nobody' }, 'INVALID_EMAIL', 'reply_to');
  });

  it('requires a subject of at most 998 characters on one line', () => {
    expectRejected(sendEmailInput, { to: 'a@b.co', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'subject');
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: '', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'subject');
    expect(parseInput(sendEmailInput, { to: 'a@b.co', subject: 's'.repeat(998), text: 'x' }).subject).toHaveLength(998);
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 's'.repeat(999), text: 'x' }, 'VALIDATION_ERROR', 'subject');
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'Hi\r\nBcc: x@evil.com', text: 'x' }, 'VALIDATION_ERROR', 'subject');
  });

  it('requires html and/or text', () => {
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S' }, 'MISSING_REQUIRED_FIELD', 'text');
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S', html: '', text: ' ' }, 'MISSING_REQUIRED_FIELD', 'text');
    expect(parseInput(sendEmailInput, { to: 'a@b.co', subject: 'S', html: '<p>x</p>', text: '' })).toStrictEqual({ to: ['a@b.co'], subject: 'S', html: '<p>x</p>' });
  });

  it('limits html + text to 1 MB with MESSAGE_TOO_LONG', () => {
    expect(parseInput(sendEmailInput, { to: 'a@b.co', subject: 'S', html: 'h'.repeat(MB / 2), text: 't'.repeat(MB / 2) }).html).toHaveLength(MB / 2);
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S', html: 'h'.repeat(MB / 2 + 1), text: 't'.repeat(MB / 2) }, 'MESSAGE_TOO_LONG', 'html');
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S', text: 't'.repeat(MB + 1) }, 'MESSAGE_TOO_LONG', 'text');
    // UTF-8 bytes count: 'ş' is two bytes.
    expectRejected(sendEmailInput, { to: 'a@b.co', subject: 'S', text: 'ş'.repeat(MB / 2 + 1) }, 'MESSAGE_TOO_LONG', 'text');
  });
});

describe('sendRcsInput', () => {
  const card = { title: 'Sale', description: 'Half price', media_url: 'https://e.com/sale.png', suggestions: [{ type: 'action', text: 'Shop', url: 'https://e.com/shop' }] };

  it('defaults to type text with a body and keeps suggestions and fallback', () => {
    expect(parseInput(sendRcsInput, {
      to: TO, body: 'Hi', suggestions: [{ type: 'reply', text: 'Yes' }, { type: 'action', text: 'Open', url: 'https://e.com' }], fallback: { channel: 'sms', body: 'Hi (SMS)' },
    })).toStrictEqual({
      to: TO, type: 'text', body: 'Hi', suggestions: [{ type: 'reply', text: 'Yes' }, { type: 'action', text: 'Open', url: 'https://e.com' }], fallback: { channel: 'sms', body: 'Hi (SMS)' },
    });
  });

  it('accepts template_id instead of a body and a fallback without body or channel', () => {
    expect(parseInput(sendRcsInput, { to: TO, type: 'text', template_id: 'tpl_1', variables: { a: 1 }, fallback: {} }))
      .toStrictEqual({ to: TO, type: 'text', template_id: 'tpl_1', variables: { a: 1 }, fallback: { channel: 'sms' } });
  });

  it('accepts a rich card', () => {
    expect(parseInput(sendRcsInput, { to: TO, type: 'rich_card', card })).toStrictEqual({ to: TO, type: 'rich_card', card });
    expect(parseInput(sendRcsInput, { to: TO, type: 'rich_card', card: { title: 'Only a title' } }).card).toStrictEqual({ title: 'Only a title' });
  });

  it('accepts a carousel of 2 to 10 cards and rejects 11 saying at most 10 cards', () => {
    expect(parseInput(sendRcsInput, { to: TO, type: 'carousel', cards: [card, card] }).cards).toHaveLength(2);
    expect(parseInput(sendRcsInput, { to: TO, type: 'carousel', cards: Array(10).fill(card) }).cards).toHaveLength(10);
    expect(expectRejected(sendRcsInput, { to: TO, type: 'carousel', cards: Array(11).fill(card) }, 'VALIDATION_ERROR', 'cards')).toMatch(/at most 10 cards/);
    expectRejected(sendRcsInput, { to: TO, type: 'carousel', cards: [card] }, 'VALIDATION_ERROR', 'cards');
    expectRejected(sendRcsInput, { to: TO, type: 'carousel' }, 'MISSING_REQUIRED_FIELD', 'cards');
  });

  it('requires the content of each type', () => {
    expectRejected(sendRcsInput, { to: TO }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendRcsInput, { to: TO, type: 'text', body: '' }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendRcsInput, { to: TO, type: 'rich_card' }, 'MISSING_REQUIRED_FIELD', 'card');
    expectRejected(sendRcsInput, { to: TO, type: 'rich_card', card: {} }, 'MISSING_REQUIRED_FIELD', 'card.title');
    expectRejected(sendRcsInput, { to: TO, body: 'x', template_id: 'tpl_1' }, 'VALIDATION_ERROR', 'template_id');
    expectRejected(sendRcsInput, { to: TO, type: 'video', body: 'x' }, 'VALIDATION_ERROR', 'type');
  });

  it('limits the body to 3072 characters with MESSAGE_TOO_LONG', () => {
    expect(parseInput(sendRcsInput, { to: TO, body: 'a'.repeat(3072) }).body).toHaveLength(3072);
    expectRejected(sendRcsInput, { to: TO, body: 'a'.repeat(3073) }, 'MESSAGE_TOO_LONG', 'body');
    expectRejected(sendRcsInput, { to: TO, body: 'x', fallback: { body: 'a'.repeat(1601) } }, 'MESSAGE_TOO_LONG', 'fallback.body');
  });

  it('only falls back to sms', () => {
    expectRejected(sendRcsInput, { to: TO, body: 'x', fallback: { channel: 'whatsapp' } }, 'VALIDATION_ERROR', 'fallback.channel');
  });

  it('validates suggestions', () => {
    expectRejected(sendRcsInput, { to: TO, body: 'x', suggestions: [{ type: 'action', text: 'Open' }] }, 'MISSING_REQUIRED_FIELD', 'suggestions.0.url');
    expectRejected(sendRcsInput, { to: TO, body: 'x', suggestions: [{ type: 'action', text: 'Open', url: 'http://e.com' }] }, 'VALIDATION_ERROR', 'suggestions.0.url');
    expectRejected(sendRcsInput, { to: TO, body: 'x', suggestions: [{ type: 'call', text: 'Call' }] }, 'VALIDATION_ERROR', 'suggestions.0.type');
    expectRejected(sendRcsInput, { to: TO, body: 'x', suggestions: [{ type: 'reply' }] }, 'MISSING_REQUIRED_FIELD', 'suggestions.0.text');
    expect(parseInput(sendRcsInput, { to: TO, body: 'x', suggestions: [{ type: 'reply', text: 't'.repeat(25) }] }).suggestions).toHaveLength(1);
    expectRejected(sendRcsInput, { to: TO, body: 'x', suggestions: [{ type: 'reply', text: 't'.repeat(26) }] }, 'VALIDATION_ERROR', 'suggestions.0.text');
    const reply = { type: 'reply', text: 'ok' };
    expect(parseInput(sendRcsInput, { to: TO, body: 'x', suggestions: Array(11).fill(reply) }).suggestions).toHaveLength(11);
    expectRejected(sendRcsInput, { to: TO, body: 'x', suggestions: Array(12).fill(reply) }, 'VALIDATION_ERROR', 'suggestions');
  });

  it('validates cards', () => {
    const rich = (c: unknown) => ({ to: TO, type: 'rich_card', card: c });
    expect(parseInput(sendRcsInput, rich({ title: 't'.repeat(200) })).card?.title).toHaveLength(200);
    expectRejected(sendRcsInput, rich({ title: 't'.repeat(201) }), 'VALIDATION_ERROR', 'card.title');
    expectRejected(sendRcsInput, rich({ title: 't', description: 'd'.repeat(2001) }), 'VALIDATION_ERROR', 'card.description');
    expectRejected(sendRcsInput, rich({ title: 't', media_url: 'http://e.com/x.png' }), 'VALIDATION_ERROR', 'card.media_url');
    const reply = { type: 'reply', text: 'ok' };
    expect(parseInput(sendRcsInput, rich({ title: 't', suggestions: Array(4).fill(reply) })).card?.suggestions).toHaveLength(4);
    expectRejected(sendRcsInput, rich({ title: 't', suggestions: Array(5).fill(reply) }), 'VALIDATION_ERROR', 'card.suggestions');
    expectRejected(sendRcsInput, { to: TO, type: 'carousel', cards: [card, { title: '' }] }, 'MISSING_REQUIRED_FIELD', 'cards.1.title');
  });

  it('validates the recipient', () => {
    expectRejected(sendRcsInput, { to: 'abc', body: 'x' }, 'INVALID_PHONE_NUMBER', 'to');
  });
});

describe('sendViberInput', () => {
  it('accepts a body, a template, or only a media_url', () => {
    expect(parseInput(sendViberInput, { to: TO, body: 'Hi', button: { text: 'Open', url: 'https://e.com' } }))
      .toStrictEqual({ to: TO, body: 'Hi', button: { text: 'Open', url: 'https://e.com' } });
    expect(parseInput(sendViberInput, { to: TO, template_id: 'tpl_1', variables: { a: 'b' } })).toStrictEqual({ to: TO, template_id: 'tpl_1', variables: { a: 'b' } });
    expect(parseInput(sendViberInput, { to: TO, media_url: 'https://e.com/a.png' })).toStrictEqual({ to: TO, media_url: 'https://e.com/a.png' });
    expect(parseInput(sendViberInput, { to: TO, body: 'Look', media_url: 'https://e.com/a.png' })).toStrictEqual({ to: TO, body: 'Look', media_url: 'https://e.com/a.png' });
  });

  it('requires body, template_id or media_url', () => {
    expectRejected(sendViberInput, { to: TO }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendViberInput, { to: TO, body: '' }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendViberInput, { to: TO, button: { text: 'Open', url: 'https://e.com' } }, 'MISSING_REQUIRED_FIELD', 'body');
    expectRejected(sendViberInput, { to: TO, body: 'x', template_id: 'tpl_1' }, 'VALIDATION_ERROR', 'template_id');
  });

  it('limits the body to 7000 characters with MESSAGE_TOO_LONG', () => {
    expect(parseInput(sendViberInput, { to: TO, body: 'a'.repeat(7000) }).body).toHaveLength(7000);
    expectRejected(sendViberInput, { to: TO, body: 'a'.repeat(7001) }, 'MESSAGE_TOO_LONG', 'body');
  });

  it('validates media_url, button and recipient', () => {
    expectRejected(sendViberInput, { to: TO, media_url: 'http://e.com/a.png' }, 'VALIDATION_ERROR', 'media_url');
    expectRejected(sendViberInput, { to: TO, body: 'x', button: { text: 'Open' } }, 'MISSING_REQUIRED_FIELD', 'button.url');
    expectRejected(sendViberInput, { to: TO, body: 'x', button: { url: 'https://e.com' } }, 'MISSING_REQUIRED_FIELD', 'button.text');
    expectRejected(sendViberInput, { to: TO, body: 'x', button: { text: 'Open', url: 'javascript:alert(1)' } }, 'VALIDATION_ERROR', 'button.url');
    expectRejected(sendViberInput, { to: TO, body: 'x', button: { text: 'b'.repeat(31), url: 'https://e.com' } }, 'VALIDATION_ERROR', 'button.text');
    expectRejected(sendViberInput, { to: '+1', body: 'x' }, 'INVALID_PHONE_NUMBER', 'to');
  });
});

describe('listMessagesInput', () => {
  it('accepts every filter and drops absent ones', () => {
    expect(parseInput(listMessagesInput, {})).toStrictEqual({});
    expect(parseInput(listMessagesInput, { cursor: 'abc', limit: 50, channel: 'sms', status: 'delivered', to: '+15005550001', direction: 'outbound' }))
      .toStrictEqual({ cursor: 'abc', limit: 50, channel: 'sms', status: 'delivered', to: '+15005550001', direction: 'outbound' });
    expect(parseInput(listMessagesInput, { cursor: undefined, limit: undefined, channel: null })).toStrictEqual({});
  });

  it('normalizes the recipient filter', () => {
    expect(parseInput(listMessagesInput, { to: '+1 415 555 2671' }).to).toBe('+14155552671');
    // `?to=+1415…` decodes the '+' to a space.
    expect(parseInput(listMessagesInput, { to: ' 14155552671' }).to).toBe('+14155552671');
    expect(parseInput(listMessagesInput, { to: 'Bounce@Sandbox.test' }).to).toBe('bounce@sandbox.test');
    expect(parseInput(listMessagesInput, { to: 'whatever' }).to).toBe('whatever');
  });

  it('rejects bad enums and a non-integer limit', () => {
    expectRejected(listMessagesInput, { channel: 'fax' }, 'VALIDATION_ERROR', 'channel');
    expectRejected(listMessagesInput, { status: 'bounced' }, 'VALIDATION_ERROR', 'status');
    expectRejected(listMessagesInput, { direction: 'sideways' }, 'VALIDATION_ERROR', 'direction');
    expectRejected(listMessagesInput, { limit: 1.5 }, 'VALIDATION_ERROR', 'limit');
    expectRejected(listMessagesInput, { limit: '10' }, 'VALIDATION_ERROR', 'limit');
    expectRejected(listMessagesInput, { cursor: '' }, 'VALIDATION_ERROR', 'cursor');
  });

  it('leaves the limit range to the service', () => {
    expect(parseInput(listMessagesInput, { limit: 1000 }).limit).toBe(1000);
  });
});

describe('createTemplateInput', () => {
  const valid = { channel: 'sms', name: 'otp_code', content: 'Your code is {{code}}' };

  it('accepts the minimum and defaults language to en', () => {
    expect(parseInput(createTemplateInput, valid)).toStrictEqual({ ...valid, language: 'en' });
  });

  it('keeps every field and normalizes category and variables', () => {
    expect(parseInput(createTemplateInput, {
      channel: 'whatsapp', name: ' order.update-v2 ', content: 'Hi {{ name }}, order {{order_id}}', category: 'MARKETING', language: 'en_US',
      variables: ['name', { name: 'order_id', example: 'A-1', required: true }], status: 'draft',
    })).toStrictEqual({
      channel: 'whatsapp', name: 'order.update-v2', content: 'Hi {{ name }}, order {{order_id}}', category: 'marketing', language: 'en_US',
      variables: [{ name: 'name' }, { name: 'order_id', example: 'A-1', required: true }], status: 'draft',
    });
    expect(parseInput(createTemplateInput, { ...valid, status: 'pending_approval', category: 'otp', language: 'tr' }).status).toBe('pending_approval');
    expect(parseInput(createTemplateInput, { ...valid, language: 'ar' }).language).toBe('ar');
  });

  it('requires channel, name and content', () => {
    expectRejected(createTemplateInput, { name: 'x', content: 'y' }, 'MISSING_REQUIRED_FIELD', 'channel');
    expectRejected(createTemplateInput, { channel: 'sms', content: 'y' }, 'MISSING_REQUIRED_FIELD', 'name');
    expectRejected(createTemplateInput, { channel: 'sms', name: ' ', content: 'y' }, 'MISSING_REQUIRED_FIELD', 'name');
    expectRejected(createTemplateInput, { channel: 'sms', name: 'x' }, 'MISSING_REQUIRED_FIELD', 'content');
    expectRejected(createTemplateInput, { channel: 'sms', name: 'x', content: '' }, 'MISSING_REQUIRED_FIELD', 'content');
  });

  it('validates channel, name, content length, category, language and status', () => {
    expectRejected(createTemplateInput, { ...valid, channel: 'fax' }, 'VALIDATION_ERROR', 'channel');
    expectRejected(createTemplateInput, { ...valid, name: 'has space' }, 'VALIDATION_ERROR', 'name');
    expectRejected(createTemplateInput, { ...valid, name: 'n'.repeat(101) }, 'VALIDATION_ERROR', 'name');
    expect(parseInput(createTemplateInput, { ...valid, name: 'n'.repeat(100) }).name).toHaveLength(100);
    expect(parseInput(createTemplateInput, { ...valid, content: 'c'.repeat(4096) }).content).toHaveLength(4096);
    expectRejected(createTemplateInput, { ...valid, content: 'c'.repeat(4097) }, 'VALIDATION_ERROR', 'content');
    expectRejected(createTemplateInput, { ...valid, category: 'two words' }, 'VALIDATION_ERROR', 'category');
    expectRejected(createTemplateInput, { ...valid, category: 'c'.repeat(51) }, 'VALIDATION_ERROR', 'category');
    expectRejected(createTemplateInput, { ...valid, language: 'english please' }, 'VALIDATION_ERROR', 'language');
    expectRejected(createTemplateInput, { ...valid, status: 'approved' }, 'VALIDATION_ERROR', 'status');
  });

  it('rejects malformed content with INVALID_TEMPLATE on content', () => {
    for (const content of ['Hello {{ unclosed', 'Hello }}', 'Hi {{ first name }}', '{{}}']) {
      expectRejected(createTemplateInput, { ...valid, content }, 'INVALID_TEMPLATE', 'content');
    }
  });

  it('validates variable definitions', () => {
    expectRejected(createTemplateInput, { ...valid, variables: ['bad name'] }, 'VALIDATION_ERROR', 'variables.0.name');
    expectRejected(createTemplateInput, { ...valid, variables: [{ example: 'x' }] }, 'MISSING_REQUIRED_FIELD', 'variables.0.name');
    expectRejected(createTemplateInput, { ...valid, variables: ['code', { name: 'code' }] }, 'VALIDATION_ERROR', 'variables.1.name');
    expectRejected(createTemplateInput, { ...valid, variables: 'code' }, 'VALIDATION_ERROR', 'variables');
    expectRejected(createTemplateInput, { ...valid, variables: [{ name: 'code', required: 'yes' }] }, 'VALIDATION_ERROR', 'variables.0.required');
  });
});

describe('updateTemplateInput', () => {
  it('accepts any subset of the fields', () => {
    expect(parseInput(updateTemplateInput, { content: 'New {{x}}' })).toStrictEqual({ content: 'New {{x}}' });
    expect(parseInput(updateTemplateInput, { name: 'n', category: 'Utility', language: 'tr', variables: ['x'], status: 'pending_approval' }))
      .toStrictEqual({ name: 'n', category: 'utility', language: 'tr', variables: [{ name: 'x' }], status: 'pending_approval' });
  });

  it('does not default the language', () => {
    expect(parseInput(updateTemplateInput, { name: 'n' })).toStrictEqual({ name: 'n' });
  });

  it('needs at least one field', () => {
    expectRejected(updateTemplateInput, {}, 'VALIDATION_ERROR', undefined);
    expectRejected(updateTemplateInput, { name: null, unknown: 1 }, 'VALIDATION_ERROR', undefined);
  });

  it('refuses to change the channel', () => {
    expectRejected(updateTemplateInput, { channel: 'sms', name: 'x' }, 'VALIDATION_ERROR', 'channel');
  });

  it('applies the create rules to the fields given', () => {
    expectRejected(updateTemplateInput, { content: '{{ oops' }, 'INVALID_TEMPLATE', 'content');
    expectRejected(updateTemplateInput, { name: 'bad name' }, 'VALIDATION_ERROR', 'name');
    expectRejected(updateTemplateInput, { status: 'approved' }, 'VALIDATION_ERROR', 'status');
  });
});
