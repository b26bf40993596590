import { openStore } from '../../db/index.js';
import { COMMAND_LOCK_WAIT, upgradeStore, type CommandContext } from '../context.js';

export async function migrateCommand({ config, out }: CommandContext): Promise<number> {
  const store = openStore(config, COMMAND_LOCK_WAIT);
  try {
    const { applied, rebuilt } = await upgradeStore(store);
    const done = [...applied, ...rebuilt.map((part) => `read model: ${part}`)];
    out.result(
      { store: store.dialect, location: store.location, applied, rebuilt },
      done.length > 0 ? `Applied ${done.join(', ')} to ${store.location}` : `Schema is up to date (${store.location})`,
    );
    return 0;
  } finally {
    await store.close();
  }
}
