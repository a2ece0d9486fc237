/** Pure voice rules: status order, billed minutes, IVR decisions, sandbox scripts, recording links and audio. */
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../platform/errors.ts';
import { sandboxScript, SANDBOX_CALL_MAGIC } from '../../providers/voice/sandbox.ts';
import { sandboxRecording } from '../../providers/voice/audio.ts';
import { RecordingLinks } from './recordings/recordings.ts';
import { billedMinutes, canMove, eventFor, pressKey, timeout, type IvrMenu, type IvrState } from './voice.states.ts';
import { DueTimes, tellDue, toldDue } from './sandbox/timeline.ts';

describe('call statuses', () => {
  it('move forward only; final statuses never change', () => {
    expect(canMove('initiating', 'ringing')).toBe(true);
    expect(canMove('ringing', 'in_progress')).toBe(true);
    expect(canMove('initiating', 'in_progress')).toBe(true);
    expect(canMove('in_progress', 'ringing')).toBe(false);
    expect(canMove('completed', 'failed')).toBe(false);
    expect(canMove('busy', 'completed')).toBe(false);
    expect(canMove('ringing', 'ringing')).toBe(false);
  });
  it('map to the five events', () => {
    expect(['initiating', 'ringing', 'in_progress', 'completed', 'cancelled', 'busy', 'no_answer', 'failed'].map((s) => eventFor(s as never)))
      .toEqual(['call.initiated', 'call.ringing', 'call.answered', 'call.completed', 'call.completed', 'call.failed', 'call.failed', 'call.failed']);
  });
  it('bill every started minute, at least one', () => {
    expect([0, 1, 59, 60, 61, 3600].map(billedMinutes)).toEqual([1, 1, 1, 1, 2, 60]);
  });
});

describe('IVR decisions', () => {
  const menu: IvrMenu = { options: [
    { key: '1', action: 'transfer_number', target: '+14155550100' },
    { key: '2', action: 'submenu', menu: { options: [{ key: '9', action: 'hangup' }] } },
    { key: '*', action: 'repeat' },
  ] };
  const start: IvrState = { path: [], prompt: 1, retries: 0, done: false };
  it('a known key takes its option and ends the menu', () => {
    const d = pressKey(menu, start, '1', 3);
    expect(d).toMatchObject({ kind: 'option', option: { action: 'transfer_number' }, state: { done: true } });
  });
  it('a submenu key descends and re-prompts; keys are then read in the submenu', () => {
    const d = pressKey(menu, start, '2', 3);
    expect(d).toMatchObject({ kind: 'option', state: { path: ['2'], prompt: 2, done: false } });
    expect(pressKey(menu, d.state, '9', 3)).toMatchObject({ kind: 'option', option: { action: 'hangup' } });
    expect(pressKey(menu, d.state, '1', 3)).toMatchObject({ kind: 'replay', reason: 'invalid_key' });
  });
  it('invalid keys and timeouts replay up to max_retries, then fall back', () => {
    let state = start;
    for (let i = 1; i <= 2; i++) {
      const d = i === 1 ? pressKey(menu, state, '7', 2) : timeout(state, 2);
      expect(d).toMatchObject({ kind: 'replay', state: { retries: i, prompt: 1 + i } });
      state = d.state;
    }
    expect(timeout(state, 2)).toMatchObject({ kind: 'fallback', state: { done: true } });
  });
});

describe('sandbox scripts', () => {
  const t = { ringMs: 10, answerMs: 20, noAnswerMs: 100 };
  it('follow the documented magic destinations', () => {
    expect(sandboxScript(SANDBOX_CALL_MAGIC.busy, t).map((s) => s.type)).toEqual(['ringing', 'busy']);
    expect(sandboxScript(SANDBOX_CALL_MAGIC.noAnswer, t).at(-1)).toEqual({ type: 'no_answer', afterMs: 110 });
    expect(sandboxScript(SANDBOX_CALL_MAGIC.failed, t).at(-1)).toMatchObject({ type: 'failed', sipCode: 503 });
    expect(sandboxScript(SANDBOX_CALL_MAGIC.dtmfThenHangup, t)).toEqual([
      { type: 'ringing', afterMs: 10 }, { type: 'answered', afterMs: 30 }, { type: 'dtmf', digits: '1', afterMs: 1030 }, { type: 'completed', afterMs: 5030 },
    ]);
    expect(sandboxScript(SANDBOX_CALL_MAGIC.voicemail, t).slice(2)).toEqual([{ type: 'speech', seconds: 10, afterMs: 10_030 }, { type: 'completed', afterMs: 10_030 }]);
    expect(sandboxScript('+14155550100', t).map((s) => s.type)).toEqual(['ringing', 'answered']);
  });
});

describe('recording links and audio', () => {
  const links = new RecordingLinks({ appSecret: 'x'.repeat(32), baseUrl: 'https://api.example.com', ttlSeconds: 120 });
  const tenant = { organizationId: 'org_1', mode: 'test' as const };
  const now = new Date('2026-11-23T10:00:30Z');
  const parse = (u: string) => { const url = new URL(u); return { expires: Number(url.searchParams.get('expires')), signature: url.searchParams.get('signature')! }; };
  it('verify for the same tenant and id until they expire', () => {
    const { expires, signature } = parse(links.url(tenant, 'call_1', now));
    expect(() => links.verify(tenant, 'call_1', expires, signature, now)).not.toThrow();
    const code = (f: () => void) => { try { f(); return 'ok'; } catch (e) { return (e as ServiceError).code; } };
    expect(code(() => links.verify({ ...tenant, mode: 'live' }, 'call_1', expires, signature, now))).toBe('NOT_FOUND');
    expect(code(() => links.verify(tenant, 'call_2', expires, signature, now))).toBe('NOT_FOUND');
    expect(code(() => links.verify(tenant, 'call_1', expires + 1, signature, now))).toBe('NOT_FOUND');
    expect(code(() => links.verify(tenant, 'call_1', expires, signature, new Date((expires + 1) * 1000)))).toBe('FORBIDDEN');
  });
  it('render a WAV whose bytes are all 7-bit, about 8000 bytes a second', () => {
    const wav = Buffer.from(sandboxRecording(3), 'latin1');
    expect(wav.subarray(0, 4).toString()).toBe('RIFF');
    expect(wav.every((b) => b < 0x80)).toBe(true);
    expect(wav.readUInt32LE(40)).toBeGreaterThan(23_000);
    expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
  });
});

describe('the sandbox timeline\'s due times', () => {
  it('come back soonest first, each once: after(t) forgets those up to t and names the next', () => {
    const due = new DueTimes();
    const times = [500, 120, 900, 120, 50, 700, 300, 1_000, 60, 400];
    for (const at of times) expect(due.add(at)).toBe(true);
    expect(due.size).toBe(times.length);
    expect(due.after(0)).toBe(50);
    expect(due.after(120)).toBe(300); // 50, 60 and both 120s were due by then
    expect(due.size).toBe(6);
    const rest: number[] = [];
    for (let next = due.after(300); next !== undefined; next = due.after(next)) rest.push(next);
    expect(rest).toEqual([400, 500, 700, 900, 1_000]);
    expect(due.size).toBe(0);
    expect(due.after(Number.POSITIVE_INFINITY)).toBeUndefined();
  });

  it('keep at most their bound (the regular look finds the rest)', () => {
    const due = new DueTimes(3);
    expect([5, 4, 3, 2].map((at) => due.add(at))).toEqual([true, true, true, false]);
    expect(due.after(0)).toBe(3);
    // Random order against a sort, the heap's invariant under many adds and partial drains.
    const big = new DueTimes();
    const xs = Array.from({ length: 2_000 }, (_, i) => (i * 7_919) % 1_009);
    for (const x of xs) big.add(x);
    const out: number[] = [];
    let next = big.after(-1);
    while (next !== undefined) {
      out.push(next);
      next = big.after(next);
    }
    expect(out).toEqual([...new Set(xs)].sort((a, b) => a - b));
  });
});

describe('POST /v1/voice/calls', () => {
  it("prepares the call (its lookups, with the admission's take) while the rate-limit admission is in flight, and creates it from that only once admitted", async () => {
    const { invoke } = await import('../../platform/operations.ts');
    const { createCallOp } = await import('./voice.operations.ts');
    const seen: string[] = [];
    let admit!: () => void;
    const admission = new Promise<void>((r) => { admit = r; }).then(() => { seen.push('admitted'); });
    const admissionTake = { take: {}, outcome: () => undefined };
    const prepared = { looked: { consent: { status: 'fulfilled', value: undefined }, numbers: { status: 'fulfilled', value: ['+14155550100'] } } };
    const callPlacing = {
      prepare: async (_scope: unknown, _input: unknown, take: unknown) => { seen.push(take === admissionTake ? 'prepare with the take' : 'prepare'); return prepared; },
      create: async (_scope: unknown, _input: unknown, got: unknown) => { seen.push(got === prepared ? 'create with the prepared' : 'create'); return { id: 'call_1' }; },
    };
    const scope = { organizationId: 'org_1', mode: 'test', plan: 'enterprise', role: 'owner', actor: { type: 'api_key', id: 'key_1' }, requestId: 'req_1' };
    const ctx = { scope, modules: new Map([['voice', { callPlacing }]]), admission, admissionTake } as never;
    const placed = invoke(createCallOp, ctx, { to: '+14155550123', from: '+14155550100' });
    await new Promise((r) => setTimeout(r, 5));
    expect(seen).toEqual(['prepare with the take']);
    admit();
    await placed;
    expect(seen).toEqual(['prepare with the take', 'admitted', 'create with the prepared']);
  });
});

describe('timeline notices (tellDue / toldDue)', () => {
  it('tells distinct due times soonest first, and reads them back', () => {
    const payload = tellDue([1_800_000_002_000, 1_800_000_001_000.4, 1_800_000_002_000]);
    expect(payload).toBe('1800000001000,1800000002000');
    expect(toldDue(payload)).toEqual([1_800_000_001_000, 1_800_000_002_000]);
  });

  it('keeps a notice under the NOTIFY payload limit, dropping the latest times', () => {
    const due = Array.from({ length: 2000 }, (_, i) => 1_800_000_000_000 + i);
    const payload = tellDue(due);
    expect(Buffer.byteLength(payload)).toBeLessThan(8000);
    expect(toldDue(payload)[0]).toBe(1_800_000_000_000);
  });

  it('leaves out what does not read as a time', () => {
    expect(toldDue(undefined)).toEqual([]);
    expect(toldDue('')).toEqual([]);
    expect(toldDue('abc,1800000000000,-5')).toEqual([1_800_000_000_000]);
  });
});
