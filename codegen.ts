import type { CodegenConfig } from '@graphql-codegen/cli';

/**
 * Prints the Pothos schema to schema/schema.graphql, and generates typed documents (client preset)
 * for the operations in test/graphql/operations.ts into test/graphql/gql/ (with their
 * persisted-documents manifest). Both are committed; CI
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
      // persistedDocuments: also persisted-documents.json (sha256 id → document), the manifest a
      // dashboard uploads (POST /v1/graphql/documents) to send ids instead of documents.
      presetConfig: { fragmentMasking: false, persistedDocuments: true },
    },
  },
  silent: true,
};

export default config;
