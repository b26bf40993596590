/** The service's version, which is the package's: the CLI's --version and the OpenAPI document's info.version. */
import fs from 'node:fs';

let version: string | undefined;

export function packageVersion(): string {
  // src/version.ts and dist/version.js both sit one level below the package root.
  version ??= (JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return version;
}
