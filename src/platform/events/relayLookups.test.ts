import { describe, expect, it } from 'vitest';
import type { RelayTx } from './relay.ts';
import { RelayLookupCache } from './relayLookups.ts';

const txAt = (version: number) => ({ lookupVersion: (name: string) => (name === 'things' ? version : 99) }) as unknown as RelayTx;

function loader(values: Record<string, string>) {
  const asked: string[][] = [];
  const load = async (missing: string[]) => {
    asked.push(missing);
    return new Map(missing.filter((k) => k in values).map((k) => [k, values[k]!]));
  };
  return { asked, load };
}

describe('RelayLookupCache', () => {
  it('loads only the keys it does not hold, while the version stays the same', async () => {
    const cache = new RelayLookupCache<string>('things');
    const { asked, load } = loader({ a: 'A', b: 'B' });
    expect([...await cache.get(txAt(3), ['a', 'x'], load, '-')]).toEqual([['a', 'A'], ['x', '-']]);
    expect([...await cache.get(txAt(3), ['a', 'b', 'x'], load, '-')]).toEqual([['a', 'A'], ['b', 'B'], ['x', '-']]);
    expect(await cache.get(txAt(3), ['b', 'x'], load, '-')).toEqual(new Map([['b', 'B'], ['x', '-']]));
    expect(asked).toEqual([['a', 'x'], ['b']]);
  });

  it('another version empties it first', async () => {
    const cache = new RelayLookupCache<string>('things');
    const values: Record<string, string> = { a: 'A1' };
    const { asked, load } = loader(values);
    await cache.get(txAt(1), ['a'], load, '-');
    values.a = 'A2';
    expect(await cache.get(txAt(2), ['a'], load, '-')).toEqual(new Map([['a', 'A2']]));
    expect(asked).toEqual([['a'], ['a']]);
    expect(cache.size).toBe(1);
  });

  it('a batch filled under an older version does not fill the newer one', async () => {
    const cache = new RelayLookupCache<string>('things');
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const slow = cache.get(txAt(1), ['a'], async () => { await gate; return new Map([['a', 'old']]); }, '-');
    expect(await cache.get(txAt(2), ['b'], async () => new Map([['b', 'new']]), '-')).toEqual(new Map([['b', 'new']]));
    release();
    expect(await slow).toEqual(new Map([['a', 'old']]));
    const { asked, load } = loader({ a: 'A2' });
    expect(await cache.get(txAt(2), ['a', 'b'], load, '-')).toEqual(new Map([['a', 'A2'], ['b', 'new']]));
    expect(asked).toEqual([['a']]);
  });

  it('keeps at most maxKeys, dropping the oldest but never the batch\'s own', async () => {
    const cache = new RelayLookupCache<string>('things', { maxKeys: 2 });
    const { load } = loader({});
    await cache.get(txAt(1), ['a', 'b'], load, '-');
    await cache.get(txAt(1), ['c'], load, '-');
    expect(cache.size).toBe(2);
    const { asked, load: again } = loader({});
    await cache.get(txAt(1), ['b', 'c'], again, '-');
    expect(asked).toEqual([]);
    await cache.get(txAt(1), ['a', 'b', 'c'], again, '-');
    expect(asked).toEqual([['a']]);
    expect(cache.size).toBe(3);
  });
});
