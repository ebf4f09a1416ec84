/**
 * For one release only: the shared channels of the release before (`legacyChannels` in
 * domain/key-space.ts), where it published `<instance id>:<message>` instead of the typed envelope.
 * This release also publishes there in that form and hears the release before there, so a flush or a
 * revocation made on either release of a rolling upgrade reaches both. An instance of this release
 * hears another one's message twice (typed and legacy); both channels carry idempotent messages (drop
 * what you remember). The release after this one deletes this file.
 */
import { legacyChannels } from '../../domain/key-space.js';
import type { RedisCacheStore } from './redis-cache-store.js';

export class LegacyBusBridge {
  readonly #id: string;

  constructor(instanceId: string) {
    this.#id = instanceId;
  }

  /** Publishes `message` on the legacy name of `channel`, if it has one. */
  async publish(redis: RedisCacheStore, channel: string, message: string): Promise<void> {
    const legacy = legacyChannels.get(channel);
    if (legacy !== undefined) await redis.publish(legacy, `${this.#id}:${message}`);
  }

  /** Hears the release before on the legacy name of `channel`, if it has one (never our own messages); a function that stops it. */
  subscribe(redis: RedisCacheStore, channel: string, deliver: (message: string) => void): (() => void) | undefined {
    const legacy = legacyChannels.get(channel);
    if (legacy === undefined) return undefined;
    return redis.subscribe(legacy, (raw) => {
      const at = raw.indexOf(':');
      if (at > 0 && raw.slice(0, at) !== this.#id) deliver(raw.slice(at + 1));
    });
  }
}
