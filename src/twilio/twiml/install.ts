/**
 * Installs voice TwiML (engine.ts) as voice's call script, and the job that fetches documents
 * (fetch.ts: a signed form POST of Twilio's call parameters, and `Digits` for a `<Gather>` action);
 * then, under the call's row lock, the answer is run. A failed fetch (no connection, an HTTP error, no answer in time) is Twilio's 11200
 * and ends the call. One attempt, as Twilio makes one.
 */
import type { Pool } from 'pg';
import type { CallsService } from '../../modules/voice/calls/calls.service.ts';
import type { DialControl } from '../../modules/voice/calls/lifecycle.ts';
import type { Jobs, JobRegistry } from '../../platform/jobs/jobs.ts';
import type { TwilioTokens } from '../tokens.ts';
import { postForTwiml } from './fetch.ts';
import { accountSid, toSid } from '../sids.ts';
import { callStatus } from '../calls.ts';
import { TWIML_FETCH_JOB, TwimlEngine, type TwimlFetch, type TwimlState } from './engine.ts';
import { TwimlError } from './parse.ts';

export function installTwiml(deps: { calls: CallsService; dialing: DialControl; registry: JobRegistry; jobs: Pick<Jobs, 'enqueue'>; tokens: TwilioTokens; pool: Pool; allowLoopback: boolean }): TwimlEngine {
  const engine = new TwimlEngine({
    enqueue: async (tx, fetch) => { await deps.jobs.enqueue(TWIML_FETCH_JOB, fetch, { em: tx }); },
    read: async (text, values) => (await deps.pool.query<{ state: TwimlState }>(text, values)).rows,
  });
  const control = deps.calls.installScriptHooks(engine, deps.dialing);
  engine.bind(control);

  async function run(job: TwimlFetch): Promise<void> {
    const call = await deps.calls.findCall(job, job.callId);
    // A recording's status callback goes whatever the call became since; documents only to a call still up.
    if (!call || (call.status !== 'in_progress' && job.reason !== 'recording_status')) return;
    const account = accountSid(job.organizationId, job.mode);
    const params: Record<string, string> = {
      AccountSid: account, ApiVersion: '2010-04-01', CallSid: toSid(call.id), CallStatus: callStatus(call.status), Direction: 'outbound-api',
      From: call.from, To: call.to, Called: call.to, Caller: call.from, ...job.extra,
    };
    const post = () => postForTwiml(deps.tokens, job, job.url, params, deps.allowLoopback);
    if (job.reason === 'recording_status') {
      // A notification: its answer is not TwiML, and a failure changes nothing on the call.
      await post().catch(() => undefined);
      return;
    }
    let outcome: { body: string } | { error: TwimlError };
    try {
      const r = await post();
      outcome = r.status >= 200 && r.status < 300 ? { body: r.body } : { error: new TwimlError(11200, `HTTP retrieval failure: ${job.url} answered ${r.status}`) };
    } catch (e) {
      outcome = { error: new TwimlError(11200, `HTTP retrieval failure: ${job.url}: ${e instanceof Error ? e.message : String(e)}`) };
    }
    await control.locked(job, job.callId, (tx, locked, now) => engine.fetched(tx, locked, job, outcome, now));
  }

  deps.registry.register<TwimlFetch>({
    name: TWIML_FETCH_JOB, tenant: false, retryLimit: 0, concurrency: 2, pollingIntervalSeconds: 0.5,
    handler: (_ctx, job) => run(job),
  });
  return engine;
}
