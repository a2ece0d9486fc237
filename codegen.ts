import type { CodegenConfig } from '@graphql-codegen/cli';

/** Prints the Pothos schema to schema/schema.graphql (committed; CI fails when it drifts). */
const config: CodegenConfig = {
  schema: './src/graphql/schema.ts',
  generates: {
    'schema/schema.graphql': { plugins: ['schema-ast'] },
  },
  silent: true,
};

export default config;
