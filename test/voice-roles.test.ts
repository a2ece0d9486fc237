/**
 * Voice with the roles split over one database: an instance that serves HTTP only (`--no-workers`)
 * beside one that runs the workers, whose sandbox ticker looks for due steps only once a minute
 * here. A call placed through the HTTP-only instance stores its first step there; the instance
 * tells the tickers when it falls due (TIMELINE_CHANNEL), so the call rings and answers within its
 * script's timings instead of at the ticker's next look. A `callUpdated` subscriber on the
 * HTTP-only instance hears every status the workers commit (the events' NOTIFY at commit).
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, VOICE_ENV } from './helpers/voice.ts';

let workers: TestApp;
let http: TestApp;
let org: TestOrg;
let from: string;
beforeAll(async () => {
  workers = await startTestApp({ clock: systemClock, workers: true, env: { ...VOICE_ENV, SANDBOX_CALL_TICK_MS: '60000' } });
  http = await startTestApp({ clock: systemClock, sameDatabaseAs: workers, env: VOICE_ENV });
  org = await http.createOrg('enterprise', 'Voice roles split');
  from = await buyVoiceNumber(http, org.testKey);
}, 60_000);
afterAll(async () => {
  await http?.close();
  await workers?.close();
});

describe('voice with the roles split', () => {
  it('a call placed through the HTTP-only instance rings, answers and ends on its script, not at the ticker\'s next look; its subscriber there hears each status', async () => {
    const client = createClient({ url: `${http.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: org.testKey }, retryAttempts: 0 });
    try {
      // +15005550009 answers, presses 1 and hangs up after 5 s.
      const placed = await http.rest('POST', '/v1/voice/calls', { key: org.testKey, body: { to: '+15005550009', from } });
      expect(placed.status, placed.text).toBe(201);
      const id = placed.body.data.id as string;
      const seen: string[] = [];
      const ended = new Promise<void>((resolve, reject) => {
        const dispose = client.subscribe({ query: 'subscription($id: ID!) { callUpdated(id: $id) { status } }', variables: { id } }, {
          next: (v: any) => {
            seen.push(v.data.callUpdated.status);
            if (v.data.callUpdated.status === 'completed') { dispose(); resolve(); }
          },
          error: reject, complete: () => {},
        });
      });
      // Well within the ticker's minute: ringing after 50 ms and the answer 100 ms later.
      await callReaches(http, org.testKey, id, 'in_progress', 15_000);
      await Promise.race([ended, new Promise((_, reject) => setTimeout(() => reject(new Error(`not completed within 20 s; seen ${seen.join(', ')}`)), 20_000))]);
      expect(seen.at(-1)).toBe('completed');
      expect(seen).toContain('in_progress');
    } finally {
      await client.dispose();
    }
  }, 45_000);
});
