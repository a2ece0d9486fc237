/**
 * Runs an IVR flow on an answered call, on the call's locked row: greeting, menu, a timer for
 * each wait, key presses (options, invalid keys), replays up to max_retries, then the fallback.
 * Transfers hand the call to an agent (the agents port) or a number; voicemail records into a box
 * until the caller hangs up or the box's max_duration (the lifecycle keeps the message when the
 * call ends: calls/lifecycle.ts). Every step is logged on the call.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { IvrFlow, type Call, VoicemailBox } from '../voice.entities.ts';
import { type CallControl, type VoicemailDeposit } from '../calls/lifecycle.ts';
import { menuAt, pressKey, timeout, voicemailTargets, type IvrDecision, type IvrOption, type IvrState } from '../voice.states.ts';

export class IvrRunner {
  readonly #calls: CallControl;
  readonly #voicemail: VoicemailDeposit;

  constructor(calls: CallControl, voicemail: VoicemailDeposit) {
    this.#calls = calls;
    this.#voicemail = voicemail;
  }

  async #flow(tx: EntityManager, call: Call): Promise<IvrFlow | null> {
    return call.ivrId ? tx.findOne(IvrFlow, { id: call.ivrId }) : null;
  }

  async start(tx: EntityManager, call: Call, now: Date): Promise<void> {
    const flow = await this.#flow(tx, call);
    if (!flow) return;
    this.#calls.step(call, 'ivr_greeting', now, { ivr_id: flow.id, text: flow.greeting, language: flow.language });
    call.ivrState = { path: [], prompt: 1, retries: 0, done: false, voicemail: null };
    await this.#prompt(tx, call, flow, call.ivrState, now, 'ivr_menu', {}, flow.greeting);
  }

  /**
   * Logs a menu prompt and waits for a key: from now (the sandbox), or on a live call whose audio
   * is spoken here, from the end of the spoken prompt (`greeting` first), reported by the gateway (prompted()).
   */
  async #prompt(tx: EntityManager, call: Call, flow: IvrFlow, state: IvrState, now: Date, type: string, detail: Record<string, unknown> = {}, greeting?: string): Promise<void> {
    const next = state;
    call.ivrState = next;
    const menu = menuAt(flow.menu, next.path);
    this.#calls.step(call, type, now, { ...detail, prompt: next.prompt, path: next.path, keys: menu.options.map((o) => o.key), ...(menu.prompt ? { text: menu.prompt } : {}) });
    const texts = [greeting ?? '', menu.prompt ?? ''].filter((t) => t.trim() !== '');
    if (texts.length > 0 && this.#calls.say(tx, call, { prompt: next.prompt, texts, language: flow.language })) return;
    await this.#calls.timer(tx, { callId: call.id, kind: 'ivr_timeout', prompt: next.prompt }, call, flow.timeoutSeconds);
  }

  /** A live call's prompt was spoken to its end: the wait for a key starts now (a stale prompt's report changes nothing). */
  async prompted(tx: EntityManager, call: Call, prompt: number, now: Date): Promise<void> {
    const state = call.ivrState;
    if (!state || state.done || state.prompt !== prompt) return;
    const flow = await this.#flow(tx, call);
    if (!flow) return;
    this.#calls.step(call, 'ivr_prompt_played', now, { prompt });
    await this.#calls.timer(tx, { callId: call.id, kind: 'ivr_timeout', prompt }, call, flow.timeoutSeconds);
  }

  async key(tx: EntityManager, call: Call, key: string, now: Date): Promise<void> {
    this.#calls.step(call, 'dtmf', now, { key });
    const state = call.ivrState;
    if (!state || state.done) return;
    const flow = await this.#flow(tx, call);
    if (!flow) return;
    await this.#apply(tx, call, flow, pressKey(flow.menu, state, key, flow.maxRetries), now, key);
  }

  async timedOut(tx: EntityManager, call: Call, prompt: number, now: Date): Promise<void> {
    const state = call.ivrState;
    // A timer for an older prompt (a key was pressed since) is stale.
    if (!state || state.done || state.prompt !== prompt) return;
    const flow = await this.#flow(tx, call);
    if (!flow) return;
    this.#calls.step(call, 'ivr_timeout', now, { prompt, waited_seconds: flow.timeoutSeconds });
    await this.#apply(tx, call, flow, timeout(state, flow.maxRetries), now);
  }

  async #apply(tx: EntityManager, call: Call, flow: IvrFlow, d: IvrDecision, now: Date, key?: string): Promise<void> {
    if (d.kind === 'replay') {
      return this.#prompt(tx, call, flow, d.state, now, 'ivr_menu_replayed', { reason: d.reason, retry: d.state.retries, max_retries: flow.maxRetries, ...(key ? { key } : {}) });
    }
    call.ivrState = d.state;
    if (d.kind === 'fallback') {
      this.#calls.step(call, 'ivr_fallback', now, { action: flow.fallbackAction, ...(flow.fallbackTarget ? { target: flow.fallbackTarget } : {}) });
      const target = flow.fallbackAction === 'voicemail' ? (flow.fallbackTarget ?? voicemailTargets(flow.menu)[0] ?? null) : flow.fallbackTarget;
      return this.#act(tx, call, { key: '', action: flow.fallbackAction, target }, now);
    }
    if (d.option.action === 'submenu' || d.option.action === 'repeat') {
      return this.#prompt(tx, call, flow, d.state, now, d.option.action === 'submenu' ? 'ivr_submenu' : 'ivr_menu_repeated', { key: d.option.key });
    }
    return this.#act(tx, call, d.option, now);
  }

  async #act(tx: EntityManager, call: Call, option: IvrOption, now: Date): Promise<void> {
    const target = option.target ?? null;
    switch (option.action) {
      case 'transfer_agent': {
        const agents = this.#calls.agents();
        if (!target || !agents || !(await agents.exists(call, target))) {
          this.#calls.step(call, 'ivr_transfer_failed', now, { action: option.action, target, reason: 'agent_unavailable' });
          return this.#calls.end(tx, call, 'completed', 'ivr', now);
        }
        call.agentId = target;
        this.#calls.step(call, 'ivr_transfer_agent', now, { agent_id: target });
        await this.#calls.agentJoined(tx, call);
        return;
      }
      case 'transfer_number':
        if (!target) return this.#calls.end(tx, call, 'completed', 'ivr', now);
        this.#calls.step(call, 'ivr_transfer_number', now, { number: target });
        // A live call whose audio is here: a second leg to the number, bridged when it answers.
        this.#calls.transfer(tx, call, target);
        return;
      case 'voicemail': {
        const box = target ? await tx.findOne(VoicemailBox, { id: target }) : null;
        if (!box) {
          this.#calls.step(call, 'ivr_transfer_failed', now, { action: option.action, target, reason: 'voicemail_box_missing' });
          return this.#calls.end(tx, call, 'completed', 'ivr', now);
        }
        call.ivrState = { ...call.ivrState!, done: true, voicemail: { boxId: box.id, since: now.toISOString() } };
        this.#calls.step(call, 'voicemail_recording', now, { voicemail_id: box.id, max_duration: box.maxDuration, greeting: box.greeting });
        await this.#calls.timer(tx, { callId: call.id, kind: 'voicemail_limit' }, call, box.maxDuration);
        return;
      }
      default:
        this.#calls.step(call, 'ivr_hangup', now);
        return this.#calls.end(tx, call, 'completed', 'ivr', now);
    }
  }

  /**
   * The far end spoke `seconds` (a message): it goes to the box being recorded, or the flow's voicemail
   * box. `recording`: a live call's recorded audio, the id the call's open voicemail expects.
   */
  async speech(tx: EntityManager, call: Call, seconds: number, now: Date, recording?: string): Promise<void> {
    const open = call.ivrState?.voicemail;
    const flow = open ? null : await this.#flow(tx, call);
    const boxId = open?.boxId ?? (flow ? (flow.fallbackAction === 'voicemail' && flow.fallbackTarget) || voicemailTargets(flow.menu)[0] : undefined);
    this.#calls.step(call, 'speech', now, { seconds });
    if (!boxId) return;
    if (call.ivrState) call.ivrState = { ...call.ivrState, done: true, voicemail: null };
    const audio = open?.messageId && recording === open.messageId ? open.messageId : undefined;
    await this.#voicemail.deposit(tx, call, boxId, seconds, now, audio);
  }

  /** The box's max_duration ran out: the message is kept and the call ends. */
  async voicemailLimit(tx: EntityManager, call: Call, now: Date): Promise<void> {
    if (!call.ivrState?.voicemail) return;
    this.#calls.step(call, 'voicemail_limit_reached', now);
    await this.#calls.end(tx, call, 'completed', 'voicemail_limit', now);
  }
}
