/**
 * The layers of src/ and what each may import (docs/architecture.md): `npm run lint` fails
 * on an import cycle (type-only imports included) and on any arrow that points up.
 */

/** Folder (or top-level file) -> the folders it may import besides itself. */
const MAY_IMPORT = {
  // The floor: no imports of the project's own.
  domain: [],
  problems: [],
  config: ['domain'],
  version: [],
  logger: ['config'],
  tls: ['config'],
  db: ['config', 'domain'],
  ops: ['config', 'db', 'domain', 'problems'],
  // The request path, from its first step to its last.
  edge: ['config', 'db', 'domain', 'problems', 'ops', 'tls', 'logger'],
  access: ['config', 'db', 'domain', 'problems', 'ops', 'edge'],
  resources: ['config', 'db', 'domain', 'problems', 'ops', 'edge', 'version'],
  openapi: ['config', 'db', 'domain', 'problems', 'edge', 'resources', 'version'],
  app: ['config', 'db', 'domain', 'problems', 'ops', 'edge', 'access', 'resources', 'openapi', 'logger', 'tls'],
  // Writing data and managing keys, beside the request path.
  importer: ['config', 'db', 'domain', 'problems', 'resources'],
  management: ['config', 'db', 'domain', 'access'],
  demo: ['config', 'db', 'domain', 'importer', 'management'],
  cabinet: ['config', 'db', 'domain', 'problems', 'ops', 'edge', 'access', 'management', 'tls', 'logger'],
  server: ['config', 'db', 'domain', 'ops', 'edge', 'access', 'app', 'cabinet', 'management', 'logger', 'tls'],
  cli: ['config', 'db', 'domain', 'ops', 'importer', 'management', 'demo', 'openapi', 'server', 'logger', 'tls', 'version'],
};

const moduleOf = (name) => `^src/${name}(/|\\.ts$)`;

const layerRules = Object.entries(MAY_IMPORT).map(([name, allowed]) => ({
  name: `layer-${name}`,
  comment: `src/${name} may import only: ${allowed.join(', ') || 'nothing of the project'}`,
  severity: 'error',
  from: { path: moduleOf(name) },
  to: { path: '^src/', pathNot: [name, ...allowed].map(moduleOf) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycle, not even through a type.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'importer-reads-only-the-model',
      comment: 'The importer may use the resources\' schemas and items, never their routes, repositories or stored answers.',
      severity: 'error',
      from: { path: moduleOf('importer') },
      to: { path: '^src/resources/(index|cache)\\.ts$|^src/resources/common/(route|list|query|period)\\.ts$|^src/resources/[^/]+/(routes|repository)\\.ts$' },
    },
    {
      name: 'management-uses-only-key-values',
      comment: 'Key management may use how keys are made and hashed, nothing else of the request path.',
      severity: 'error',
      from: { path: moduleOf('management') },
      to: { path: '^src/access/', pathNot: '^src/access/keys\\.ts$' },
    },
    {
      name: 'every-module-has-a-layer',
      comment: 'A new folder of src/ gets its place in MAY_IMPORT (and in docs/architecture.md).',
      severity: 'error',
      from: { path: '^src/', pathNot: Object.keys(MAY_IMPORT).map(moduleOf) },
      to: {},
    },
    ...layerRules,
  ],
  options: {
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
