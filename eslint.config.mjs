import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      'data/**',
      'coverage/**',
      'bench/results/**',
      'tests/client/generated/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Only the configuration module reads the environment (ARCHITECTURE.md).
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read configuration through runtime/config.ts' },
      ],
    },
  },
  {
    files: [
      'runtime/config.ts',
      'runtime/cli.ts',
      'tests/support/**',
      // A client program of the API (not the service): it takes its addresses and credentials from the environment.
      'tests/client/**',
      'bench/**',
      'jest.config.js',
      'eslint.config.mjs',
    ],
    rules: { 'no-restricted-properties': 'off' },
  },
  { files: ['tests/**', '**/*.test.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    languageOptions: { globals: { module: 'writable', require: 'readonly', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
