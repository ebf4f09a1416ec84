/**
 * The Broadcast of a CLI process. A command that changes an identity (`mds keys revoke`, `mds users
 * delete`, `mds users set-password`, a new user) announces it to the running instances through Redis
 * exactly as an instance does (the "identity changed" event, domain/identity.ts), so each of them drops
 * what it remembers of that identity and closes its streams at once, not after its caches' lifetime.
 *
 * Nothing in a CLI listens: it only publishes, and connects to Redis on its first announcement, so a
 * command that changes nothing never touches Redis. When Redis cannot be reached, one warning says
 * so (a log line, or a plain line when the command's log is not shown) and the command carries on:
 * the instances then notice the change when their caches expire (AUTH_CACHE_SECONDS for users, a
 * second for keys) and close its streams at their next check.
 */
import type { Config } from '../config.js';
import type { Broadcast } from '../domain/ports/cache.js';
import type { ResilientCache } from '../infra/cache/index.js';
import type { Logger } from '../infra/logger.js';

/** How long the first announcement waits for Redis before giving up on telling the instances. */
const CONNECT_TIMEOUT_MS = 1000;

/** A publish-only Broadcast over the configured Redis, connected on first use. */
export class CliAnnouncements implements Broadcast {
  readonly #cacheConfig: Config['cache'];
  readonly #logger: Logger;
  readonly #warn: ((text: string) => void) | undefined;
  #cache: Promise<ResilientCache> | undefined;
  #warned = false;

  /** `warn` says the one warning instead of `logger` (a CLI whose log is not shown); default `logger.warn`. */
  constructor(cacheConfig: Config['cache'], logger: Logger, warn?: (text: string) => void) {
    this.#cacheConfig = cacheConfig;
    this.#logger = logger;
    this.#warn = warn;
  }

  /** Sends `message` to every running instance when Redis answers; never throws. */
  async publish(channel: string, message: string): Promise<void> {
    this.#cache ??= (async () => {
      // The Redis client loads with the first announcement: a command that changes nothing never pays for it.
      const { createCache } = await import('../infra/cache/index.js');
      // The cache's own lines (Redis unreachable, memory mode) speak of a service: the warning below says what matters here.
      const cache = createCache(this.#cacheConfig, this.#logger.child({}, { level: 'silent' }), { startTimeoutMs: CONNECT_TIMEOUT_MS });
      await cache.start();
      return cache;
    })();
    const cache = await this.#cache;
    if (cache.status().mode === 'redis') {
      await cache.publish(channel, message);
      if (cache.status().mode === 'redis') return;
    }
    if (this.#warned) return;
    this.#warned = true;
    const text =
      'Could not reach Redis to tell running instances of this change: they refuse old credentials once their caches expire (AUTH_CACHE_SECONDS for users, a second for API keys) and close their streams within 5 s more';
    if (this.#warn !== undefined) this.#warn(text);
    else this.#logger.warn({ channel, message }, text);
  }

  /** Nothing in a CLI listens: returns a function that does nothing. */
  subscribe(): () => void {
    return () => undefined;
  }

  /** False: a CLI hears no other instance. */
  live(): boolean {
    return false;
  }

  /** Never called back: a CLI keeps nothing on the strength of messages. */
  onResync(): () => void {
    return () => undefined;
  }

  /** Closes the Redis connection, if one was opened. */
  async close(): Promise<void> {
    const cache = this.#cache;
    this.#cache = undefined;
    if (cache !== undefined) await (await cache).close();
  }
}
