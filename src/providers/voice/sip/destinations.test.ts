/** The outbound address policy applied to SIP: a trunk URI's static check and the connect-time resolution. */
import { describe, expect, it } from 'vitest';
import type { HostLookup } from '../../../platform/http/safeHttp.ts';
import { SipDestinationBlocked, sipUriProblem, vetDestination } from './destinations.ts';

const STRICT = { allowLoopback: false };
const LOOPBACK = { allowLoopback: true };

function lookupOf(answers: Record<string, string[]>): HostLookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (host: string) => {
    asked.push(host);
    const found = answers[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: (address.includes(':') ? 6 : 4) as 4 | 6 }));
  };
  return Object.assign(lookup, { asked });
}

describe('sipUriProblem (a trunk URI when it is saved)', () => {
  it.each(['sip:trunk.example.com', 'sips:user@sip.carrier.net:5061', 'sip:93.184.216.34:5060;transport=tcp', 'sip:[2606:4700::1]:5060'])('accepts %s', (uri) => {
    expect(sipUriProblem(uri, STRICT)).toBeUndefined();
  });

  it.each([
    'sip:127.0.0.1:6303;transport=tcp',
    'sip:169.254.169.254:80',
    'sip:10.0.0.1',
    'sips:edge@192.168.1.20:5061',
    'sip:[::1]:5060',
    'sip:[::ffff:127.0.0.1]:5060',
    'sip:[64:ff9b::a9fe:a9fe]',
    'sip:[2002:7f00:1::]:5060',
    'sip:127.1:5060',
    'sip:2130706433:5060',
    'sip:localhost:5060',
    'sip:pbx.internal',
  ])('refuses %s as a blocked address', (uri) => {
    expect(sipUriProblem(uri, STRICT)).toMatchObject({ blocked: true });
  });

  it('refuses a port outside 1-65535 and what is not a SIP URI', () => {
    expect(sipUriProblem('sip:trunk.example.com:99999', STRICT)).toMatchObject({ blocked: false, reason: expect.stringContaining('port') });
    expect(sipUriProblem('sip:trunk.example.com:0', STRICT)).toMatchObject({ blocked: false });
    expect(sipUriProblem('https://trunk.example.com', STRICT)).toMatchObject({ blocked: false });
  });

  it('lets 127.0.0.1 through with the loopback switch (local development), and says a refused one is loopback', () => {
    expect(sipUriProblem('sip:127.0.0.1:5080', LOOPBACK)).toBeUndefined();
    expect(sipUriProblem('sip:127.0.0.1:5080', STRICT)).toMatchObject({ blocked: true, loopback: true });
    expect(sipUriProblem('sip:169.254.169.254', LOOPBACK)).toMatchObject({ blocked: true, loopback: false });
    expect(sipUriProblem('sip:10.0.0.1', LOOPBACK)).toMatchObject({ blocked: true });
  });
});

describe('vetDestination (every send: resolved and vetted then)', () => {
  it('refuses a public-looking name that resolves to a blocked address at connect time', async () => {
    for (const address of ['127.0.0.1', '169.254.169.254', '10.0.0.7', '::ffff:127.0.0.1', '64:ff9b::7f00:1']) {
      const lookup = lookupOf({ 'trunk.example.com': ['93.184.216.34', address] });
      await expect(vetDestination('trunk.example.com', STRICT, lookup), address).rejects.toBeInstanceOf(SipDestinationBlocked);
      expect(lookup.asked).toEqual(['trunk.example.com']);
    }
  });

  it('answers the address to send to, and vets literals without resolving them', async () => {
    const lookup = lookupOf({ 'trunk.example.com': ['93.184.216.34'] });
    expect(await vetDestination('trunk.example.com', STRICT, lookup)).toEqual({ address: '93.184.216.34', family: 4 });
    expect(await vetDestination('127.0.0.1', LOOPBACK, lookup)).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await vetDestination('127.1', LOOPBACK, lookup)).toEqual({ address: '127.0.0.1', family: 4 });
    await expect(vetDestination('127.0.0.1', STRICT, lookup)).rejects.toBeInstanceOf(SipDestinationBlocked);
    await expect(vetDestination('169.254.169.254', LOOPBACK, lookup)).rejects.toBeInstanceOf(SipDestinationBlocked);
    // Local names are refused before any lookup.
    await expect(vetDestination('sip.internal', STRICT, lookup)).rejects.toBeInstanceOf(SipDestinationBlocked);
    expect(lookup.asked).toEqual(['trunk.example.com']);
  });

  it('does not let the switch reach a name that resolves to loopback (only 127.0.0.1, ::1, localhost themselves)', async () => {
    const lookup = lookupOf({ 'rebind.example.com': ['127.0.0.1'] });
    await expect(vetDestination('rebind.example.com', LOOPBACK, lookup)).rejects.toBeInstanceOf(SipDestinationBlocked);
  });

  it('fails a name that does not resolve as a plain error (unreachable, not blocked)', async () => {
    const failure = await vetDestination('gone.example.com', STRICT, lookupOf({})).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(failure).not.toBeInstanceOf(SipDestinationBlocked);
  });
});
