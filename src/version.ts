/** The service's version, which is the package's: the CLI's --version and the OpenAPI document's info.version. */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let version: string | undefined;

/** The nearest package.json above this module: the package's, wherever the module runs from (src/ in tests, dist/bundle/ built). */
function packageFile(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) return file;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
  }
}

export function packageVersion(): string {
  version ??= (JSON.parse(fs.readFileSync(packageFile(), 'utf8')) as { version: string }).version;
  return version;
}
