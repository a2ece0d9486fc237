/**
 * The error codes each operation can answer, read from the code: for every operation declared in
 * `src/modules/<ctx>/*.operations.ts` (`op({ name, input, run })`), the codes of every
 * `new ServiceError(…)` (and ServiceError subclass) reachable from its `run` function through the
 * calls the type checker resolves (functions, methods, and the classes implementing an interface
 * method), plus the codes its zod input raises through refinements (`params: { code }`). A code
 * is taken from the type of the expression that names it, so `ch === 'email' ? 'INVALID_EMAIL' :
 * 'INVALID_PHONE_NUMBER'` yields both; a value typed as any code (a rethrow) yields none. Calls
 * through an object-literal port or a callback are not followed, so the list can miss a code; the
 * generic ones (auth, limits, validation, not found) are added by src/http/openapi.ts. Runs in
 * `npm run codegen`; the result is committed as `schema/operation-errors.json`.
 */
import path from 'node:path';
import ts from 'typescript';
import { moduleFiles, modulesProgram } from './modules-program.ts';
import { declaredErrorCodes } from '../src/platform/errors.ts';
// The module list registers each module's codes (their manifests' `errors`).
import '../src/modules/index.ts';

const KNOWN = new Set<string>(declaredErrorCodes().keys());
/** A type naming more codes than this is "any error code" (a rethrow or a mapping), not a claim. */
const MAX_CODES_PER_SITE = 8;

export function operationErrors(root: string, program: ts.Program = modulesProgram(root)): Record<string, string[]> {
  const files = moduleFiles(root, '.operations.ts');
  const checker = program.getTypeChecker();
  const src = path.join(root, 'src') + path.sep;
  const inSource = (node: ts.Node) => node.getSourceFile().fileName.startsWith(src) && !node.getSourceFile().fileName.endsWith('.test.ts');

  /** The symbol a name refers to, through imports. */
  const symbolOf = (node: ts.Node): ts.Symbol | undefined => {
    const symbol = checker.getSymbolAtLocation(node);
    return symbol && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  };

  /** String-literal error codes a type names (a union of a few of them, or one). */
  const codesOfType = (type: ts.Type): string[] => {
    const parts = type.isUnion() ? type.types : [type];
    const codes = parts.filter((t) => t.isStringLiteral()).map((t) => (t as ts.StringLiteralType).value).filter((v) => KNOWN.has(v));
    return codes.length <= MAX_CODES_PER_SITE ? codes : [];
  };

  const isServiceErrorClass = (decl: ts.Declaration | undefined): boolean =>
    !!decl && ts.isClassDeclaration(decl) && decl.name?.text === 'ServiceError' && decl.getSourceFile().fileName.endsWith(path.join('platform', 'errors.ts'));

  const extendsServiceError = (cls: ts.ClassLikeDeclaration): boolean => {
    const base = cls.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0];
    if (!base) return false;
    const decl = symbolOf(base.expression)?.declarations?.[0];
    return isServiceErrorClass(decl) || (!!decl && ts.isClassDeclaration(decl) && extendsServiceError(decl));
  };

  /** Classes that `implements` the interface declaring `member`, by the member's name. */
  const implementationsCache = new Map<ts.Node, ts.Node[]>();
  const allClasses: ts.ClassDeclaration[] = [];
  /** Members of object literals by name: a port is often an object literal a manifest provides. */
  const literalMembers = new Map<string, (ts.PropertyAssignment | ts.MethodDeclaration)[]>();
  for (const file of program.getSourceFiles()) {
    if (!file.fileName.startsWith(src) || file.fileName.endsWith('.test.ts')) continue;
    const visit = (n: ts.Node): void => {
      if (ts.isClassDeclaration(n)) allClasses.push(n);
      if ((ts.isPropertyAssignment(n) || ts.isMethodDeclaration(n)) && ts.isObjectLiteralExpression(n.parent) && ts.isIdentifier(n.name)) {
        const list = literalMembers.get(n.name.text) ?? [];
        list.push(n);
        literalMembers.set(n.name.text, list);
      }
      ts.forEachChild(n, visit);
    };
    visit(file);
  }
  const implementations = (member: ts.MethodSignature | ts.PropertySignature): ts.Node[] => {
    const cached = implementationsCache.get(member);
    if (cached) return cached;
    const owner = member.parent;
    const name = member.name && ts.isIdentifier(member.name) ? member.name.text : undefined;
    const found: ts.Node[] = [];
    // Object literals typed as the owner (contextually): `consent: { assertCanMessage: (…) => … }`.
    for (const candidate of name ? literalMembers.get(name) ?? [] : []) {
      const contextual = checker.getContextualType(candidate.parent as ts.ObjectLiteralExpression);
      const declarations = contextual?.getNonNullableType().getProperty(name!)?.declarations ?? [];
      if (declarations.includes(member)) found.push(candidate);
    }
    if (name && owner && ts.isInterfaceDeclaration(owner)) {
      const ownerSymbol = symbolOf(owner.name);
      for (const cls of allClasses) {
        const implementsOwner = cls.heritageClauses?.some((h) => h.token === ts.SyntaxKind.ImplementsKeyword
          && h.types.some((t) => symbolOf(t.expression) === ownerSymbol));
        if (!implementsOwner) continue;
        for (const m of cls.members) if (m.name && ts.isIdentifier(m.name) && m.name.text === name && (ts.isMethodDeclaration(m) || ts.isPropertyDeclaration(m))) found.push(m);
      }
    }
    implementationsCache.set(member, found);
    return found;
  };

  /** Codes reachable from one declaration (memoized; a cycle contributes what is known so far). */
  const memo = new Map<ts.Node, Set<string>>();
  const reach = (decl: ts.Node): Set<string> => {
    const known = memo.get(decl);
    if (known) return known;
    const codes = new Set<string>();
    memo.set(decl, codes);
    const add = (more: Iterable<string>) => { for (const c of more) codes.add(c); };
    const follow = (target: ts.Node | undefined) => {
      if (!target || !inSource(target)) return;
      if (ts.isMethodSignature(target) || ts.isPropertySignature(target)) {
        for (const impl of implementations(target)) add(reach(impl));
        return;
      }
      if (ts.isFunctionLike(target) || ts.isVariableDeclaration(target) || ts.isPropertyDeclaration(target) || ts.isPropertyAssignment(target) || ts.isClassDeclaration(target)) add(reach(target));
    };
    const visit = (n: ts.Node): void => {
      if (ts.isNewExpression(n)) {
        const decl = symbolOf(n.expression)?.declarations?.[0];
        if (isServiceErrorClass(decl)) {
          const first = n.arguments?.[0];
          if (first) add(codesOfType(checker.getTypeAtLocation(first)));
        } else if (decl && ts.isClassDeclaration(decl)) {
          follow(decl);
        }
      } else if (ts.isCallExpression(n)) {
        if (n.expression.kind === ts.SyntaxKind.SuperKeyword) {
          const cls = ts.findAncestor(n, ts.isClassLike);
          const first = n.arguments[0];
          if (cls && first && extendsServiceError(cls)) add(codesOfType(checker.getTypeAtLocation(first)));
        } else {
          follow(checker.getResolvedSignature(n)?.getDeclaration());
        }
      } else if (ts.isPropertyAssignment(n) && ts.isIdentifier(n.name) && n.name.text === 'code' && ts.isObjectLiteralExpression(n.parent)
        && ts.isPropertyAssignment(n.parent.parent) && ts.isIdentifier(n.parent.parent.name) && n.parent.parent.name.text === 'params') {
        // A zod refinement's `params: { code: 'INVALID_PHONE_NUMBER' }` (see parseInput).
        add(codesOfType(checker.getTypeAtLocation(n.initializer)));
      } else if (ts.isShorthandPropertyAssignment(n) && n.name.text === 'code' && ts.isObjectLiteralExpression(n.parent)
        && ts.isPropertyAssignment(n.parent.parent) && ts.isIdentifier(n.parent.parent.name) && n.parent.parent.name.text === 'params') {
        add(codesOfType(checker.getTypeAtLocation(n.name)));
      } else if (ts.isIdentifier(n) && !(ts.isPropertyAccessExpression(n.parent) && n.parent.name === n) && !(ts.isCallExpression(n.parent) && n.parent.expression === n)) {
        // A schema or function used by name (`input: sendSmsInput`, `phone: phoneSchema.nullish()`,
        // `.superRefine(checkPhone)`): not a property's name, nor a callee (followed as a call above).
        const decl = symbolOf(n)?.declarations?.[0];
        if (decl && decl !== n.parent && ts.isVariableDeclaration(decl) && decl.initializer && inSource(decl)) follow(decl);
        else if (decl && ts.isFunctionDeclaration(decl)) follow(decl);
      }
      ts.forEachChild(n, visit);
    };
    if (ts.isClassDeclaration(decl)) {
      for (const m of decl.members) if (ts.isConstructorDeclaration(m) && m.body) visit(m.body);
    } else if (ts.isVariableDeclaration(decl) || ts.isPropertyDeclaration(decl) || ts.isPropertyAssignment(decl)) {
      if (decl.initializer) visit(decl.initializer);
    } else if (ts.isFunctionLike(decl) && 'body' in decl && decl.body) {
      visit(decl.body as ts.Node);
    }
    return codes;
  };

  const out: Record<string, string[]> = {};
  for (const file of files) {
    const source = program.getSourceFile(file)!;
    const visit = (n: ts.Node): void => {
      if (ts.isObjectLiteralExpression(n)) {
        const prop = (name: string) => n.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && ts.isIdentifier(p.name) && p.name.text === name);
        const name = prop('name')?.initializer;
        const run = prop('run');
        const input = prop('input');
        if (name && ts.isStringLiteral(name) && run && input) {
          const codes = new Set([...reach(run), ...reach(input)]);
          out[name.text] = [...codes].sort();
          return;
        }
      }
      ts.forEachChild(n, visit);
    };
    visit(source);
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}
