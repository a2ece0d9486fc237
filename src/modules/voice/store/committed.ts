/**
 * Calls as this instance committed them with an event, by event id (the newest {@link COMMITTED_KEPT}):
 * a `callUpdated` subscriber told of the event by deliverLocal shows the call as that change left
 * it without reading it again. Kept only for the calls a subscriber of this instance watches (the
 * service asks the event bus).
 */
import type { Scope } from '../../../platform/auth/scope.ts';
import type { Call } from '../voice.entities.ts';

/** How many committed calls are kept for live subscribers (the oldest go first). */
export const COMMITTED_KEPT = 4096;

export class CommittedCalls {
  readonly #calls = new Map<string, Call>();

  /** Notes the calls a commit left, one per event notice, in order (copies: the entities live on). */
  note(eventIds: readonly string[], calls: readonly Call[]): void {
    eventIds.forEach((id, i) => {
      const call = calls[i];
      if (call) this.#calls.set(id, { ...call });
    });
    for (const key of this.#calls.keys()) {
      if (this.#calls.size <= COMMITTED_KEPT) break;
      this.#calls.delete(key);
    }
  }

  /** Whether the call event `eventId` committed is noted. */
  has(eventId: string): boolean {
    return this.#calls.has(eventId);
  }

  /** The call `id` as event `eventId` committed it in the caller's tenant, else undefined (a copy). */
  get(scope: Scope, id: string, eventId: string): Call | undefined {
    const call = this.#calls.get(eventId);
    if (!call || call.id !== id || call.organizationId !== scope.organizationId || call.mode !== scope.mode) return undefined;
    return { ...call };
  }
}
