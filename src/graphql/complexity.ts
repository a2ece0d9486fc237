/**
 * What a GraphQL operation may ask for, measured before it runs (yoga.ts's complexity gate):
 * Pothos's depth, breadth and cost of the schema's own fields; introspection's depth and cost,
 * which Pothos does not see (it counts `__schema` as one leaf); the number of aliases; and how many
 * times each root field is selected. All of it is counted for the operation that runs
 * (`operationName`), with fragments expanded as often as they are spread.
 */
import { complexityFromQuery } from '@pothos/plugin-complexity';
import {
  getNamedType, getOperationAST, isInterfaceType, isListType, isNonNullType, isObjectType, Kind, SchemaMetaFieldDef, TypeMetaFieldDef,
  type DocumentNode, type FragmentDefinitionNode, type GraphQLNamedType, type GraphQLOutputType, type GraphQLSchema, type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import { ServiceError } from '../platform/errors.ts';
import type { Plan } from '../platform/tenancy/tenancy.entities.ts';
import { COMPLEXITY_LIMITS } from './builder.ts';

/**
 * Introspection's own limits. Its fields cost as any other (1 each, a list multiplies what it
 * selects by 10) and its depth counts from the root; the standard introspection query (GraphiQL's,
 * graphql-codegen's and graphql-tools' URL loader, with every option on: nine levels of `ofType`)
 * is 15 deep and costs about 52,000, so it fits with room for a client's own additions, while a
 * second copy of it does not. `__schema` answers the same whatever its arguments: once per operation.
 */
export const INTROSPECTION_LIMITS = { complexity: 60_000, depth: 16, schemaFields: 1 } as const;

/**
 * Aliases per operation (every level, fragments counted as often as they are spread), and how many
 * times one root field may be selected. Aliases are how one field runs many times in one request.
 */
export const SELECTION_LIMITS = { aliases: 50, rootFieldRepeats: 10 } as const;

/**
 * The largest answer of a query over HTTP, in bytes (a mutation's answer is sent whole: its change
 * was made). A larger one is refused with 400 VALIDATION_ERROR (`details.limit`
 * `response_bytes`): the client asks for fewer fields or smaller pages.
 */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

export type OperationCost = {
  /** Pothos's measure of the schema's own fields (introspection fields count 1 each there). */
  complexity: number;
  depth: number;
  breadth: number;
  /** Introspection below `__schema` and `__type`. */
  introspection: { complexity: number; depth: number; schemaFields: number };
  aliases: number;
  /** The root field selected most often, and how often. */
  mostRepeated: { field: string; count: number } | undefined;
  /** Every root field is `__schema`, `__type` or `__typename`: the answer depends on the schema only. */
  introspectionOnly: boolean;
};

/** The parts of an operation's cost that do not depend on variables. */
export type OperationShape = Omit<OperationCost, 'complexity' | 'depth' | 'breadth'>;
const shapes = new WeakMap<DocumentNode, Map<string, OperationShape | null>>();

/**
 * The variable-free measures of the operation `operationName` selects in `document` (null when
 * there is no such operation), remembered per document object: the parse cache (yoga.ts
 * documentCaches) hands the same object to every request with the same query text.
 */
export function operationShape(document: DocumentNode, operationName: string | null | undefined, schema: GraphQLSchema): OperationShape | null {
  let byName = shapes.get(document);
  if (!byName) shapes.set(document, (byName = new Map()));
  const key = operationName ?? '';
  let shape = byName.get(key);
  if (shape === undefined) {
    const operation = getOperationAST(document, operationName);
    shape = operation ? shapeOf(document, operation, schema) : null;
    byName.set(key, shape);
  }
  return shape;
}

/**
 * The cost of the operation `operationName` selects in `document` (null when there is no such
 * operation: execution reports that). Throws graphql's error for variables that do not coerce.
 */
export function operationCost(document: DocumentNode, operationName: string | null | undefined, schema: GraphQLSchema, variables: Record<string, unknown>, ctx: object): OperationCost | null {
  const shape = operationShape(document, operationName, schema);
  if (!shape) return null;
  const operation = getOperationAST(document, operationName)!;
  // Pothos measures the first operation of a document: hand it the one that runs.
  const only = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION).length === 1
    ? document
    : { ...document, definitions: document.definitions.filter((d) => d === operation || d.kind === Kind.FRAGMENT_DEFINITION) };
  const pothos = complexityFromQuery(only, { schema, ctx, variables });
  return { ...pothos, ...shape };
}

/**
 * The cost an operation may reach, by the caller's plan (Pothos's measure of the schema's own
 * fields; depth and breadth are the same on every plan: COMPLEXITY_LIMITS).
 */
export const COST_LIMITS: Readonly<Record<Plan, number>> = { starter: 5_000, growth: 10_000, business: 20_000, enterprise: 50_000 };

/** The root field of the operation that costs most, and its cost (what a cost refusal names). */
export function heaviestRootField(document: DocumentNode, operationName: string | null | undefined, schema: GraphQLSchema, variables: Record<string, unknown>, ctx: object): { field: string; cost: number } | undefined {
  const operation = getOperationAST(document, operationName);
  if (!operation) return undefined;
  const fragments = document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION);
  let heaviest: { field: string; cost: number } | undefined;
  for (const selection of operation.selectionSet.selections) {
    if (selection.kind !== Kind.FIELD) continue;
    const alone: DocumentNode = { ...document, definitions: [{ ...operation, selectionSet: { ...operation.selectionSet, selections: [selection] } }, ...fragments] };
    const cost = complexityFromQuery(alone, { schema, ctx, variables }).complexity;
    const field = selection.alias ? `${selection.alias.value}: ${selection.name.value}` : selection.name.value;
    if (!heaviest || cost > heaviest.cost) heaviest = { field, cost };
  }
  return heaviest;
}

/**
 * The first limit `cost` passes, as the client's error (400 VALIDATION_ERROR with `details.limit`).
 * `plan` picks the cost limit (COST_LIMITS); a cost refusal names the root field that weighs most
 * (`details.field`, `details.field_cost`), which `heaviest` finds only then.
 */
export function overLimit(cost: OperationCost, plan: Plan = 'starter', heaviest?: () => { field: string; cost: number } | undefined): ServiceError | undefined {
  const refuse = (limit: string, message: string, value: number, max: number, extra: Record<string, unknown> = {}) =>
    new ServiceError('VALIDATION_ERROR', message, { limit, value, max, ...extra }, { status: 400 });
  const { introspection: i, mostRepeated } = cost;
  if (i.schemaFields > INTROSPECTION_LIMITS.schemaFields) {
    return refuse('schema_fields', `Query selects __schema ${i.schemaFields} times (max: ${INTROSPECTION_LIMITS.schemaFields})`, i.schemaFields, INTROSPECTION_LIMITS.schemaFields, { field: '__schema' });
  }
  if (mostRepeated && mostRepeated.count > SELECTION_LIMITS.rootFieldRepeats) {
    return refuse('root_field_repeats', `Query selects the root field ${mostRepeated.field} ${mostRepeated.count} times (max: ${SELECTION_LIMITS.rootFieldRepeats})`,
      mostRepeated.count, SELECTION_LIMITS.rootFieldRepeats, { field: mostRepeated.field });
  }
  if (cost.aliases > SELECTION_LIMITS.aliases) {
    return refuse('aliases', `Query exceeds maximum aliases (aliases: ${cost.aliases}, max: ${SELECTION_LIMITS.aliases})`, cost.aliases, SELECTION_LIMITS.aliases);
  }
  for (const what of ['depth', 'breadth'] as const) {
    if (cost[what] > COMPLEXITY_LIMITS[what]) {
      return refuse(what, `Query exceeds maximum ${what} (${what}: ${cost[what]}, max: ${COMPLEXITY_LIMITS[what]})`, cost[what], COMPLEXITY_LIMITS[what]);
    }
  }
  const maxCost = COST_LIMITS[plan];
  if (cost.complexity > maxCost) {
    const top = heaviest?.();
    return refuse('complexity', `Query exceeds maximum complexity (complexity: ${cost.complexity}, max: ${maxCost} on the ${plan} plan)${top ? `; ${top.field} costs ${top.cost}: ask for fewer items or fields there` : ''}`,
      cost.complexity, maxCost, { plan, ...(top ? { field: top.field, field_cost: top.cost } : {}) });
  }
  for (const what of ['depth', 'complexity'] as const) {
    if (i[what] > INTROSPECTION_LIMITS[what]) {
      return refuse(`introspection_${what}`, `Introspection exceeds maximum ${what} (${what}: ${i[what]}, max: ${INTROSPECTION_LIMITS[what]})`, i[what], INTROSPECTION_LIMITS[what]);
    }
  }
  return undefined;
}

type Fragments = ReadonlyMap<string, FragmentDefinitionNode>;

function shapeOf(document: DocumentNode, operation: OperationDefinitionNode, schema: GraphQLSchema): OperationShape | null {
  const root = schema.getRootType(operation.operation);
  if (!root) return null;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const introspection = { complexity: 0, depth: 0, schemaFields: 0 };
  const counts = new Map<string, number>();
  const meta = new MetaCost(schema, fragments);
  // Root fields, through the fragments spread at the root (validation has ruled out cycles; `seen` guards anyway).
  const walkRoot = (set: SelectionSetNode, seen: ReadonlySet<string>) => {
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) {
        const name = s.name.value;
        counts.set(name, (counts.get(name) ?? 0) + 1);
        const def = name === '__schema' ? SchemaMetaFieldDef : name === '__type' ? TypeMetaFieldDef : undefined;
        if (!def) continue;
        if (name === '__schema') introspection.schemaFields++;
        const below = s.selectionSet ? meta.of(s.selectionSet, getNamedType(def.type)) : ZERO;
        introspection.complexity += 1 + below.complexity;
        introspection.depth = Math.max(introspection.depth, 1 + below.depth);
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        walkRoot(s.selectionSet, seen);
      } else {
        const f = fragments.get(s.name.value);
        if (f && !seen.has(f.name.value)) walkRoot(f.selectionSet, new Set([...seen, f.name.value]));
      }
    }
  };
  walkRoot(operation.selectionSet, new Set());
  let mostRepeated: OperationShape['mostRepeated'];
  for (const [field, count] of counts) if (!mostRepeated || count > mostRepeated.count) mostRepeated = { field, count };
  const introspectionOnly = counts.size > 0 && [...counts.keys()].every((f) => f === '__schema' || f === '__type' || f === '__typename');
  return { introspection, aliases: aliasesIn(operation.selectionSet, fragments, new Map(), new Set()), mostRepeated, introspectionOnly };
}

/** Aliases at every level below `set`; a fragment's own count is computed once and added per spread. */
function aliasesIn(set: SelectionSetNode, fragments: Fragments, memo: Map<string, number>, active: Set<string>): number {
  let n = 0;
  for (const s of set.selections) {
    if (s.kind === Kind.FIELD) {
      if (s.alias) n++;
      if (s.selectionSet) n += aliasesIn(s.selectionSet, fragments, memo, active);
    } else if (s.kind === Kind.INLINE_FRAGMENT) {
      n += aliasesIn(s.selectionSet, fragments, memo, active);
    } else {
      const name = s.name.value;
      const f = fragments.get(name);
      if (!f || active.has(name)) continue;
      let inF = memo.get(name);
      if (inF === undefined) {
        active.add(name);
        inF = aliasesIn(f.selectionSet, fragments, memo, active);
        active.delete(name);
        memo.set(name, inF);
      }
      n += inF;
    }
  }
  return n;
}

type Measure = { complexity: number; depth: number };
const ZERO: Measure = { complexity: 0, depth: 0 };
/** As Pothos's defaults: a field costs 1 and a list multiplies what it selects by 10. */
const FIELD_COST = 1;
const LIST_MULTIPLIER = 10;

const isList = (t: GraphQLOutputType): boolean => isListType(t) || (isNonNullType(t) && isListType(t.ofType));

/** Cost and depth below an introspection field (the `__Schema`, `__Type`, … types are ordinary object types). */
class MetaCost {
  readonly #schema: GraphQLSchema;
  readonly #fragments: Fragments;
  readonly #memo = new Map<SelectionSetNode, Map<GraphQLNamedType, Measure>>();
  readonly #active = new Set<SelectionSetNode>();

  constructor(schema: GraphQLSchema, fragments: Fragments) {
    this.#schema = schema;
    this.#fragments = fragments;
  }

  of(set: SelectionSetNode, type: GraphQLNamedType): Measure {
    const known = this.#memo.get(set)?.get(type);
    if (known) return known;
    if (this.#active.has(set)) return ZERO;
    this.#active.add(set);
    let complexity = 0;
    let depth = 0;
    const add = (m: Measure) => {
      complexity += m.complexity;
      depth = Math.max(depth, m.depth);
    };
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) {
        const field = isObjectType(type) || isInterfaceType(type) ? type.getFields()[s.name.value] : undefined;
        if (!field || !s.selectionSet) {
          add({ complexity: FIELD_COST, depth: 1 });
          continue;
        }
        const below = this.of(s.selectionSet, getNamedType(field.type));
        add({ complexity: FIELD_COST + below.complexity * (isList(field.type) ? LIST_MULTIPLIER : 1), depth: 1 + below.depth });
      } else {
        const f = s.kind === Kind.INLINE_FRAGMENT ? s : this.#fragments.get(s.name.value);
        if (!f) continue;
        const on = f.typeCondition ? this.#schema.getType(f.typeCondition.name.value) : type;
        add(this.of(f.selectionSet, on ?? type));
      }
    }
    this.#active.delete(set);
    const m = { complexity, depth };
    let byType = this.#memo.get(set);
    if (!byType) this.#memo.set(set, (byType = new Map()));
    byType.set(type, m);
    return m;
  }
}
