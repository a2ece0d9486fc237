import { describe, expect, it } from 'vitest';
import { needsVacuum, vacuumWanted } from './vacuum.ts';

describe('vacuum decisions', () => {
  it('auto vacuums only when the server does not', () => {
    expect(vacuumWanted('auto', 'off')).toBe(true);
    expect(vacuumWanted('auto', 'on')).toBe(false);
    expect(vacuumWanted('always', 'on')).toBe(true);
    expect(vacuumWanted('off', 'off')).toBe(false);
  });

  it('a table needs it past max(minimum, 10 % of its live rows) dead rows', () => {
    expect(needsVacuum(0, 999, 1000)).toBe(false);
    expect(needsVacuum(0, 1000, 1000)).toBe(true);
    expect(needsVacuum(100_000, 9_999, 1000)).toBe(false);
    expect(needsVacuum(100_000, 10_000, 1000)).toBe(true);
  });
});
