/**
 * Best-effort messages between the instances sharing the cache (the `Broadcast` port): delivered to
 * this instance's subscribers at once and, while Redis answers, to every other instance through Redis
 * PUBLISH. On the wire a message is a typed envelope (`BusEnvelope`, JSON) naming its sender, so an
 * instance skips its own messages coming back from Redis (it delivered them when it published).
 */
import { randomUUID } from 'node:crypto';
import type { Broadcast } from '../../domain/ports/cache.js';
import type { Logger } from '../logger.js';
import { LegacyBusBridge } from './legacy-bus-bridge.js';
import type { RedisCacheStore } from './redis-cache-store.js';

/** What travels through Redis: who sent it, and what it says. */
export interface BusEnvelope {
  /** The sending instance (a random id per process). */
  from: string;
  message: string;
}

/** The envelope as it travels. */
export function encodeEnvelope(envelope: BusEnvelope): string {
  return JSON.stringify(envelope);
}

/** The envelope a received string holds; `undefined` for anything else (dropped). */
export function decodeEnvelope(raw: string): BusEnvelope | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { from, message } = parsed as Record<string, unknown>;
  return typeof from === 'string' && typeof message === 'string' ? { from, message } : undefined;
}

export interface CacheBusOptions {
  redis: RedisCacheStore | undefined;
  /** True while the cache is in Redis mode. */
  useRedis: () => boolean;
  /** Runs a command on Redis while in Redis mode; a failure switches the cache to memory and is never thrown. */
  onRedis: (op: (redis: RedisCacheStore) => Promise<void>) => Promise<void>;
  logger: Logger;
}

export class CacheBus implements Broadcast {
  readonly #redis: RedisCacheStore | undefined;
  readonly #useRedis: () => boolean;
  readonly #onRedis: CacheBusOptions['onRedis'];
  readonly #logger: Logger;
  readonly #id = randomUUID();
  readonly #listeners = new Map<string, Set<(message: string) => void>>();
  readonly #resyncListeners = new Set<() => void>();
  readonly #unsubscribe: Array<() => void> = [];
  readonly #legacy: LegacyBusBridge;
  /** What `live()` said when last looked at, to fire the resync listeners on each return to live. */
  #live = false;
  /** The store's subscription gap count at the last resync: a gap too short to see still resyncs. */
  #gapsAtResync = 0;

  constructor(options: CacheBusOptions) {
    this.#redis = options.redis;
    this.#useRedis = options.useRedis;
    this.#onRedis = options.onRedis;
    this.#logger = options.logger;
    this.#legacy = new LegacyBusBridge(this.#id);
  }

  /**
   * Delivers `message` to this instance's subscribers at once and, in Redis mode, to every other
   * instance through Redis. A Redis failure loses the remote delivery only; never throws.
   */
  async publish(channel: string, message: string): Promise<void> {
    this.#deliver(channel, message);
    const envelope: BusEnvelope = { from: this.#id, message };
    await this.#onRedis(async (redis) => {
      await redis.publish(channel, encodeEnvelope(envelope));
      await this.#legacy.publish(redis, channel, message);
    });
  }

  /** Calls `listener` for messages on `channel` from this instance and, through Redis, from the others. */
  subscribe(channel: string, listener: (message: string) => void): () => void {
    let listeners = this.#listeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#listeners.set(channel, listeners);
      const redis = this.#redis;
      if (redis) {
        this.#unsubscribe.push(
          redis.subscribe(channel, (raw) => {
            const envelope = decodeEnvelope(raw);
            // Our own messages were delivered locally when published.
            if (envelope !== undefined && envelope.from !== this.#id) this.#deliver(channel, envelope.message);
          }),
        );
        const stopLegacy = this.#legacy.subscribe(redis, channel, (message) => this.#deliver(channel, message));
        if (stopLegacy) this.#unsubscribe.push(stopLegacy);
      }
    }
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  /**
   * Messages from other instances arrive while the cache is in Redis mode and the subscriber
   * connection is up with every channel subscribed again; without Redis configured there is no
   * other instance to hear from. Leans to false: a command connection down counts as not live too,
   * since whatever this instance publishes meanwhile reaches nobody and the store is in doubt.
   */
  live(): boolean {
    const redis = this.#redis;
    return redis === undefined || (this.#useRedis() && redis.subscriptionLive());
  }

  /**
   * Calls `listener` each time `live()` turns true: after every gap (memory mode, the subscriber
   * connection lost) once every channel is subscribed again, and the first time at start (what was
   * kept before then was kept without hearing anyone).
   */
  onResync(listener: () => void): () => void {
    this.#resyncListeners.add(listener);
    return () => this.#resyncListeners.delete(listener);
  }

  /** Looks at `live()` again (the store switched, or the subscriber connection changed) and resyncs on a return to live. */
  checkLive(): void {
    const live = this.live();
    const gaps = this.#redis?.subscriptionGaps() ?? 0;
    const wasLive = this.#live;
    this.#live = live;
    if (!live || (wasLive && gaps === this.#gapsAtResync)) return;
    this.#gapsAtResync = gaps;
    this.#logger.debug({ cache: 'redis' }, 'Broadcast delivery is live: dropping what was kept on the strength of messages');
    for (const listener of this.#resyncListeners) {
      try {
        listener();
      } catch (err) {
        this.#logger.error({ reason: err instanceof Error ? err.message : String(err) }, 'A resync listener failed');
      }
    }
  }

  /** Stops every subscription. */
  close(): void {
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
  }

  #deliver(channel: string, message: string): void {
    for (const listener of this.#listeners.get(channel) ?? []) listener(message);
  }
}

