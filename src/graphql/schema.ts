/**
 * The whole GraphQL schema: the builder plus every module's types (each manifest imports its own
 * `<ctx>.graphql.ts`). Codegen prints it to schema/schema.graphql.
 */
import { builder } from './builder.ts';
import './platform.graphql.ts';
import '../modules/index.ts';

export const schema = builder.toSchema({ sortSchema: true });
export default schema;
