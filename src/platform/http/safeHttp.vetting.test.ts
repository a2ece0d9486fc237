/** The URL policy of the safe HTTP client: checkWebhookUrl, vetHost (a bare host: SIP) and resolveAndVet (sending: safeHttp.post.test.ts). */
import { describe, expect, it } from 'vitest';
import {
  checkWebhookUrl,
  resolveAndVet,
  vetHost,
  type HostLookup,
  type UrlPolicy,
} from './safeHttp.ts';
import { failureOf, LOOPBACK, STRICT } from './safeHttp.testing.ts';


function reasonOf(raw: string, policy: UrlPolicy): string | undefined {
  const verdict = checkWebhookUrl(raw, policy);
  return verdict.ok ? undefined : verdict.reason;
}

function fixedLookup(answers: Record<string, string[]>): HostLookup {
  return async (host) => {
    const found = answers[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

describe('checkWebhookUrl', () => {
  it.each([
    'https://example.com/hooks',
    'https://hooks.example.com:8443/in?tenant=1',
    'https://example.com./trailing-dot',
    'https://xn--bcher-kva.ch/',
    'https://93.184.216.34/hook',
    'https://[2606:4700:4700::1111]/hook',
  ])('accepts %s', (raw) => {
    const verdict = checkWebhookUrl(raw, STRICT);
    expect(verdict.ok).toBe(true);
    if (verdict.ok) expect(verdict.url).toBeInstanceOf(URL);
  });

  it('returns the normalised URL (IDN to punycode)', () => {
    const verdict = checkWebhookUrl('https://Bücher.CH/Path', STRICT);
    expect(verdict.ok && verdict.url.href).toBe('https://xn--bcher-kva.ch/Path');
  });

  it.each([
    ['not a url', 'not valid'],
    ['', 'not valid'],
    ['//example.com/hook', 'not valid'],
    ['ftp://example.com/', 'https'],
    ['javascript:alert(1)', 'https'],
    ['file:///etc/passwd', 'https'],
    ['http://example.com/hook', 'https'],
    ['http://example.com:8080/hook', 'https'],
  ])('refuses %j (%s)', (raw, reason) => {
    expect(reasonOf(raw, STRICT)).toContain(reason);
  });

  it('names WEBHOOKS_ALLOW_LOOPBACK in the details of a refused loopback URL, and only there', () => {
    for (const raw of ['http://127.0.0.1:9999/hook', 'http://localhost:8080/in', 'https://127.0.0.1/x']) {
      const verdict = checkWebhookUrl(raw, STRICT);
      expect(verdict.ok, raw).toBe(false);
      expect(!verdict.ok && verdict.details, raw).toMatchObject({ allow_loopback: 'WEBHOOKS_ALLOW_LOOPBACK=1' });
    }
    const other = checkWebhookUrl('http://example.com/hook', STRICT);
    expect(!other.ok && other.details).toEqual({});
    expect(checkWebhookUrl('http://127.0.0.1:9999/hook', LOOPBACK).ok).toBe(true);
  });

  it.each(['https://user:secret@example.com/', 'https://user@example.com/', 'https://:secret@example.com/'])(
    'refuses userinfo in %s',
    (raw) => {
      expect(reasonOf(raw, STRICT)).toContain('credentials');
    },
  );

  it.each([
    'https://exa_mple.com/',
    'https://-bad.example.com/',
    'https://bad-.example.com/',
    'https://a..example.com/',
    `https://${'a'.repeat(64)}.example.com/`,
    'https://exa%20mple.com/',
  ])('refuses the syntactically invalid host name in %s', (raw) => {
    expect(reasonOf(raw, STRICT)).toBeDefined();
  });

  it.each(['https://localhost/', 'https://LOCALHOST:8443/', 'https://api.localhost/', 'https://printer.local/', 'https://db.internal/', 'https://nas.home.arpa/', 'https://intranet/'])(
    'refuses the local-only name %s',
    (raw) => {
      expect(reasonOf(raw, STRICT)).toBeDefined();
    },
  );

  it('refuses port 0', () => {
    expect(reasonOf('https://example.com:0/', STRICT)).toContain('port');
  });

  // Integer, octal, hexadecimal and short IPv4 spellings: WHATWG URL folds them to dotted quads.
  it.each([
    'https://2130706433/',
    'https://0x7f000001/',
    'https://017700000001/',
    'https://127.1/',
    'https://0x7f.1/',
    'https://0177.0.0.1/',
    'https://127.0.0.1/',
    'https://0/',
    'https://10.1/',
    'https://3232235777/', // 192.168.1.1
    'https://2852039166/latest/meta-data/', // 169.254.169.254
    'https://169.254.169.254/latest/meta-data/',
    'https://100.64.0.1/',
    'https://255.255.255.255/',
  ])('refuses the blocked IPv4 literal %s', (raw) => {
    expect(reasonOf(raw, STRICT)).toContain('address');
  });

  it.each([
    'https://[::1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[::ffff:7f00:1]/',
    'https://[0:0:0:0:0:ffff:127.0.0.1]/',
    'https://[::ffff:169.254.169.254]/',
    'https://[fe80::1]/',
    'https://[fc00::1]/',
    'https://[fd00:ec2::254]/',
    'https://[::]/',
    'https://[::127.0.0.1]/',
    'https://[64:ff9b::127.0.0.1]/',
    'https://[2002:7f00:1::]/',
    'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
    'https://[ff02::1]/',
  ])('refuses the blocked IPv6 literal %s', (raw) => {
    expect(reasonOf(raw, STRICT)).toContain('address');
  });

  describe('with the loopback switch', () => {
    it.each([
      'http://127.0.0.1:8080/hook',
      'http://localhost:3000/',
      'http://[::1]:3000/',
      'https://localhost:8443/',
      'https://127.0.0.1:8443/',
      // Folded to 127.0.0.1 by WHATWG URL before any check: it is the same loopback target.
      'http://2130706433:8080/',
    ])('accepts %s', (raw) => {
      expect(checkWebhookUrl(raw, LOOPBACK).ok).toBe(true);
    });

    it.each(['http://127.0.0.1:8080/hook', 'http://localhost:3000/', 'http://[::1]:3000/'])('still refuses %s without it', (raw) => {
      expect(checkWebhookUrl(raw, STRICT).ok).toBe(false);
    });

    it.each([
      ['http://127.0.0.1/hook', 'explicit port'],
      ['http://localhost/', 'explicit port'],
      ['http://example.com:8080/', 'https'],
      ['http://127.0.0.2:8080/', 'https'],
      ['http://[::ffff:127.0.0.1]:8080/', 'https'],
      ['http://10.0.0.1:8080/', 'https'],
      ['https://10.0.0.1/', 'address'],
      ['https://127.0.0.2/', 'address'],
      ['https://[::ffff:127.0.0.1]/', 'address'],
      ['https://api.localhost/', 'local'],
    ])('refuses %s (%s)', (raw, reason) => {
      expect(reasonOf(raw, LOOPBACK)).toContain(reason);
    });
  });
});

describe('resolveAndVet', () => {
  it('refuses a public-looking name that resolves to loopback (rebind.example → 127.0.0.1)', async () => {
    const lookup = fixedLookup({ 'rebind.example': ['127.0.0.1'] });
    expect((await failureOf(() => resolveAndVet('rebind.example', STRICT, lookup))).kind).toBe('blocked_address');
    // The switch is for localhost targets, not for any name that happens to resolve to loopback.
    expect((await failureOf(() => resolveAndVet('rebind.example', LOOPBACK, lookup))).kind).toBe('blocked_address');
  });

  it.each(['10.0.0.5', '169.254.169.254', '::ffff:127.0.0.1', 'fd00::1', '::'])('refuses a name resolving to %s', async (address) => {
    const lookup = fixedLookup({ 'evil.example': [address] });
    expect((await failureOf(() => resolveAndVet('evil.example', STRICT, lookup))).kind).toBe('blocked_address');
  });

  it('refuses when any one of several addresses is blocked', async () => {
    const lookup = fixedLookup({ 'mixed.example': ['93.184.216.34', '2606:4700::1', '192.168.1.10'] });
    expect((await failureOf(() => resolveAndVet('mixed.example', STRICT, lookup))).kind).toBe('blocked_address');
  });

  it('returns the first address of a public name', async () => {
    const lookup = fixedLookup({ 'hooks.example.com': ['2606:4700::1', '93.184.216.34'] });
    expect(await resolveAndVet('hooks.example.com', STRICT, lookup)).toEqual({ address: '2606:4700::1', family: 6 });
  });

  it('lets localhost through with the loopback switch only', async () => {
    const lookup = fixedLookup({ localhost: ['::1', '127.0.0.1'] });
    expect(await resolveAndVet('localhost', LOOPBACK, lookup)).toEqual({ address: '::1', family: 6 });
    expect((await failureOf(() => resolveAndVet('localhost', STRICT, lookup))).kind).toBe('blocked_address');
  });

  it('does not let localhost reach a non-loopback private address even with the switch', async () => {
    const lookup = fixedLookup({ localhost: ['127.0.0.1', '10.0.0.1'] });
    expect((await failureOf(() => resolveAndVet('localhost', LOOPBACK, lookup))).kind).toBe('blocked_address');
  });

  it('vets literal addresses without resolving them', async () => {
    let calls = 0;
    const lookup: HostLookup = async () => {
      calls += 1;
      return [];
    };
    expect(await resolveAndVet('127.0.0.1', LOOPBACK, lookup)).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await resolveAndVet('[::1]', LOOPBACK, lookup)).toEqual({ address: '::1', family: 6 });
    expect(await resolveAndVet('93.184.216.34', STRICT, lookup)).toEqual({ address: '93.184.216.34', family: 4 });
    expect((await failureOf(() => resolveAndVet('127.0.0.1', STRICT, lookup))).kind).toBe('blocked_address');
    expect((await failureOf(() => resolveAndVet('[::ffff:7f00:1]', LOOPBACK, lookup))).kind).toBe('blocked_address');
    expect(calls).toBe(0);
  });

  it('reports resolution failures and empty answers as connection errors', async () => {
    expect((await failureOf(() => resolveAndVet('nowhere.example', STRICT, fixedLookup({})))).kind).toBe('connection');
    expect((await failureOf(() => resolveAndVet('empty.example', STRICT, fixedLookup({ 'empty.example': [] })))).kind).toBe('connection');
  });
});

describe('vetHost (the same policy for a bare host, as SIP URIs carry)', () => {
  it.each(['trunk.example.com', 'sip.Carrier.NET', '93.184.216.34', '2606:4700:4700::1111', '[2606:4700:4700::1111]'])('accepts %s', (host) => {
    expect(vetHost(host, STRICT)).toMatchObject({ ok: true, loopback: false });
  });

  it.each([
    ['127.0.0.1', 'blocked_address'],
    ['169.254.169.254', 'blocked_address'],
    ['10.1.2.3', 'blocked_address'],
    ['192.168.0.10', 'blocked_address'],
    ['100.64.0.1', 'blocked_address'],
    ['0.0.0.0', 'blocked_address'],
    ['::1', 'blocked_address'],
    ['[fe80::1]', 'blocked_address'],
    ['fd00::1', 'blocked_address'],
    // IPv6 spellings of 127.0.0.1 and 169.254.169.254: mapped, NAT64, 6to4.
    ['::ffff:127.0.0.1', 'blocked_address'],
    ['[::ffff:a9fe:a9fe]', 'blocked_address'],
    ['64:ff9b::7f00:1', 'blocked_address'],
    ['2002:a9fe:a9fe::1', 'blocked_address'],
    // Numeric shorthands the resolver would read as 127.0.0.1.
    ['127.1', 'blocked_address'],
    ['2130706433', 'blocked_address'],
    ['0x7f.0.0.1', 'blocked_address'],
    ['localhost', 'blocked_address'],
    ['pbx.internal', 'blocked_address'],
    ['printer.local', 'blocked_address'],
    ['pbx', 'invalid_url'],
    ['evil.com:80@127.0.0.1', 'invalid_url'],
    ['a/b.example.com', 'invalid_url'],
    ['', 'invalid_url'],
  ])('refuses %s (%s)', (host, kind) => {
    const verdict = vetHost(host, STRICT);
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.kind).toBe(kind);
  });

  it('lets 127.0.0.1, ::1 and localhost through with the loopback switch only, nothing else private', () => {
    for (const host of ['127.0.0.1', '::1', '[::1]', 'localhost', '127.1']) {
      expect(vetHost(host, LOOPBACK), host).toMatchObject({ ok: true, loopback: true });
      expect(vetHost(host, STRICT), host).toMatchObject({ ok: false, loopback: true });
    }
    for (const host of ['127.0.0.2', '10.0.0.1', '169.254.169.254', '::ffff:127.0.0.1']) expect(vetHost(host, LOOPBACK).ok, host).toBe(false);
  });

  it('answers the canonical spelling', () => {
    expect(vetHost('TRUNK.Example.com', STRICT)).toMatchObject({ ok: true, host: 'trunk.example.com' });
    expect(vetHost('127.1', LOOPBACK)).toMatchObject({ ok: true, host: '127.0.0.1' });
    expect(vetHost('2606:4700:4700:0:0:0:0:1111', STRICT)).toMatchObject({ ok: true, host: '[2606:4700:4700::1111]' });
  });
});
