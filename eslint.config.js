import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Dependency rules (ARCHITECTURE.md, "Dependency rules"). ESLint applies the last matching
 * `no-restricted-imports` only, so each file group lists every pattern that holds for it.
 */
const SURFACES = { group: ['**/graphql/**', '**/rest/**', '**/*.graphql.ts', '**/*.rest.ts', '**/server.ts', 'graphql', 'graphql-yoga', 'graphql-ws', '@pothos/*', 'pg-boss'], message: 'Services and entities know no surface (GraphQL, REST) and no pg-boss types: use platform/jobs.' };
const OTHER_MODULES = { regex: '^\\.\\./(?!manifest\\.ts$)[^./][^/]*/(?!index\\.ts$)(?![^/]*\\.ports\\.ts$)', message: 'A module reaches another module only through its manifest (index.ts) or its *.ports.ts (declared ports), never its services, entities or internals.' };
const COMPOSITION = { group: ['**/modules/**', '**/app.ts', '**/context.ts', '**/rest/**', '**/graphql/**', '**/server.ts', '**/main.ts'], message: 'platform/ and providers/ know no module, surface or composition root.' };

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'schema/**', 'coverage/**', 'test/graphql/gql/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', performance: 'readonly', fetch: 'readonly', Response: 'readonly', Headers: 'readonly', TextEncoder: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', setInterval: 'readonly', clearInterval: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A module hands a derived type to a platform registry by augmentation: `interface ModuleIdPrefixes extends Readonly<typeof ids> {}`.
      '@typescript-eslint/no-empty-object-type': ['error', { allowInterfaces: 'with-single-extends' }],
      'no-restricted-syntax': ['error', { selector: "MemberExpression[object.name='process'][property.name='env']", message: 'Read configuration through src/config.ts' }],
    },
  },
  { files: ['src/config.ts', 'src/modules/config.ts', 'test/**', 'bench/**', 'vitest.config.ts', 'scripts/**'], rules: { 'no-restricted-syntax': 'off' } },
  // Tests read loosely typed JSON responses.
  { files: ['test/**', 'src/**/*.test.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },

  { files: ['src/platform/**', 'src/providers/**'], ignores: ['**/*.test.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [COMPOSITION] }] } },
  { files: ['src/modules/*/**'], rules: { 'no-restricted-imports': ['error', { patterns: [OTHER_MODULES] }] } },
  { files: ['src/modules/**/*.service.ts', 'src/modules/**/*.entities.ts', 'src/modules/**/services/**'], rules: { 'no-restricted-imports': ['error', { patterns: [OTHER_MODULES, SURFACES] }] } },
);
