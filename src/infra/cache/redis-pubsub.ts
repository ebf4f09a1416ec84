/**
 * Publish/subscribe over the Redis connection of `redis-connection.ts`: PUBLISH on the command
 * connection, and one patient subscriber connection that subscribes every channel again after each
 * reconnect, knows whether delivery is live now and counts the gaps when messages may have been lost.
 */
import { Cluster } from 'ioredis';
import type { RedisConnection } from './redis-connection.js';
import type { RedisClient } from './redis-options.js';

const CLUSTER_SUBSCRIBER_CHECK_MS = 200;

/** The connection ioredis's cluster subscriber uses now (an ioredis internal; `undefined` when not found). */
function clusterSubscriberConnection(cluster: Cluster): unknown {
  const internal = (cluster as unknown as { subscriber?: unknown }).subscriber;
  return typeof internal === 'object' && internal !== null && 'subscriber' in internal ? internal.subscriber : undefined;
}

/**
 * Whether a cluster client's own subscriber connection (ioredis keeps one on some node and, when that
 * node goes, picks another and subscribes the same channels there) is up with its channels
 * subscribed again. Reads ioredis internals, checked for shape: when they are not as expected the
 * answer is true, i.e. the cluster's own status alone decides, as before.
 */
function clusterSubscriberUp(cluster: Cluster): boolean {
  const internal = (cluster as unknown as { subscriber?: unknown }).subscriber;
  if (typeof internal !== 'object' || internal === null || !('subscriber' in internal)) return true;
  // lastActiveSubscriber is set once the channels of the previous connection are subscribed again.
  const { subscriber: instance, lastActiveSubscriber } = internal as { subscriber: { status?: unknown } | null; lastActiveSubscriber?: unknown };
  return instance !== null && instance.status === 'ready' && lastActiveSubscriber === instance;
}

/** The channels this process listens to, over a subscriber connection of its own. */
export class RedisSubscriptions {
  readonly #connection: RedisConnection;
  readonly #channelListeners = new Map<string, Set<(message: string) => void>>();
  #subscriber: RedisClient | undefined;
  /** Channels whose SUBSCRIBE the current subscriber connection has confirmed; emptied when it drops. */
  readonly #confirmedChannels = new Set<string>();
  readonly #subscriptionListeners = new Set<() => void>();
  #clusterSubscriberWatch: NodeJS.Timeout | undefined;
  /** How many times the subscription was lost (see `subscriptionGaps`). */
  #subscriptionGaps = 0;

  constructor(connection: RedisConnection) {
    this.#connection = connection;
    connection.onClose(() => {
      this.#channelListeners.clear();
      this.#subscriptionListeners.clear();
      clearInterval(this.#clusterSubscriberWatch);
      this.#subscriber?.disconnect(false);
    });
  }

  #makeSubscriber(): RedisClient {
    const client = this.#connection.client;
    // Subscribing is no request: it may wait for Redis as long as Redis takes. So the subscriber
    // queues while disconnected, keeps what it queued across failed connection attempts (the
    // fail-fast `maxRetriesPerRequest: 0` dropped a SUBSCRIBE issued during a slow first connect,
    // and that instance never heard another instance again) and has no command timeout.
    const patient = { maxRetriesPerRequest: null, commandTimeout: undefined };
    if (client instanceof Cluster) {
      return client.duplicate(undefined, { enableOfflineQueue: true, lazyConnect: false, redisOptions: { ...client.options.redisOptions, ...patient } });
    }
    // ioredis's own re-subscribing is off: the 'ready' handler below subscribes every channel itself.
    return client.duplicate({ enableOfflineQueue: true, lazyConnect: false, autoResubscribe: false, ...patient });
  }

  /** PUBLISHes `message` on `channel`. Throws `CacheUnavailableError` when Redis cannot take it. */
  async publish(channel: string, message: string): Promise<void> {
    await this.#connection.run('PUBLISH', () => this.#connection.client.publish(channel, message));
  }

  /**
   * Calls `listener` for each message on `channel`, over a second connection that subscribes as soon
   * as Redis answers and again after every reconnect. Never throws; returns an unsubscribe function.
   */
  subscribe(channel: string, listener: (message: string) => void): () => void {
    let listeners = this.#channelListeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#channelListeners.set(channel, listeners);
      // Queued until connected: a subscription is no request, so waiting for Redis costs nobody.
      const sub = this.#subscriberClient();
      this.#notifySubscription();
      sub
        .subscribe(channel)
        .then(() => this.#confirmChannels(sub, [channel]))
        .catch(() => undefined);
    }
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  /**
   * True while every channel subscribed through `subscribe` is confirmed on a subscriber connection
   * that is up, i.e. messages other instances publish now reach this process (true when nothing is
   * subscribed). False from the moment that connection drops until it is back and subscribed again.
   */
  subscriptionLive(): boolean {
    if (this.#channelListeners.size === 0) return true;
    const sub = this.#subscriber;
    if (!sub || sub.status !== 'ready') return false;
    if (sub instanceof Cluster && !clusterSubscriberUp(sub)) return false;
    for (const channel of this.#channelListeners.keys()) if (!this.#confirmedChannels.has(channel)) return false;
    return true;
  }

  /**
   * How many times the subscription was lost since this store was made. A gap can be shorter than
   * anyone looks (a cluster moves its subscriber to another node in milliseconds): a count that moved
   * says messages may have been missed even when `subscriptionLive()` is true at every look.
   */
  subscriptionGaps(): number {
    return this.#subscriptionGaps;
  }

  /** Calls `listener` whenever `subscriptionLive()` or `subscriptionGaps()` may have changed. Returns an unsubscribe function. */
  onSubscriptionChange(listener: () => void): () => void {
    this.#subscriptionListeners.add(listener);
    return () => this.#subscriptionListeners.delete(listener);
  }

  #notifySubscription(): void {
    for (const listener of this.#subscriptionListeners) listener();
  }

  #confirmChannels(sub: RedisClient, channels: readonly string[]): void {
    // A reply that raced a drop says nothing about the connection now.
    if (this.#connection.closed || this.#subscriber !== sub || sub.status !== 'ready') return;
    for (const channel of channels) this.#confirmedChannels.add(channel);
    this.#notifySubscription();
  }

  #subscriberClient(): RedisClient {
    if (!this.#subscriber) {
      this.#connection.watchSentinels();
      const sub = this.#makeSubscriber();
      sub.on('error', () => undefined);
      // Every channel again on every connection: what this process listens to never depends on
      // whether an earlier SUBSCRIBE got its answer (ioredis re-subscribes only confirmed channels).
      sub.on('ready', () => {
        const channels = [...this.#channelListeners.keys()];
        if (channels.length > 0) {
          sub
            .subscribe(...channels)
            .then(() => this.#confirmChannels(sub, channels))
            .catch(() => undefined);
        }
      });
      const lost = () => {
        this.#subscriptionGaps++;
        this.#confirmedChannels.clear();
        this.#notifySubscription();
      };
      sub.on('close', lost);
      sub.on('end', lost);
      sub.on('message', (channel: string, message: string) => {
        for (const listener of this.#channelListeners.get(channel) ?? []) listener(message);
      });
      this.#connection.reviveOnEnd(sub);
      this.#connection.followSwitches(sub);
      this.#subscriber = sub;
      if (sub instanceof Cluster) {
        // A cluster moves its subscriber connection to another node by itself, with no event of its
        // own: look every 200 ms, so a gap in delivery is seen (and its end announced) anyway.
        let last = this.subscriptionLive();
        let connection = clusterSubscriberConnection(sub);
        this.#clusterSubscriberWatch = setInterval(() => {
          const now = this.subscriptionLive();
          const current = clusterSubscriberConnection(sub);
          // A new connection object means the old one ended: a gap, however short.
          const moved = current !== connection;
          if (moved) this.#subscriptionGaps++;
          if (moved || now !== last) this.#notifySubscription();
          last = now;
          connection = current;
        }, CLUSTER_SUBSCRIBER_CHECK_MS);
        this.#clusterSubscriberWatch.unref();
      }
    }
    return this.#subscriber;
  }
}
