import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'schema/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', performance: 'readonly', fetch: 'readonly', Response: 'readonly', Headers: 'readonly', TextEncoder: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', setInterval: 'readonly', clearInterval: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', { selector: "MemberExpression[object.name='process'][property.name='env']", message: 'Read configuration through src/config.ts' }],
    },
  },
  { files: ['src/config.ts', 'test/**', 'bench/**', 'vitest.config.ts', 'scripts/**'], rules: { 'no-restricted-syntax': 'off' } },
  // Tests read loosely typed JSON responses.
  { files: ['test/**', 'src/**/*.test.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
);
