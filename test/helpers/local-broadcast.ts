/** A `Broadcast` among objects of one process: what Redis pub/sub is to instances, for tests of the live feed. */
import type { Broadcast } from '../../src/domain/ports/cache.js';

export function localBroadcast(): Broadcast {
  const listeners = new Map<string, Set<(m: string) => void>>();
  return {
    async publish(channel, message) {
      for (const l of listeners.get(channel) ?? []) l(message);
    },
    subscribe(channel, listener) {
      const set = listeners.get(channel) ?? new Set();
      listeners.set(channel, set);
      set.add(listener);
      return () => set.delete(listener);
    },
    live: () => true,
    onResync: () => () => undefined,
  };
}
