/**
 * The REST response shapes, read from the code: for every `route({ method, path, output })` in
 * `src/modules/<ctx>/*.rest.ts`, the return type of its presenter (`output`; without one, the
 * operation's result) as JSON Schema, keyed `METHOD /v1/path`. TypeScript is the only source of
 * the presenters' shapes, so this runs in `npm run codegen` (not at start) and its result is
 * committed as `schema/responses.json`, which the OpenAPI document reads (src/http/openapi.ts).
 */
import ts from 'typescript';
import { moduleFiles, modulesProgram } from './modules-program.ts';

type JsonSchema = Record<string, unknown>;

const MAX_DEPTH = 8;

export function responseSchemas(root: string, program: ts.Program = modulesProgram(root)): Record<string, JsonSchema> {
  const files = moduleFiles(root, '.rest.ts');
  const checker = program.getTypeChecker();
  const out: Record<string, JsonSchema> = {};

  const toSchema = (type: ts.Type, depth: number): JsonSchema => {
    if (depth > MAX_DEPTH) return {};
    const flags = type.getFlags();
    if (flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return {};
    if (flags & ts.TypeFlags.Null) return { type: 'null' };
    if (flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)) return {};
    if (flags & ts.TypeFlags.StringLiteral) return { type: 'string', const: (type as ts.StringLiteralType).value };
    if (flags & ts.TypeFlags.NumberLiteral) return { type: 'number', const: (type as ts.NumberLiteralType).value };
    if (flags & ts.TypeFlags.BooleanLiteral) return { type: 'boolean' };
    if (flags & ts.TypeFlags.String || flags & ts.TypeFlags.TemplateLiteral) return { type: 'string' };
    if (flags & ts.TypeFlags.Number) return { type: 'number' };
    if (flags & ts.TypeFlags.BigInt) return { type: 'string' };
    if (flags & ts.TypeFlags.Boolean) return { type: 'boolean' };
    if (type.isUnion()) {
      const parts = type.types.filter((t) => !(t.getFlags() & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)));
      const literals = parts.filter((t) => t.isStringLiteral()) as ts.StringLiteralType[];
      const rest = parts.filter((t) => !t.isStringLiteral() && !(t.getFlags() & ts.TypeFlags.BooleanLiteral));
      const schemas: JsonSchema[] = [];
      if (literals.length) schemas.push({ type: 'string', enum: literals.map((l) => l.value).sort() });
      if (parts.some((t) => t.getFlags() & ts.TypeFlags.BooleanLiteral)) schemas.push({ type: 'boolean' });
      for (const t of rest) schemas.push(toSchema(t, depth + 1));
      if (schemas.some((s) => Object.keys(s).length === 0)) return {};
      return schemas.length === 1 ? schemas[0]! : { anyOf: schemas };
    }
    const name = type.getSymbol()?.getName();
    if (name === 'Date') return { type: 'string', format: 'date-time' };
    // Raw bodies (PDFs, recordings): bytes, not an object walk (whose symbol-keyed members would
    // print unstable names such as `__@toStringTag@2058`).
    if (name && /^(Buffer|Uint8Array|ArrayBuffer|SharedArrayBuffer|ArrayBufferLike)$/.test(name)) return { type: 'string', contentEncoding: 'binary' };
    if (checker.isArrayType(type) || checker.isTupleType(type)) {
      const [item] = checker.getTypeArguments(type as ts.TypeReference);
      return { type: 'array', items: item ? toSchema(item, depth + 1) : {} };
    }
    if (flags & ts.TypeFlags.Object) {
      if (type.getCallSignatures().length > 0) return {};
      const properties: Record<string, JsonSchema> = {};
      const required: string[] = [];
      for (const prop of checker.getPropertiesOfType(type)) {
        if (prop.getName().startsWith('__@')) continue;
        const decl = prop.valueDeclaration ?? prop.declarations?.[0];
        const propType = decl ? checker.getTypeOfSymbolAtLocation(prop, decl) : checker.getDeclaredTypeOfSymbol(prop);
        if (propType.getCallSignatures().length > 0) continue;
        properties[prop.getName()] = toSchema(propType, depth + 1);
        const optional = (prop.getFlags() & ts.SymbolFlags.Optional) !== 0 || (propType.isUnion() && propType.types.some((t) => t.getFlags() & ts.TypeFlags.Undefined));
        if (!optional) required.push(prop.getName());
      }
      const index = checker.getIndexInfosOfType(type)[0];
      const schema: JsonSchema = { type: 'object', properties };
      if (required.length) schema.required = required;
      if (index) schema.additionalProperties = toSchema(index.type, depth + 1);
      return schema;
    }
    return {};
  };

  const promised = (type: ts.Type): ts.Type => (type.getSymbol()?.getName() === 'Promise' ? checker.getTypeArguments(type as ts.TypeReference)[0] ?? type : type);

  for (const file of files) {
    const source = program.getSourceFile(file)!;
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'route' && node.arguments[0] && ts.isObjectLiteralExpression(node.arguments[0])) {
        const props = new Map<string, ts.Expression>();
        for (const p of node.arguments[0].properties) {
          if (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) props.set(p.name.text, p.initializer);
        }
        const method = props.get('method');
        const routePath = props.get('path');
        if (method && routePath && ts.isStringLiteralLike(method) && ts.isStringLiteralLike(routePath)) {
          const output = props.get('output');
          let result: ts.Type | undefined;
          if (output) {
            result = checker.getTypeAtLocation(output).getCallSignatures()[0]?.getReturnType();
          } else {
            const operation = props.get('operation');
            const run = operation ? checker.getTypeAtLocation(operation).getProperty('run') : undefined;
            const runType = run && operation ? checker.getTypeOfSymbolAtLocation(run, operation) : undefined;
            const ret = runType?.getCallSignatures()[0]?.getReturnType();
            result = ret ? promised(ret) : undefined;
            // A list operation returns a Page: the REST data is its items.
            const items = result?.getProperty('items');
            if (result && items && operation) result = checker.getTypeOfSymbolAtLocation(items, operation);
            if (result && checker.isArrayType(result) && props.has('paginated')) result = checker.getTypeArguments(result as ts.TypeReference)[0];
          }
          out[`${method.text} ${routePath.text}`] = result ? toSchema(result, 0) : {};
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}
