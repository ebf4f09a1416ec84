/**
 * The layers of src/ and who may import whom. `npm run lint` runs it (depcruise src); CI fails on any
 * finding. Type-only imports count too: a layer must not name what it must not know.
 *
 *   http/ -> services/ -> domain/          main.ts wires infra/ adapters into services and http/
 *   infra/ -> domain/                      config.ts is read by main, infra/, http/ and the CLI
 *
 * The layout promises beyond the layers: the ports (domain/ports/<family>.ts) are types only and know
 * only each other; domain/ holds no state (no memory, connection or subscription package); no orphan
 * modules; no cycles; only main.ts and config.ts at the top of src/.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment: 'An import cycle ties two modules into one: break it by moving the shared part down a layer.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'only-main-and-config-at-the-top',
      severity: 'error',
      comment: 'Every module lives in its layer folder; only main.ts and config.ts stay at the top of src/.',
      from: { path: '^src/(?!main\\.ts$|config\\.ts$)[^/]+\\.ts$' },
      to: {},
    },
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment: 'domain/ holds pure rules and the ports: it imports only domain/ and generated/.',
      from: { path: '^src/domain/' },
      to: { path: '^src/', pathNot: '^src/(domain|generated)/' },
    },
    {
      name: 'ports-know-only-ports',
      severity: 'error',
      comment:
        'domain/ports/<family>.ts describe what the services need: they import only other ports and the generated API types.',
      from: { path: '^src/domain/ports/' },
      to: { path: '^src/', pathNot: '^src/(domain/ports|generated)/' },
    },
    {
      name: 'ports-import-only-types',
      severity: 'error',
      comment: 'A port file imports nothing at run time (import type only): the null objects it exports (NO_METRICS, NO_USAGE) need no import.',
      from: { path: '^src/domain/ports/' },
      to: { dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'domain-holds-no-state',
      severity: 'error',
      comment:
        'domain/ is pure rules: of the npm packages it uses only luxon (time zones), ipaddr.js (address rules) and pino (the Logger type). A memory, a connection or a subscription (quick-lru, ioredis, ...) lives in services/ or infra/ (LocalMemory is in services/).',
      from: { path: '^src/domain/' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-bundled', 'npm-no-pkg', 'npm-unknown'], pathNot: 'node_modules/(luxon|ipaddr\\.js|pino)/' },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'Every module is used by another or uses one: a file nothing imports and that imports nothing is dead (or a loose end of a split).',
      from: { orphan: true, pathNot: '\\.d\\.ts$' },
      to: {},
    },
    {
      name: 'services-know-no-adapters',
      severity: 'error',
      comment: 'services/ use ports, never adapters, HTTP or the configuration (values are handed in).',
      from: { path: '^src/services/' },
      to: { path: '^src/', pathNot: '^src/(services|domain|generated)/' },
    },
    {
      name: 'infra-knows-no-use-cases',
      severity: 'error',
      comment: 'infra/ adapters implement ports: they import domain/, generated/, config.ts and each other, never services/ or http/.',
      from: { path: '^src/infra/' },
      to: { path: '^src/', pathNot: '^src/(infra|domain|generated)/|^src/config\\.ts$' },
    },
    {
      name: 'http-knows-no-adapters',
      severity: 'error',
      comment: 'http/ reaches adapters only through services and ports; main.ts wires them.',
      from: { path: '^src/http/' },
      to: { path: '^src/', pathNot: '^src/(http|services|domain|generated)/|^src/config\\.ts$' },
    },
    {
      name: 'config-is-a-leaf',
      severity: 'error',
      comment: 'config.ts reads the environment; it may use domain/ rules, nothing that runs.',
      from: { path: '^src/config\\.ts$' },
      to: { path: '^src/', pathNot: '^src/(domain|generated)/|^src/config\\.ts$' },
    },
    {
      name: 'framework-internals-in-one-adapter',
      severity: 'error',
      comment:
        "A dependency's internals (files beside its public entry) are reached from one adapter module per dependency, whose test pins the version: " +
        'express-openapi-validator from src/http/openapi-validator.ts only (src/http/express-messages.ts is the one for Express, which is reached through its public entry).',
      from: { path: '^src/', pathNot: '^src/http/openapi-validator\\.ts$' },
      to: { path: 'node_modules/express-openapi-validator/dist/', pathNot: 'node_modules/express-openapi-validator/dist/index\\.(js|d\\.ts)$' },
    },
    {
      name: 'generated-is-a-leaf',
      severity: 'error',
      from: { path: '^src/generated/' },
      to: { path: '^src/', pathNot: '^src/generated/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/.*\\.d\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
