import type { CodegenConfig } from '@graphql-codegen/cli';

/**
 * Prints the Pothos schema to schema/schema.graphql, and generates typed documents (client preset)
 * for the operations in test/graphql/operations.ts into test/graphql/gql/. Both are committed; CI
 * fails when either drifts.
 */
const config: CodegenConfig = {
  schema: './src/graphql/schema.ts',
  generates: {
    'schema/schema.graphql': { plugins: ['schema-ast'] },
    'test/graphql/gql/': {
      preset: 'client',
      documents: ['test/graphql/operations.ts'],
      // String documents (no graphql-js runtime in the client), type-only imports, `.ts` import
      // extensions for Node's type stripping and `verbatimModuleSyntax`.
      config: { documentMode: 'string', useTypeImports: true, enumsAsTypes: true, importExtension: '.ts', scalars: { DateTime: 'string', JSON: 'unknown' } },
      presetConfig: { fragmentMasking: false },
    },
  },
  silent: true,
};

export default config;
