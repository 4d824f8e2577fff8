/**
 * The layers as code (docs/architecture.md "Layers"), checked by `npm run lint` (dependency-cruiser).
 *
 *   runtime/                      composition root: reads the environment, picks adapters, starts roles
 *   ingest/ api/                  gateway routes (siblings: they never import each other)
 *   processors/ scheduler/ dispatcher/   background roles (siblings)
 *   http/                         the HTTP kit the gateways share
 *   core/                         domain logic: no HTTP, no Kafka, no Redis, no concrete adapter
 *   adapters/                     ports (adapters/<port>/types.ts) and their implementations
 *   shared/ schemas/              leaves: logger, metrics, settings types; JSON and Avro schemas
 *
 * Tests, benchmarks and ops scripts sit outside the layers.
 */
const OURS = '^(runtime|ingest|api|processors|scheduler|dispatcher|http|core|adapters|shared|schemas)/';
const port = '^adapters/[^/]+/types[.]ts$';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules form no cycle.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'runtime-is-the-root',
      severity: 'error',
      comment: 'Only the composition root (and the command line in it) imports runtime/.',
      from: { path: OURS, pathNot: '^runtime/' },
      to: { path: '^runtime/' },
    },
    {
      name: 'adapters-only-through-ports',
      severity: 'error',
      comment:
        'Outside runtime/ and adapters/, an adapter is reached through its port (adapters/<port>/types.ts).',
      from: { path: OURS, pathNot: '^(runtime|adapters)/' },
      to: { path: '^adapters/', pathNot: port },
    },
    {
      name: 'core-below-the-roles',
      severity: 'error',
      comment: 'core/ knows nothing of HTTP, gateways or roles.',
      from: { path: '^core/' },
      to: { path: '^(http|api|ingest|processors|scheduler|dispatcher)/' },
    },
    {
      name: 'adapters-below-the-roles',
      severity: 'error',
      comment: 'An adapter implements a port; it knows nothing of HTTP, gateways or roles.',
      from: { path: '^adapters/' },
      to: { path: '^(http|api|ingest|processors|scheduler|dispatcher)/' },
    },
    {
      name: 'http-kit-below-the-gateways',
      severity: 'error',
      comment: 'The HTTP kit serves the gateways and knows none of their routes, nor the background roles.',
      from: { path: '^http/' },
      to: { path: '^(api|ingest|processors|scheduler|dispatcher)/' },
    },
    {
      name: 'gateways-are-siblings',
      severity: 'error',
      comment:
        'ingest/ and api/ share only the HTTP kit and core; neither imports the other or a background role.',
      from: { path: '^(ingest|api)/' },
      to: { path: '^(ingest|api|processors|scheduler|dispatcher)/', pathNot: '^$1/' },
    },
    {
      name: 'roles-are-siblings',
      severity: 'error',
      comment:
        'processors/, scheduler/ and dispatcher/ share core and ports, never each other, HTTP or the gateways.',
      from: { path: '^(processors|scheduler|dispatcher)/' },
      to: { path: '^(processors|scheduler|dispatcher|http|api|ingest)/', pathNot: '^$1/' },
    },
    {
      name: 'leaves-are-leaves',
      severity: 'error',
      comment: 'shared/ and schemas/ import nothing of ours but each other.',
      from: { path: '^(shared|schemas)/' },
      to: { path: OURS, pathNot: '^(shared|schemas)/' },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/|[.]test[.]ts$' },
  },
};
