/**
 * Which store answers: Redis when it answers, process memory when it does not. A failed Redis
 * command, or a closed connection, switches every later call to memory at once (no request waits on
 * a dead Redis); the switch back happens by itself when the connection is ready again and Redis
 * answers a PING. Each transition is logged once.
 */
import type { Logger } from '../logger.js';
import type { RedisCacheStore } from './redis-cache-store.js';

export interface RedisFailoverOptions {
  /** The shared store; absent when the service runs with memory only. */
  redis: RedisCacheStore | undefined;
  logger: Logger;
  /** How long `start()` waits for Redis before carrying on from memory. */
  startTimeoutMs: number;
  /**
   * While in memory mode with a connection that looks ready (a frozen Redis keeps its socket open),
   * how often to PING it to find out whether it answers again.
   */
  probeIntervalMs: number;
  /** Called after every switch (to Redis or to memory), and whenever the subscriber connection changes. */
  onChange: () => void;
}

export class RedisFailover {
  readonly #redis: RedisCacheStore | undefined;
  readonly #logger: Logger;
  readonly #startTimeoutMs: number;
  readonly #probeIntervalMs: number;
  readonly #onChange: () => void;
  readonly #unsubscribe: Array<() => void> = [];
  #useRedis = false;
  // Bumped on every switch to Redis, so that a command started before a fallback and recovery cannot
  // knock the cache back into memory mode when it finally fails.
  #epoch = 0;
  #probe: NodeJS.Timeout | undefined;
  #probing = false;
  #closed = false;

  constructor(options: RedisFailoverOptions) {
    this.#redis = options.redis;
    this.#logger = options.logger;
    this.#startTimeoutMs = options.startTimeoutMs;
    this.#probeIntervalMs = options.probeIntervalMs;
    this.#onChange = options.onChange;
  }

  /** True while Redis answers for the cache. */
  get useRedis(): boolean {
    return this.#useRedis;
  }

  /**
   * Connects to Redis for at most the start timeout. When Redis is unreachable it logs one warning and
   * stays in memory mode; the connection keeps retrying and the switch to Redis comes once it is ready.
   * Never throws.
   */
  async start(): Promise<void> {
    const redis = this.#redis;
    if (!redis) {
      this.#logger.info({ cache: 'memory' }, 'No Redis configured: caching in process memory');
      return;
    }
    this.#unsubscribe.push(
      redis.onReady(() => this.#confirmRedis()),
      redis.onDown((cause) => this.toMemory(cause)),
      redis.onSubscriptionChange(() => this.#changed()),
    );
    try {
      await redis.connect(this.#startTimeoutMs);
      this.#toRedis();
    } catch (err) {
      // A 'ready' may already have arrived while the timeout fired.
      if (this.#useRedis) return;
      this.#logger.warn(
        { cache: 'memory', reason: reasonOf(err) },
        'Redis is unreachable: caching in process memory; will switch to Redis when it is back',
      );
      this.#startProbe();
    }
  }

  /**
   * Runs `op` against Redis while in Redis mode, else resolves to `otherwise()`. A failed command
   * switches to memory mode (unless a recovery came in between) and also resolves to `otherwise()`.
   */
  async run<T>(op: (redis: RedisCacheStore) => Promise<T>, otherwise: () => T | Promise<T>): Promise<T> {
    const redis = this.#useRedis ? this.#redis : undefined;
    if (redis) {
      const epoch = this.#epoch;
      try {
        return await op(redis);
      } catch (err) {
        if (epoch === this.#epoch) this.toMemory(err);
      }
    }
    return otherwise();
  }

  /** Switches to memory mode now (a command failed somewhere, or the connection went down). */
  toMemory(cause: unknown): void {
    if (!this.#useRedis || this.#closed) return;
    this.#useRedis = false;
    this.#logger.warn({ cache: 'memory', reason: reasonOf(cause) }, 'Redis connection lost: caching in process memory until it is back');
    this.#startProbe();
    this.#changed();
  }

  /** Stops probing and listening, and stays in memory mode. Safe to call twice. */
  close(): void {
    this.#closed = true;
    this.#stopProbe();
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
    this.#useRedis = false;
  }

  #changed(): void {
    if (!this.#closed) this.#onChange();
  }

  /**
   * A reconnect is trusted once Redis answers a PING (for a cluster: every master, cluster state ok).
   * A cluster client says 'ready' again while a master is still down; switching on that alone made
   * one outage a run of lost/back switches, each failing a request over to memory.
   */
  #confirmRedis(): void {
    const redis = this.#redis;
    if (!redis || this.#useRedis || this.#closed) return;
    void redis.ping().then((ok) => {
      if (ok) this.#toRedis();
      else this.#startProbe();
    });
  }

  #toRedis(): void {
    if (this.#useRedis || this.#closed) return;
    this.#useRedis = true;
    this.#epoch++;
    this.#stopProbe();
    if (this.#epoch === 1) this.#logger.info({ cache: 'redis' }, 'Redis connected: caching in Redis');
    else this.#logger.info({ cache: 'redis' }, 'Redis is back: caching in Redis again');
    this.#changed();
  }

  // A reconnect announces itself with 'ready'; a server that froze and thawed does not (the socket
  // never closed), so while in memory mode an apparently ready connection is PINGed now and then.
  #startProbe(): void {
    if (this.#probe || !this.#redis || this.#closed) return;
    const redis = this.#redis;
    this.#probe = setInterval(() => {
      if (this.#probing || !redis.isReady()) return;
      this.#probing = true;
      void redis.ping().then((ok) => {
        this.#probing = false;
        if (ok && redis.isReady()) this.#toRedis();
      });
    }, this.#probeIntervalMs);
    this.#probe.unref();
  }

  #stopProbe(): void {
    if (this.#probe) clearInterval(this.#probe);
    this.#probe = undefined;
  }
}

/** What a failure says, for a log line (never a stack). */
export function reasonOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return err === undefined ? 'connection closed' : String(err);
}
