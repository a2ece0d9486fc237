import net from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { domainOf, smtpErrorToProviderError, SmtpEmailProvider } from './smtp.ts';
import { ProviderError, type OutboundMessage } from './types.ts';

type Received = { from: string | undefined; rcpt: string[]; raw: string; user: string | undefined };

function smtpError(message: string, responseCode: number): Error {
  return Object.assign(new Error(message), { responseCode });
}

/** Header value by name from a raw message (first occurrence, unfolded). */
function header(raw: string, name: string): string | undefined {
  const head = raw.split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ');
  const line = head.split(/\r?\n/).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('SmtpEmailProvider', () => {
  const received: Received[] = [];
  let server: SMTPServer;
  let port: number;
  const providers: SmtpEmailProvider[] = [];

  function provider(url = `smtp://127.0.0.1:${port}`): SmtpEmailProvider {
    const p = new SmtpEmailProvider(url);
    providers.push(p);
    return p;
  }

  function email(overrides: Partial<OutboundMessage> = {}): OutboundMessage {
    return {
      id: 'msg_01JTESTEMAIL0001',
      channel: 'email',
      from: 'Acme Support <support@acme.test>',
      to: ['alice@example.com'],
      body: 'Hello Alice, your order shipped.',
      content: { subject: 'Your order', html: '<p>Hello <b>Alice</b>, your order shipped.</p>' },
      ...overrides,
    };
  }

  beforeAll(async () => {
    server = new SMTPServer({
      authOptional: true,
      allowInsecureAuth: true,
      // Plain SMTP: smtp-server's built-in STARTTLS certificate is self-signed.
      disabledCommands: ['STARTTLS'],
      logger: false,
      onAuth(auth, _session, callback) {
        if (auth.username === 'mailer' && auth.password === 's3cret') return callback(null, { user: auth.username });
        return callback(smtpError('Invalid credentials', 535));
      },
      onRcptTo(address, _session, callback) {
        if (address.address === 'reject@example.com') return callback(smtpError('No such user here', 550));
        if (address.address === 'busy@example.com') return callback(smtpError('Mailbox busy, try later', 451));
        return callback();
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          if (raw.includes('SPAMSPAM')) return callback(smtpError('Message rejected as spam', 554));
          received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
            rcpt: session.envelope.rcptTo.map((r) => r.address),
            raw,
            user: typeof session.user === 'string' ? session.user : undefined,
          });
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.server.address() as net.AddressInfo).port;
  });

  beforeEach(() => {
    received.length = 0;
  });

  afterAll(async () => {
    await Promise.all(providers.map((p) => p.close()));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('is the email channel, named smtp, and supports every recipient', async () => {
    const p = provider();
    expect([p.name, p.channel]).toEqual(['smtp', 'email']);
    expect(await p.supports('anyone@example.com')).toBe(true);
  });

  it('delivers from, to, subject, text, html, reply-to, X-Message-Id and a stable Message-ID', async () => {
    const p = provider();
    const msg = email({
      to: ['alice@example.com', 'bob@example.com'],
      content: { subject: 'Your order', html: '<p>Hello <b>Alice</b>, your order shipped.</p>', reply_to: 'help@acme.test' },
    });
    const result = await p.send(msg);
    expect(result.providerMessageId).toBe('<msg_01JTESTEMAIL0001@acme.test>');
    expect(received).toHaveLength(1);
    const { raw, from, rcpt } = received[0]!;
    expect(from).toBe('support@acme.test');
    expect(rcpt).toEqual(['alice@example.com', 'bob@example.com']);
    expect(header(raw, 'From')).toBe('Acme Support <support@acme.test>');
    expect(header(raw, 'To')).toBe('alice@example.com, bob@example.com');
    expect(header(raw, 'Subject')).toBe('Your order');
    expect(header(raw, 'Reply-To')).toBe('help@acme.test');
    expect(header(raw, 'X-Message-Id')).toBe('msg_01JTESTEMAIL0001');
    expect(header(raw, 'Message-ID')).toBe('<msg_01JTESTEMAIL0001@acme.test>');
    expect(header(raw, 'Content-Type')).toMatch(/^multipart\/alternative/);
    expect(raw).toContain('Content-Type: text/plain');
    expect(raw).toContain('Hello Alice, your order shipped.');
    expect(raw).toContain('Content-Type: text/html');
    expect(raw).toContain('<p>Hello <b>Alice</b>, your order shipped.</p>');
  });

  it('a retried send carries the same Message-ID, so the duplicate is recognisable downstream', async () => {
    const p = provider();
    const a = await p.send(email());
    const b = await p.send(email());
    expect(a).toEqual(b);
    expect(received.map((r) => header(r.raw, 'Message-ID'))).toEqual([a.providerMessageId, a.providerMessageId]);
  });

  it('prefers content.text over the body for the text part, and sends text only without html', async () => {
    const p = provider();
    await p.send(email({ body: 'from body', content: { subject: 'Plain', text: 'from content' } }));
    const { raw } = received[0]!;
    expect(raw).toContain('from content');
    expect(raw).not.toContain('from body');
    expect(header(raw, 'Content-Type')).toMatch(/^text\/plain/);
    expect(header(raw, 'Reply-To')).toBeUndefined();
  });

  it('logs in with the credentials of the URL', async () => {
    const p = provider(`smtp://mailer:s3cret@127.0.0.1:${port}`);
    await p.send(email());
    expect(received[0]!.user).toBe('mailer');
  });

  it('maps wrong credentials to a retryable PROVIDER_ERROR (ours to fix, not the message)', async () => {
    const p = provider(`smtp://mailer:wrong@127.0.0.1:${port}`);
    const err = await p.send(email()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect([(err as ProviderError).code, (err as ProviderError).retryable]).toEqual(['PROVIDER_ERROR', true]);
  });

  it('maps a 550 to RCPT to INVALID_RECIPIENT, not retryable', async () => {
    const p = provider();
    const err = await p.send(email({ to: ['reject@example.com'] })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect([(err as ProviderError).code, (err as ProviderError).retryable]).toEqual(['INVALID_RECIPIENT', false]);
    expect((err as ProviderError).message).toMatch(/550/);
    expect(received).toEqual([]);
  });

  it('maps a 4xx to RCPT to a retryable PROVIDER_ERROR', async () => {
    const p = provider();
    const err = await p.send(email({ to: ['busy@example.com'] })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect([(err as ProviderError).code, (err as ProviderError).retryable]).toEqual(['PROVIDER_ERROR', true]);
  });

  it('counts a partly rejected recipient list as sent (what went out cannot be taken back)', async () => {
    const p = provider();
    const result = await p.send(email({ to: ['alice@example.com', 'reject@example.com'] }));
    expect(result.providerMessageId).toBe('<msg_01JTESTEMAIL0001@acme.test>');
    expect(received[0]!.rcpt).toEqual(['alice@example.com']);
  });

  it('maps a permanent rejection of the content to a non-retryable PROVIDER_ERROR', async () => {
    const p = provider();
    const err = await p.send(email({ body: 'SPAMSPAM', content: { subject: 'x' } })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect([(err as ProviderError).code, (err as ProviderError).retryable]).toEqual(['PROVIDER_ERROR', false]);
  });

  it('maps a closed port to a retryable PROVIDER_ERROR', async () => {
    const p = provider(`smtp://127.0.0.1:${await freePort()}`);
    const err = await p.send(email()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect([(err as ProviderError).code, (err as ProviderError).retryable]).toEqual(['PROVIDER_ERROR', true]);
  });

  it('refuses a URL that is not smtp:// or smtps://', () => {
    expect(() => new SmtpEmailProvider('http://example.com')).toThrow(/smtp:\/\//);
    expect(() => new SmtpEmailProvider('not a url')).toThrow(/not a URL/);
    expect(() => provider('smtps://user:pass@smtp.example.com:465')).not.toThrow();
  });
});

describe('smtpErrorToProviderError', () => {
  it.each([
    [{ code: 'EENVELOPE', command: 'RCPT TO', responseCode: 550, permanent: true }, 'INVALID_RECIPIENT', false],
    [{ code: 'EENVELOPE', command: 'RCPT TO', responseCode: 452, permanent: false }, 'PROVIDER_ERROR', true],
    [{ code: 'EENVELOPE', command: 'MAIL FROM', responseCode: 553, permanent: true }, 'PROVIDER_ERROR', false],
    [{ code: 'EENVELOPE', command: 'API', message: 'No recipients defined' }, 'INVALID_RECIPIENT', false],
    [{ code: 'EENVELOPE', command: 'API', message: 'Invalid sender "x"' }, 'PROVIDER_ERROR', false],
    [{ code: 'ESOCKET', originalCode: 'ECONNREFUSED' }, 'PROVIDER_ERROR', true],
    [{ code: 'ETIMEDOUT' }, 'PROVIDER_ERROR', true],
    [{ code: 'EAUTH', responseCode: 535, permanent: true }, 'PROVIDER_ERROR', true],
    [{ code: 'EMESSAGE', responseCode: 503, permanent: false }, 'PROVIDER_ERROR', true],
  ])('%j → %s (retryable %s)', (props, code, retryable) => {
    const err = smtpErrorToProviderError(Object.assign(new Error((props as { message?: string }).message ?? 'boom'), props));
    expect([err.code, err.retryable]).toEqual([code, retryable]);
  });
});

describe('domainOf', () => {
  it.each([
    ['a@b.example', 'b.example'],
    ['Name <a@b.example>', 'b.example'],
    ['"Weird <x@y>" <a@mail.b.example>', 'mail.b.example'],
    ['no-domain', 'localhost'],
  ])('%s → %s', (from, domain) => {
    expect(domainOf(from)).toBe(domain);
  });
});
