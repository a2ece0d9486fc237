/**
 * Call statuses and their forward-only order, IVR menus and the pure rules that walk them.
 * No I/O here: the service applies these decisions under a row lock.
 */
import type { GatewayEvent } from '../../providers/voice/types.ts';

export const CALL_STATUSES = ['initiating', 'ringing', 'in_progress', 'completed', 'failed', 'busy', 'no_answer', 'cancelled'] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];
export const FINAL_STATUSES: ReadonlySet<CallStatus> = new Set(['completed', 'failed', 'busy', 'no_answer', 'cancelled']);

const RANK: Record<CallStatus, number> = { initiating: 0, ringing: 1, in_progress: 2, completed: 3, failed: 3, busy: 3, no_answer: 3, cancelled: 3 };

export function isFinal(status: CallStatus): boolean {
  return FINAL_STATUSES.has(status);
}

/** Monotonic: a status may only move forward, and a final status never changes. */
export function canMove(from: CallStatus, to: CallStatus): boolean {
  return RANK[to] > RANK[from];
}

/** The event a status emits (busy and no_answer are failures to connect; cancelled ends a call like completed). */
export function eventFor(status: CallStatus): 'call.initiated' | 'call.ringing' | 'call.answered' | 'call.completed' | 'call.failed' {
  switch (status) {
    case 'initiating': return 'call.initiated';
    case 'ringing': return 'call.ringing';
    case 'in_progress': return 'call.answered';
    case 'completed': case 'cancelled': return 'call.completed';
    case 'failed': case 'busy': case 'no_answer': return 'call.failed';
  }
}

/** Billed voice minutes: every started minute of an answered call counts (at least one). */
export function billedMinutes(durationSeconds: number): number {
  return Math.max(1, Math.ceil(durationSeconds / 60));
}

/**
 * A gateway event that arrived before an earlier one of the same call: it waits for it (its job
 * or timeline step is retried; an expected retry, logged at debug), so a call's steps keep their order.
 */
export class EventTooEarly extends Error {
  readonly expected = true;
  constructor(event: GatewayEvent, applied: number) {
    super(`gateway event ${event.seq} of ${event.callId} arrived before event ${applied + 1}`);
    this.name = 'EventTooEarly';
  }
}

export type CallStep = { at: string; type: string; detail?: Record<string, unknown> };

// ---- IVR ----

export const IVR_ACTIONS = ['transfer_agent', 'transfer_number', 'voicemail', 'submenu', 'repeat', 'hangup'] as const;
export type IvrAction = (typeof IVR_ACTIONS)[number];
export const FALLBACK_ACTIONS = ['voicemail', 'transfer_number', 'hangup'] as const;
export const DTMF_KEYS = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '#'] as const;

export type IvrOption = { key: string; action: IvrAction; target?: string | null; prompt?: string | null; menu?: IvrMenu | null };
export type IvrMenu = { prompt?: string | null; options: IvrOption[] };

/** Where an answered call is in its IVR: the submenu path (keys) and the prompt it waits on. */
export type IvrState = {
  path: string[];
  /** Incremented each time the menu is (re)played; a timeout job for an older prompt is stale. */
  prompt: number;
  retries: number;
  done: boolean;
  /**
   * Recording into a voicemail box since `since`. `messageId`: a live call whose gateway records the
   * audio under that id and reports the message itself (a `speech` event); none comes if the caller never spoke.
   */
  voicemail?: { boxId: string; since: string; messageId?: string } | null;
  /** A live call to a conference's dial-in number: the PIN keys entered so far (`#` ends it), and the attempts made. */
  pin?: { entered: string; attempts: number };
};

export function menuAt(root: IvrMenu, path: readonly string[]): IvrMenu {
  let menu = root;
  for (const key of path) {
    const next = menu.options.find((o) => o.key === key)?.menu;
    if (!next) return menu;
    menu = next;
  }
  return menu;
}

export function countOptions(menu: IvrMenu): number {
  return menu.options.length;
}

/** Voicemail boxes a menu refers to, depth first (the first is the default box of the flow). */
export function voicemailTargets(menu: IvrMenu): string[] {
  const out: string[] = [];
  for (const o of menu.options) {
    if (o.action === 'voicemail' && o.target) out.push(o.target);
    if (o.menu) out.push(...voicemailTargets(o.menu));
  }
  return out;
}

/** Agent ids a menu transfers to, depth first. */
export function agentTargets(menu: IvrMenu): string[] {
  const out: string[] = [];
  for (const o of menu.options) {
    if (o.action === 'transfer_agent' && o.target) out.push(o.target);
    if (o.menu) out.push(...agentTargets(o.menu));
  }
  return out;
}

export type IvrDecision =
  | { kind: 'option'; option: IvrOption; state: IvrState }
  | { kind: 'replay'; state: IvrState; reason: 'invalid_key' | 'timeout' }
  | { kind: 'fallback'; state: IvrState };

/** A key pressed while the menu waits: the matching option, or an invalid key counted as a retry. */
export function pressKey(root: IvrMenu, state: IvrState, key: string, maxRetries: number): IvrDecision {
  const menu = menuAt(root, state.path);
  const option = menu.options.find((o) => o.key === key);
  if (option) {
    if (option.action === 'submenu') return { kind: 'option', option, state: { ...state, path: [...state.path, key], prompt: state.prompt + 1, retries: 0 } };
    if (option.action === 'repeat') return { kind: 'option', option, state: { ...state, prompt: state.prompt + 1 } };
    return { kind: 'option', option, state: { ...state, done: true } };
  }
  return retry(state, maxRetries, 'invalid_key');
}

/** The wait for a key ran out: replay the menu, or take the fallback after `maxRetries` replays. */
export function timeout(state: IvrState, maxRetries: number): IvrDecision {
  return retry(state, maxRetries, 'timeout');
}

function retry(state: IvrState, maxRetries: number, reason: 'invalid_key' | 'timeout'): IvrDecision {
  if (state.retries >= maxRetries) return { kind: 'fallback', state: { ...state, done: true } };
  return { kind: 'replay', state: { ...state, retries: state.retries + 1, prompt: state.prompt + 1 }, reason };
}
