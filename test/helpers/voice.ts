/** Shared helpers of the voice tests: a webhook receiver, polling, and buying a voice number. */
import { expect } from 'vitest';
import type { HttpResponse, TestApp } from './testApp.ts';
import { eventually as pollUntil } from './assertions.ts';

export const VOICE_ENV = {
  WEBHOOKS_ALLOW_LOOPBACK: '1',
  WEBHOOKS_POLL_INTERVAL_MS: '50',
  SANDBOX_CALL_RING_MS: '50',
  SANDBOX_CALL_ANSWER_MS: '100',
  // Long enough that a test can act on a call that is still ringing on a loaded machine.
  SANDBOX_CALL_NO_ANSWER_MS: '2000',
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
};

export { startReceiver, type Hit } from './receiver.ts';

/** assertions.ts's `eventually`, with the 20 s calls take through the workers. */
export function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  return pollUntil(what, probe, timeoutMs);
}

export function expectError(res: HttpResponse, status: number, code: string, field?: string): void {
  expect({ status: res.status, code: res.body?.error?.code }, res.text).toEqual({ status, code });
  if (field !== undefined) expect(res.body.error.details.field, res.text).toBe(field);
}

/** Buys a sandbox number (every sandbox number carries voice) and returns it in E.164. */
export async function buyVoiceNumber(t: TestApp, key: string, areaCode = '646'): Promise<string> {
  const found = await t.rest('GET', `/v1/numbers/available?country=US&type=local&area_code=${areaCode}&limit=5`, { key });
  expect(found.status, found.text).toBe(200);
  for (const n of found.body.data as { number: string; capabilities: string[] }[]) {
    const bought = await t.rest('POST', '/v1/numbers', { key, body: { number: n.number } });
    if (bought.status === 201) {
      expect(bought.body.data.capabilities).toContain('voice');
      return bought.body.data.number;
    }
  }
  throw new Error('no number could be bought');
}

/** Waits until the call reaches `status` (REST get) and returns it. */
export function callReaches(t: TestApp, key: string, id: string, status: string, timeoutMs = 20_000): Promise<any> {
  return eventually(`call ${id} ${status}`, async () => {
    const r = await t.rest('GET', `/v1/voice/calls/${id}`, { key });
    return r.body?.data?.status === status ? r.body.data : undefined;
  }, timeoutMs);
}

export type CallStep = { at: string; type: string; detail?: any };

/** A call's steps as stored (the live tests read them as the call goes). */
export async function callSteps(t: TestApp, id: string): Promise<CallStep[]> {
  return (await t.db.query('select steps from calls where id = $1', [id])).rows[0].steps;
}

/**
 * On a live IVR call: waits until its greeting and menu were spoken to their end (the wait for a key
 * starts only then), presses `key` at the far end, and returns the steps once the IVR took the
 * option (`taken`, a step type); the keys the call heard are exactly `key`.
 */
export async function pressAfterPrompt(t: TestApp, callId: string, press: (key: string) => void, key: string, taken: string): Promise<CallStep[]> {
  await eventually('the spoken prompt', async () => ((await callSteps(t, callId)).some((s) => s.type === 'ivr_prompt_played') ? true : undefined), 30_000);
  press(key);
  const steps = await eventually(`option ${key}`, async () => {
    const s = await callSteps(t, callId);
    return s.some((x) => x.type === taken) ? s : undefined;
  }, 15_000);
  expect(steps.filter((s) => s.type === 'dtmf').map((s) => s.detail.key)).toEqual([key]);
  return steps;
}
