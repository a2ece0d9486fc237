import { describe, expect, it } from 'vitest';
import { CODE_LENGTH, CodeHasher, codeMessage, findCode, generateCode, LOCALES, normalizeLocale } from './verify.codes.ts';

describe('generateCode', () => {
  it('gives exactly the asked number of decimal digits, for every allowed length', () => {
    for (let length = CODE_LENGTH.min; length <= CODE_LENGTH.max; length++) {
      for (let i = 0; i < 50; i++) expect(generateCode(length)).toMatch(new RegExp(`^\\d{${length}}$`));
    }
  });

  it('refuses lengths outside 4-10', () => {
    for (const bad of [0, 3, 11, 4.5, Number.NaN]) expect(() => generateCode(bad)).toThrow(RangeError);
  });

  it('uses every digit in every position, leading zeros included (roughly uniform)', () => {
    const counts = Array.from({ length: 4 }, () => new Array(10).fill(0) as number[]);
    const n = 5000;
    for (let i = 0; i < n; i++) [...generateCode(4)].forEach((d, pos) => { counts[pos]![Number(d)]! += 1; });
    for (const position of counts) {
      for (const c of position) {
        // Expected 500 each; 350-650 is far outside any plausible fluctuation of a fair source.
        expect(c).toBeGreaterThan(350);
        expect(c).toBeLessThan(650);
      }
    }
  });
});

describe('CodeHasher', () => {
  const hasher = new CodeHasher('test-app-secret-0123456789abcdef');

  it('stores a 64-hex HMAC that is not the code and matches only the right code', () => {
    const h = hasher.hash('ver_a', '123456');
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(h).not.toContain('123456');
    expect(hasher.matches('ver_a', '123456', h)).toBe(true);
    expect(hasher.matches('ver_a', '123457', h)).toBe(false);
    expect(hasher.matches('ver_a', '0123456', h)).toBe(false);
    expect(hasher.matches('ver_a', '', h)).toBe(false);
  });

  it('binds the hash to the verification id and to the server secret', () => {
    const h = hasher.hash('ver_a', '123456');
    expect(hasher.hash('ver_b', '123456')).not.toBe(h);
    expect(hasher.matches('ver_b', '123456', h)).toBe(false);
    expect(new CodeHasher('another-secret-0123456789abcdef').matches('ver_a', '123456', h)).toBe(false);
  });

  it('answers false (never throws) on a malformed stored hash', () => {
    expect(hasher.matches('ver_a', '123456', 'abc')).toBe(false);
    expect(hasher.matches('ver_a', '123456', '')).toBe(false);
  });
});

describe('locales and messages', () => {
  it('normalizes tags to the shipped languages', () => {
    expect(normalizeLocale('es')).toBe('es');
    expect(normalizeLocale('ES-mx')).toBe('es');
    expect(normalizeLocale('pt_BR')).toBeUndefined();
    expect(normalizeLocale(' de ')).toBe('de');
    expect(normalizeLocale('')).toBeUndefined();
  });

  it('every locale carries the code in its text and html, never in the subject', () => {
    for (const locale of LOCALES) {
      for (const app of [null, 'Acme']) {
        const m = codeMessage(locale, '042917', app);
        expect(m.text).toContain('042917');
        expect(m.html).toContain('042917');
        expect(m.subject).not.toContain('042917');
        if (app) expect(m.text).toContain('Acme');
        expect(findCode(m.text, 6)).toBe('042917');
      }
    }
    expect(codeMessage('ar', '1234', null).html).toContain('dir="rtl"');
    expect(codeMessage('es', '1234', null).text).toMatch(/^Tu código de verificación es: 1234/);
  });

  it('escapes the app name in html', () => {
    expect(codeMessage('en', '1234', "O'Brien & Co").html).toContain('O&#39;Brien &amp; Co');
  });
});

describe('findCode', () => {
  it('finds the run of the right length, confirmed by the hash when given', () => {
    expect(findCode('Acme 2024: your code is 9911', 4)).toBe('2024');
    expect(findCode('Acme 2024: your code is 9911', 4, (c) => c === '9911')).toBe('9911');
    expect(findCode('Acme 2024: your code is 9911', 4, () => false)).toBeUndefined();
    expect(findCode('code 12345', 4)).toBeUndefined();
  });
});
