/** Jest: unit tests sit beside their code; contract, scenario and end-to-end suites live in tests/.
 *  The real stack (ops/stack) is brought up by ops/test before Jest starts. */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { isolatedModules: true, diagnostics: false }] },
  testMatch: ['<rootDir>/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '/data/'],
  maxWorkers: 2,
  testTimeout: 60000,
  verbose: true,
};
