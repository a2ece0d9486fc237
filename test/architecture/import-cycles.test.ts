/**
 * No import cycle in src: the static imports between its files (`import type` included: a type
 * cycle is two files that can only be understood together; dynamic `import()` excluded: it loads
 * late, on purpose) form a DAG, so each file reads on top of what it imports and loading one loads
 * only what lies beneath it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const src = path.resolve(import.meta.dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The files a file imports statically (relative specifiers: the rest is outside src). */
function importsOf(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  for (const st of sf.statements) {
    if (!ts.isImportDeclaration(st) && !ts.isExportDeclaration(st)) continue;
    const spec = st.moduleSpecifier;
    if (spec && ts.isStringLiteral(spec) && spec.text.startsWith('.')) out.push(path.resolve(path.dirname(file), spec.text));
  }
  return out;
}

/** The cycles a depth-first search closes (one per back edge: none means the graph is a DAG), as node lists. */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (node: string) => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

describe('import graph of src', () => {
  it('has no cycle', () => {
    const files = sourceFiles(src);
    expect(files.length).toBeGreaterThan(300);
    const graph = new Map(files.map((f) => [path.relative(src, f), importsOf(f).map((t) => path.relative(src, t))]));
    expect(cyclesOf(graph).map((c) => c.join(' → '))).toEqual([]);
  });

  it('the search finds a cycle when there is one, and none in a DAG', () => {
    expect(cyclesOf(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]))).toEqual([['a', 'b', 'c', 'a']]);
    expect(cyclesOf(new Map([['a', ['b', 'c']], ['b', ['c']], ['c', []]]))).toEqual([]);
  });
});
