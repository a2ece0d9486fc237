import { describe, expect, it } from 'vitest';
import { graphqlNestsDeeper, jsonNestsDeeper, MAX_NESTING } from './nesting.ts';

describe('jsonNestsDeeper', () => {
  it('counts objects and arrays, up to and past the bound', () => {
    expect(jsonNestsDeeper('[]'.repeat(1000))).toBe(false);
    expect(jsonNestsDeeper('['.repeat(MAX_NESTING) + ']'.repeat(MAX_NESTING))).toBe(false);
    expect(jsonNestsDeeper('['.repeat(MAX_NESTING + 1) + ']'.repeat(MAX_NESTING + 1))).toBe(true);
    expect(jsonNestsDeeper('{"a":{"b":[{}]}}', 3)).toBe(true);
    expect(jsonNestsDeeper('{"a":{"b":[{}]}}', 4)).toBe(false);
  });

  it('skips strings, escaped quotes and backslashes included', () => {
    expect(jsonNestsDeeper(JSON.stringify({ s: '{['.repeat(500) }), 2)).toBe(false);
    expect(jsonNestsDeeper(JSON.stringify({ s: 'a"[[[[\\' }), 1)).toBe(false);
    expect(jsonNestsDeeper(JSON.stringify({ s: 'x\\', t: [[[]]] }), 3)).toBe(true);
  });
});

describe('graphqlNestsDeeper', () => {
  it('counts selections, arguments, lists and input objects together', () => {
    expect(graphqlNestsDeeper('{ a(x: [{ b: 1 }]) { c } }', 4)).toBe(false);
    expect(graphqlNestsDeeper('{ a(x: [{ b: 1 }]) { c } }', 3)).toBe(true);
    expect(graphqlNestsDeeper('{ a { b { c } } } { d { e { f } } }', 3)).toBe(false);
  });

  it('skips strings, block strings (with escaped triple quotes) and comments', () => {
    expect(graphqlNestsDeeper(`{ a(s: "${'{'.repeat(200)}\\"{") }`, 2)).toBe(false);
    expect(graphqlNestsDeeper(`{ a(s: """${'{'.repeat(200)} \\""" {{{ """) }`, 2)).toBe(false);
    expect(graphqlNestsDeeper(`# ${'{'.repeat(200)}\n{ a }`, 1)).toBe(false);
    expect(graphqlNestsDeeper(`{ a(s: """${'{'.repeat(3)}""") { b { c } } }`, 2)).toBe(true);
  });
});
