import { openStore } from '../../db/index.js';
import type { CommandContext } from '../context.js';

export async function migrateCommand({ config, out }: CommandContext): Promise<number> {
  const store = openStore(config);
  try {
    const applied = await store.migrate();
    out.result({ store: store.dialect, location: store.location, applied }, applied.length > 0 ? `Applied ${applied.join(', ')} to ${store.location}` : `Schema is up to date (${store.location})`);
    return 0;
  } finally {
    await store.close();
  }
}
