/**
 * How deep a request may nest: JSON bodies (REST, GraphQL over HTTP) and GraphQL documents. Parsers
 * and every walk over a parsed value (validation, the NUL check, JSON.stringify on the way to the
 * database) recurse once per level, so a body of 100,000 nested arrays overflowed the stack: 500.
 * Both are measured on the text, before anything is parsed.
 */
import { ServiceError } from './errors.ts';

/** Levels of `{`/`[` a JSON body, or of `{`/`[`/`(` a GraphQL document, may nest. */
export const MAX_NESTING = 64;

/** 400 VALIDATION_ERROR for a request nested deeper than {@link MAX_NESTING} (`details.limit` `nesting`). */
export function tooDeep(what: string, max = MAX_NESTING): ServiceError {
  return new ServiceError('VALIDATION_ERROR', `${what} nests deeper than ${max} levels`, { limit: 'nesting', max }, { status: 400 });
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_PAREN = 0x28;
const CLOSE_PAREN = 0x29;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const HASH = 0x23;
const NEWLINE = 0x0a;
const RETURN = 0x0d;

/**
 * Whether JSON text nests deeper than `max` (strings skipped, escapes honoured). Text that is not
 * JSON gives some answer; its parse fails anyway.
 */
export function jsonNestsDeeper(text: string, max = MAX_NESTING): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/**
 * Whether a GraphQL document nests selections, lists, input objects and arguments deeper than
 * `max` together (strings, block strings and comments skipped).
 */
export function graphqlNestsDeeper(source: string, max = MAX_NESTING): boolean {
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if (c === HASH) {
      while (i + 1 < source.length && source.charCodeAt(i + 1) !== NEWLINE && source.charCodeAt(i + 1) !== RETURN) i++;
    } else if (c === QUOTE) {
      if (source.startsWith('"""', i)) {
        const end = blockStringEnd(source, i + 3);
        i = end < 0 ? source.length : end + 2;
        continue;
      }
      for (i++; i < source.length; i++) {
        const s = source.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE || s === NEWLINE || s === RETURN) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET || c === OPEN_PAREN) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET || c === CLOSE_PAREN) {
      depth--;
    }
  }
  return false;
}

/** The index of the `"""` that closes a block string begun before `from` (`\"""` is escaped), or -1. */
function blockStringEnd(source: string, from: number): number {
  for (let i = from; ; ) {
    const at = source.indexOf('"""', i);
    if (at < 0) return -1;
    if (source.charCodeAt(at - 1) !== BACKSLASH) return at;
    i = at + 3;
  }
}
