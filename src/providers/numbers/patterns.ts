/**
 * Digit strings from libphonenumber's number-type patterns, and a seeded random source, so the
 * sandbox inventory is generated (never stored) and is the same for the same query every time.
 * The patterns use a small regular-expression subset: digits, `\d`, classes with ranges,
 * groups, alternation and the quantifiers `{n}`, `{n,m}`, `?`; anything else is rejected.
 */
import { createHash } from 'node:crypto';

type Node =
  | { kind: 'alt'; options: Node[] }
  | { kind: 'seq'; items: Node[] }
  | { kind: 'set'; digits: string }
  | { kind: 'repeat'; node: Node; min: number; max: number };

const DIGITS = '0123456789';

/** Parses a national-number pattern into a tree; throws on syntax outside the subset. */
export function parseDigitPattern(pattern: string): Node {
  let i = 0;
  const fail = (why: string): never => {
    throw new Error(`unsupported digit pattern at ${i} (${why}): ${pattern}`);
  };

  const alt = (): Node => {
    const options = [seq()];
    while (pattern[i] === '|') {
      i++;
      options.push(seq());
    }
    return options.length === 1 ? options[0]! : { kind: 'alt', options };
  };

  const seq = (): Node => {
    const items: Node[] = [];
    while (i < pattern.length && pattern[i] !== '|' && pattern[i] !== ')') items.push(quantified(atom()));
    return { kind: 'seq', items };
  };

  const atom = (): Node => {
    const c = pattern[i];
    if (c === '(') {
      i++;
      if (pattern.startsWith('?:', i)) i += 2;
      const inner = alt();
      if (pattern[i] !== ')') fail('unclosed group');
      i++;
      return inner;
    }
    if (c === '[') return charClass();
    if (c === '\\') {
      if (pattern[i + 1] !== 'd') fail('escape');
      i += 2;
      return { kind: 'set', digits: DIGITS };
    }
    if (c !== undefined && DIGITS.includes(c)) {
      i++;
      return { kind: 'set', digits: c };
    }
    return fail(`character ${c ?? 'end'}`);
  };

  const charClass = (): Node => {
    i++;
    const negate = pattern[i] === '^';
    if (negate) i++;
    let digits = '';
    while (pattern[i] !== ']') {
      if (i >= pattern.length) fail('unclosed class');
      if (pattern[i] === '\\' && pattern[i + 1] === 'd') {
        digits += DIGITS;
        i += 2;
        continue;
      }
      const from = pattern[i]!;
      if (!DIGITS.includes(from)) fail('class member');
      if (pattern[i + 1] === '-' && pattern[i + 2] !== ']') {
        const to = pattern[i + 2]!;
        if (!DIGITS.includes(to)) fail('class range');
        for (let d = Number(from); d <= Number(to); d++) digits += String(d);
        i += 3;
      } else {
        digits += from;
        i++;
      }
    }
    i++;
    const set = negate ? [...DIGITS].filter((d) => !digits.includes(d)).join('') : [...new Set(digits)].join('');
    if (!set) fail('empty class');
    return { kind: 'set', digits: set };
  };

  const quantified = (node: Node): Node => {
    const c = pattern[i];
    if (c === '?') {
      i++;
      return { kind: 'repeat', node, min: 0, max: 1 };
    }
    if (c === '{') {
      const m = /^\{(\d+)(?:,(\d*))?\}/.exec(pattern.slice(i));
      if (!m) return fail('quantifier');
      i += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[2] === '' ? min + 3 : Number(m[2]);
      return { kind: 'repeat', node, min, max };
    }
    return node;
  };

  const tree = alt();
  if (i !== pattern.length) fail('trailing input');
  return tree;
}

/** One random digit string the tree matches. */
export function generateDigits(node: Node, rng: Rng): string {
  switch (node.kind) {
    case 'alt': return generateDigits(node.options[rng.int(node.options.length)]!, rng);
    case 'seq': return node.items.map((n) => generateDigits(n, rng)).join('');
    case 'set': return node.digits[rng.int(node.digits.length)]!;
    case 'repeat': {
      const count = node.min + rng.int(node.max - node.min + 1);
      let out = '';
      for (let k = 0; k < count; k++) out += generateDigits(node.node, rng);
      return out;
    }
  }
}

/** A small seeded generator (sfc32): the same seed gives the same sequence on every machine. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: string) {
    const h = createHash('sha256').update(seed).digest();
    this.#a = h.readUInt32LE(0);
    this.#b = h.readUInt32LE(4);
    this.#c = h.readUInt32LE(8);
    this.#d = h.readUInt32LE(12);
    for (let k = 0; k < 12; k++) this.next();
  }

  /** A float in [0, 1). */
  next(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  digits(count: number): string {
    let out = '';
    for (let k = 0; k < count; k++) out += String(this.int(10));
    return out;
  }
}
