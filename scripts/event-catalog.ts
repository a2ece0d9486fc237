/**
 * The event catalog, read from the code: the event types each module's manifest declares
 * (`events`, src/modules/index.ts `MODULES`), and for each type the fields of its `data`, taken by
 * the type checker from every place that builds an event (`{ type, resourceType, resourceId,
 * sequence, data }`, given to `emitEvent` or `eventRow`). Where the type or the data is a
 * parameter (`messageEvent(m, type)`, a helper's `data` argument), the callers' arguments are read
 * instead, up to a few calls deep. A field some places leave out is optional; its type is the union
 * of what the places give it. `npm run codegen` writes the result to docs/events.md (committed; CI
 * fails when it drifts).
 */
import path from 'node:path';
import ts from 'typescript';
import { MODULES } from '../src/modules/index.ts';

type Field = { types: Set<string>; optional: boolean };
type Shape = { fields: Map<string, Field>; open: boolean };
/** How many calls up a parameter is followed to the arguments that fill it. */
const MAX_DEPTH = 4;

export function eventCatalog(root: string, program: ts.Program): string {
  const checker = program.getTypeChecker();
  const src = path.join(root, 'src') + path.sep;
  const sources = program.getSourceFiles().filter((f) => f.fileName.startsWith(src) && !f.fileName.endsWith('.test.ts'));
  const known = new Set(MODULES.flatMap((m) => [...(m.events ?? [])]));

  // Every event literal, and every call (to follow a parameter to its arguments).
  const literals: { type: ts.Expression; data: ts.Expression }[] = [];
  const callsOf = new Map<ts.Declaration, ts.CallExpression[]>();
  const visit = (n: ts.Node): void => {
    if (ts.isObjectLiteralExpression(n)) {
      const prop = (name: string) => n.properties.find((p) => p.name && ts.isIdentifier(p.name) && p.name.text === name);
      const type = prop('type');
      const data = prop('data');
      // An EventInput, or an envelope built directly (the `webhook.test` delivery).
      if (type && data && ((prop('resourceType') && prop('resourceId')) || (prop('created_at') && prop('sequence')))) {
        const expr = (p: ts.ObjectLiteralElementLike) => ts.isPropertyAssignment(p) ? p.initializer : ts.isShorthandPropertyAssignment(p) ? p.name : undefined;
        const t = expr(type);
        const d = expr(data);
        if (t && d) literals.push({ type: t, data: d });
      }
    }
    if (ts.isCallExpression(n)) {
      const decl = checker.getResolvedSignature(n)?.declaration;
      if (decl && !ts.isJSDocSignature(decl)) {
        const list = callsOf.get(decl) ?? [];
        list.push(n);
        callsOf.set(decl, list);
      }
    }
    ts.forEachChild(n, visit);
  };
  for (const f of sources) visit(f);

  /** The parameter an identifier names: its function and position. */
  const parameterOf = (e: ts.Expression): { fn: ts.SignatureDeclaration; index: number } | undefined => {
    if (!ts.isIdentifier(e)) return undefined;
    // `{ type }`: the name's own symbol is the property; its value's is the parameter.
    const symbol = ts.isShorthandPropertyAssignment(e.parent) ? checker.getShorthandAssignmentValueSymbol(e.parent) : checker.getSymbolAtLocation(e);
    const decl = symbol?.valueDeclaration;
    if (!decl || !ts.isParameter(decl)) return undefined;
    const fn = decl.parent;
    return { fn, index: fn.parameters.indexOf(decl) };
  };

  /** The event names a type expression can hold (none when it can hold any: a wide type). */
  const namesOf = (e: ts.Expression): string[] => {
    const t = checker.getTypeAtLocation(e);
    const parts = t.isUnion() ? t.types : [t];
    if (parts.some((p) => !p.isStringLiteral())) return [];
    const names = parts.map((p) => (p as ts.StringLiteralType).value).filter((v) => known.has(v));
    return names.length > 0 && names.length < known.size / 2 ? names : [];
  };

  /** A type as a reader of the JSON sees it: named object types spelled out (two levels), dates as strings. */
  const typeText = (t: ts.Type, at: ts.Node, depth = 0): string => {
    if (t.isUnion() && !(t.flags & ts.TypeFlags.Boolean) && !t.types.every((p) => p.isStringLiteral())) {
      return [...new Set(t.types.map((p) => typeText(p, at, depth)))].join(' | ').replace('false | true', 'boolean');
    }
    if (checker.isArrayType(t)) {
      const element = typeText(checker.getTypeArguments(t as ts.TypeReference)[0]!, at, depth);
      return element.includes(' ') && !element.startsWith('{') ? `(${element})[]` : `${element}[]`;
    }
    const name = t.getSymbol()?.getName();
    if (name === 'Date') return 'string (ISO 8601)';
    const props = t.flags & ts.TypeFlags.Object && name !== 'Date' ? checker.getPropertiesOfType(t) : [];
    if (props.length > 0 && depth < 2 && checker.getSignaturesOfType(t, ts.SignatureKind.Call).length === 0) {
      const fields = props.map((p) => `${p.name}${p.flags & ts.SymbolFlags.Optional ? '?' : ''}: ${typeText(checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(p, at)), at, depth + 1)}`);
      return `{ ${fields.join('; ')} }`;
    }
    const text = checker.typeToString(t, at, ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType);
    // A NonNullable<…> the checker kept deferred: its members but null and undefined.
    const deferred = /^NonNullable<(.+)>$/.exec(text)?.[1];
    const plain = deferred ? deferred.split(' | ').filter((p) => p !== 'null' && p !== 'undefined').join(' | ') : text;
    return plain.replace(/\bRecord<string, unknown>/g, 'object');
  };

  /** The object literals a call's function returns (a presenter typed as a plain record). */
  const returnedLiterals = (e: ts.Expression): ts.Expression[] => {
    if (!ts.isCallExpression(e)) return [];
    const decl = checker.getResolvedSignature(e)?.declaration;
    if (!decl || ts.isJSDocSignature(decl) || !('body' in decl) || !decl.body) return [];
    const found: ts.Expression[] = [];
    const walk = (n: ts.Node): void => {
      if (ts.isReturnStatement(n) && n.expression && ts.isObjectLiteralExpression(n.expression)) found.push(n.expression);
      if (!ts.isFunctionLike(n)) ts.forEachChild(n, walk);
    };
    ts.forEachChild(decl.body, walk);
    return found;
  };

  /** The fields of a data expression's type; `open` when it is a map of any keys. */
  const shapeOf = (e: ts.Expression): Shape | undefined => {
    const t = checker.getTypeAtLocation(e);
    const props = checker.getPropertiesOfType(t);
    if (props.length === 0) {
      const returned = returnedLiterals(e).map(shapeOf).filter((x): x is Shape => !!x);
      if (returned.length > 0) return merged(returned);
      return checker.getIndexInfosOfType(t).length > 0 ? { fields: new Map(), open: true } : undefined;
    }
    const fields = new Map<string, Field>();
    for (const p of props) {
      if (p.name === 'webhook_url') continue; // never shown: publicEventData drops it
      const full = checker.getTypeOfSymbolAtLocation(p, e);
      const nullable = full.isUnion() && full.types.some((x) => x.flags & ts.TypeFlags.Null);
      const text = typeText(checker.getNonNullableType(full), e);
      fields.set(p.name, { types: new Set([text + (nullable ? ' | null' : '')]), optional: (p.flags & ts.SymbolFlags.Optional) !== 0 });
    }
    return { fields, open: false };
  };

  const byName = new Map<string, Shape[]>();
  const unresolved: string[] = [];
  /** Pairs a type expression with a data expression, following parameters to the callers' arguments. */
  const resolve = (type: ts.Expression, data: ts.Expression, depth: number): void => {
    const names = namesOf(type);
    const shape = shapeOf(data);
    const typeParam = names.length === 0 ? parameterOf(type) : undefined;
    const dataParam = !shape || shape.open ? parameterOf(data) : undefined;
    if ((typeParam || dataParam) && depth < MAX_DEPTH) {
      const fn = (typeParam ?? dataParam)!.fn;
      if (!typeParam || !dataParam || typeParam.fn === dataParam.fn) {
        const calls = callsOf.get(fn) ?? [];
        for (const call of calls) {
          const t = typeParam ? call.arguments[typeParam.index] : type;
          const d = dataParam ? call.arguments[dataParam.index] : data;
          if (t && d) resolve(t, d, depth + 1);
        }
        if (calls.length > 0) return;
      }
    }
    if (names.length === 0 || !shape) {
      const at = type.getSourceFile();
      unresolved.push(`${path.relative(root, at.fileName)}:${at.getLineAndCharacterOfPosition(type.getStart()).line + 1}`);
      return;
    }
    for (const name of names) byName.set(name, [...(byName.get(name) ?? []), shape]);
  };
  for (const l of literals) resolve(l.type, l.data, 0);

  function merged(shapes: Shape[]): Shape {
    const fields = new Map<string, Field>();
    for (const s of shapes) {
      for (const [name, f] of s.fields) {
        const had = fields.get(name);
        if (had) { for (const t of f.types) had.types.add(t); had.optional ||= f.optional; } else fields.set(name, { types: new Set(f.types), optional: f.optional });
      }
    }
    for (const [name, f] of fields) if (shapes.some((s) => !s.open && !s.fields.has(name))) f.optional = true;
    return { fields, open: shapes.some((s) => s.open) };
  }

  const out: string[] = [
    '# Event catalog',
    '',
    '<!-- Generated by `npm run codegen` (scripts/event-catalog.ts) from the modules\' manifests (`events`) and the',
    '     code that emits each event; do not edit by hand. CI fails when it is stale. -->',
    '',
    'Every event a webhook endpoint can subscribe to (by name, `prefix.*` or `*`), and that',
    '`GET /v1/events` and the `events` subscription show, grouped by the context that emits it. Each is',
    'delivered in the envelope `{ id: "evt_…", type, created_at, sequence, data }` (see',
    '[Events, webhooks and subscriptions](webhooks.md)); below are the fields of `data`. A field marked',
    '*optional* is absent when it does not apply. An event caused by a flow execution also carries',
    '`depth` (how many flow steps led to it).',
    '',
  ];
  for (const m of MODULES) {
    const events = m.events ?? [];
    if (events.length === 0) continue;
    out.push(`## ${m.name}`, '');
    for (const name of events) {
      out.push(`### \`${name}\``, '');
      const shapes = byName.get(name);
      if (!shapes) {
        // Written by a SQL statement (messaging's status transitions): the same data as an event of its resource that is built in code.
        const prefix = name.slice(0, name.lastIndexOf('.') + 1);
        const sibling = events.find((e) => e !== name && e.startsWith(prefix) && byName.has(e));
        out.push(sibling
          ? `Data: the same fields as \`${sibling}\` (this event is written by a SQL statement, which the generator does not read).`
          : 'Data: not read from the code; see the context\'s guide.', '');
        continue;
      }
      const shape = merged(shapes);
      if (shape.fields.size === 0) {
        out.push(shape.open ? 'Data: an object whose fields vary; see the context\'s guide.' : 'Data: `{}`', '');
        continue;
      }
      out.push('| Field | Type |', '|---|---|');
      for (const [field, f] of [...shape.fields].sort(([a], [b]) => a.localeCompare(b))) {
        const types = [...new Set([...f.types].flatMap((t) => t.split(' | ')))].join(' \\| ');
        out.push(`| \`${field}\`${f.optional ? ' *(optional)*' : ''} | \`${types}\` |`);
      }
      if (shape.open) out.push('', 'Some events of this type carry further fields.');
      out.push('');
    }
  }
  if (process.env.EVENT_CATALOG_DEBUG) process.stderr.write(`unresolved event sites:\n${unresolved.join('\n')}\n`);
  return out.join('\n').replace(/\n+$/, '\n');
}
