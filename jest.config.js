/** Jest: unit tests sit beside their code; contract, scenario and end-to-end suites live in tests/.
 *  The real stack (ops/stack) is brought up by ops/test before Jest starts.
 *
 *  Two projects: `unit` (tests beside the code that need no stack: `npm run test:unit`) and
 *  `integration` (tests/ and the few tests beside code that talk to a real server). `npm test`
 *  (ops/test) runs both. */
const shared = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { isolatedModules: true, diagnostics: false }] },
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '/data/'],
};

/** Tests beside the code that need a server of the stack, so they run with the integration suites. */
const needsStack = ['adapters/analytics/chsql.test.ts'];

module.exports = {
  projects: [
    {
      ...shared,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/{core,adapters,http,api,processors,runtime,ingest,scheduler,dispatcher,schemas,shared,bench}/**/*.test.ts',
        ...needsStack.map((p) => `!**/${p}`),
      ],
    },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/tests/**/*.test.ts', ...needsStack.map((p) => `<rootDir>/${p}`)],
    },
  ],
  maxWorkers: 2,
  testTimeout: 60000,
  verbose: true,
};
