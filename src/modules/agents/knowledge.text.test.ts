import { describe, expect, it } from 'vitest';
import { CHUNK_CHARS, chunkText, csvToText, htmlToText } from './knowledge.text.ts';

describe('knowledge text', () => {
  it('strips markup, scripts and entities from html', () => {
    expect(htmlToText('<html><script>x()</script><h1>Hours</h1><p>Open 9&ndash;5 &amp; Sat</p></html>')).toBe('Hours\n Open 9&ndash;5 & Sat');
  });

  it('reads csv rows with their headers, quoted commas included', () => {
    expect(csvToText('sku,name\n1,"Mug, large"\n2,Plate\n')).toBe('sku: 1; name: Mug, large\nsku: 2; name: Plate');
  });

  it('chunks long text at boundaries with overlap, losing no word', () => {
    const words = Array.from({ length: 2000 }, (_v, i) => `w${i}`);
    const chunks = chunkText(words.join(' '));
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(CHUNK_CHARS);
    const seen = new Set(chunks.flatMap((c) => c.split(' ')));
    expect(words.every((w) => seen.has(w))).toBe(true);
    expect(chunkText('short')).toEqual(['short']);
  });
});
