import path from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Dependency rules (ARCHITECTURE.md, "Dependency rules"). ESLint applies the last matching
 * `no-restricted-imports` only, so each file group lists every pattern that holds for it.
 */
const SURFACES = { group: ['**/graphql/**', '**/rest/**', '**/*.graphql.ts', '**/*.rest.ts', '**/server.ts', 'graphql', 'graphql-yoga', 'graphql-ws', '@pothos/*', 'pg-boss'], message: 'A module\'s files other than its surfaces (*.graphql.ts, *.rest.ts, *.presenters.ts, index.ts) know no GraphQL, REST or pg-boss types: use platform/jobs.' };

const SRC = path.resolve(import.meta.dirname, 'src');
const OTHER_MODULE = 'A module reaches another module only through its manifest (index.ts) or its declared ports (*.ports.ts), never its services, entities or internals.';
const KNOWS_NO_MODULE = 'platform/ and providers/ know no module, surface or composition root.';
/** The files of src that compose or serve (platform/ and providers/ import none of them). */
const COMPOSITION_FILES = /^(modules|rest|graphql)\/|^(app|context|server|main|admin)\.ts$/;

/**
 * Folder zones, by resolved path (so `../../voice/calls/calls.service.ts` from a subfolder is caught as
 * surely as `../voice/calls/calls.service.ts`): a file of `modules/<m>/` reaches `modules/<n>/` only at its
 * `index.ts` or a `*.ports.ts`; `platform/` and `providers/` reach no module and no composition file.
 */
function zoneViolation(file, target) {
  const moduleOf = (p) => (p.startsWith('modules/') && p.split('/').length > 2 ? p.split('/')[1] : undefined);
  const from = moduleOf(file);
  const to = moduleOf(target);
  if (from && to && from !== to) {
    const inside = target.split('/').slice(2).join('/');
    return inside === 'index.ts' || /(^|\/)[^/]*\.ports\.ts$/.test(inside) ? undefined : OTHER_MODULE;
  }
  if (/^(platform|providers)\//.test(file) && !file.endsWith('.test.ts') && COMPOSITION_FILES.test(target)) return KNOWS_NO_MODULE;
  return undefined;
}

const house = {
  rules: {
    zones: {
      meta: { type: 'problem', docs: { description: 'Dependency zones of src (ARCHITECTURE.md, "Dependency rules")' }, schema: [] },
      create(context) {
        const file = path.relative(SRC, context.filename);
        if (file.startsWith('..')) return {};
        const check = (node, spec) => {
          if (typeof spec !== 'string' || !spec.startsWith('.')) return;
          const why = zoneViolation(file, path.relative(SRC, path.resolve(path.dirname(context.filename), spec)));
          if (why) context.report({ node, message: why });
        };
        return {
          ImportDeclaration: (n) => check(n, n.source.value),
          ExportNamedDeclaration: (n) => n.source && check(n, n.source.value),
          ExportAllDeclaration: (n) => check(n, n.source.value),
          ImportExpression: (n) => n.source.type === 'Literal' && check(n, n.source.value),
          TSImportType: (n) => n.argument?.literal && check(n, n.argument.literal.value),
        };
      },
    },
  },
};

export default tseslint.config(
  // Generated or built: the printed schemas, typed GraphQL documents, the TypeScript client's types and build.
  { ignores: ['node_modules/**', '**/node_modules/**', '.data/**', 'schema/**', 'coverage/**', 'test/graphql/gql/**', 'clients/typescript/src/schema.ts', 'clients/typescript/dist/**'] },
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

  { files: ['src/**'], plugins: { house }, rules: { 'house/zones': 'error' } },
  // Transport-free: every file of a module but its surfaces (GraphQL, REST and its response shapes,
  // the manifest that wires them) and tests.
  { files: ['src/modules/*/**'], ignores: ['**/*.graphql.ts', '**/*.rest.ts', '**/*.presenters.ts', '**/index.ts', '**/*.test.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [SURFACES] }] } },
);
