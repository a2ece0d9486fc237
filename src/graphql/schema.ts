/**
 * The whole GraphQL schema: the builder plus every module's types (each manifest imports its own
 * `<ctx>.graphql.ts`). Codegen prints it to schema/schema.graphql.
 *
 * `@defer` and `@stream` are graphql 17's own directive definitions: graphql's standard validation
 * rules (`specifiedRules`) already check them (labels, root fields, lists, not in subscriptions) and
 * Yoga's executor runs them (incremental delivery, see graphql/yoga.ts).
 */
import { GraphQLDeferDirective, GraphQLStreamDirective, specifiedDirectives } from 'graphql';
import { builder } from './builder.ts';
import './platform.graphql.ts';
import '../modules/index.ts';

export const schema = builder.toSchema({ sortSchema: true, directives: [...specifiedDirectives, GraphQLDeferDirective, GraphQLStreamDirective] });
export default schema;
