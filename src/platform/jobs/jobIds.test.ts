import { describe, expect, it } from 'vitest';
import { colonKeyedJobId, stableJobId } from './jobIds.ts';

// The ids these keys had when each context computed its own: jobs already stored must still deduplicate.
describe('job ids', () => {
  it('stableJobId: NUL-joined parts, variant 8 (messaging, agents, compliance)', () => {
    expect(stableJobId('messaging.deliver', 'msg_1', 'paced')).toBe('5de3786c-1464-4bc9-82f5-957028e33556');
  });

  it('colonKeyedJobId: flows\' step ids (with and without a resume kind) and voice\'s gateway event ids as they were stored', () => {
    expect(colonKeyedJobId('fex_01', 3, '')).toBe('c603618d-4d39-4c1b-a56d-131166e56157');
    expect(colonKeyedJobId('fex_01', 2, 'reply:msg_9')).toBe('f5cb8503-daf1-442e-ab7b-ea569cfffb3e');
    expect(colonKeyedJobId('call_01', 7)).toBe('28ce467e-f362-4fc0-af23-df8fb2e8f007');
  });

  it('is UUID-shaped (pg-boss job ids are uuid) and differs by key', () => {
    expect(colonKeyedJobId('a', 1)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(stableJobId('a', 1)).not.toBe(stableJobId('a', 2));
  });
});
