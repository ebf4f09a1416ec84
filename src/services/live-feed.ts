/**
 * One push connection per upstream for the whole fleet (DESIGN 23).
 *
 * Every instance announces, on the live channel of its provider, the symbols its subscribers follow
 * (SSE streams and WebSocket sessions alike). For each push upstream, the instance that holds the
 * upstream's lease (a lock with a time to live, renewed every tick) is its leader: it opens the
 * socket, subscribes to the union of every instance's symbols, and hands what arrives to the quote
 * cache, whose fill announces it on the broadcast channel to every instance. A leader that dies stops
 * renewing; its lease expires within `leaseTtlMs` and the next tick of another instance takes it and
 * connects. A leader that loses its lease (Redis failed over, a pause longer than the lease) closes
 * its socket. Without Redis the lease is this process's own: each instance connects alone.
 *
 * The leader also announces which upstreams are connected, so every instance knows whether pushes
 * cover its subscribers' symbols; a symbol no connected upstream prices is polled by the stream hub.
 */
import { randomUUID } from 'node:crypto';
import type { Broadcast } from '../domain/ports/cache.js';
import type { Logger } from '../domain/ports/logger.js';
import type { LeaseStore, PushedPrice, PushUpstream } from '../domain/ports/push.js';

export interface LiveFeedOptions {
  upstreams: readonly PushUpstream[];
  lease: LeaseStore;
  broadcast: Broadcast;
  /** The lease key of an upstream (`keys.liveLease`). */
  leaseKey: (upstream: string) => string;
  /** The channel on which instances announce their symbols and leaders their state. */
  channel: string;
  /** The symbols this instance's subscribers follow now (the stream hub's). */
  symbols: () => readonly string[];
  /** Takes each pushed price (`PushedQuotes.accept`). */
  onPrice: (update: PushedPrice, upstream: string) => void;
  logger: Logger;
  /** Lifetime of a lease; a dead leader is replaced within it plus one tick. Default 2500. */
  leaseTtlMs?: number;
  /** How often leases are renewed or tried and symbols announced. Default 750. */
  tickMs?: number;
  /**
   * True while the lease store is the fleet's (Redis answers); false while this process keeps its
   * cache in memory. Default: always shared.
   */
  shared?: () => boolean;
  /**
   * How long the store must have been this process's own before it takes a lease by itself: a short
   * Redis outage (or a slow answer on a loaded machine) must not open a second connection per
   * instance, which vendors that allow one connection per key punish. Default 10000.
   */
  localGraceMs?: number;
  /** Most symbols one instance announces (the union is bounded by instances times this). Default 10000. */
  maxSymbols?: number;
  now?: () => number;
}

interface Announcement {
  /** Instance id. */
  i: string;
  /** Its subscribers' symbols. */
  s: string[];
  /** The upstreams it leads and has connected. */
  u: string[];
}

interface Led {
  upstream: PushUpstream;
  token: string | undefined;
  /** The symbols last handed to the upstream, joined, to skip unchanged sets. */
  last: string;
  /** An acquire or renew is under way. */
  busy: boolean;
}

export class LiveFeed {
  readonly #o: Required<Omit<LiveFeedOptions, 'now'>> & { now: () => number };
  readonly #id = randomUUID();
  readonly #led: Led[];
  /** What each other instance announced last, and when. */
  readonly #peers = new Map<string, { symbols: string[]; up: string[]; at: number }>();
  #timer: NodeJS.Timeout | undefined;
  /** Since when the lease store has been this process's own (undefined while shared). */
  #localSince: number | undefined;
  #stopSub: (() => void) | undefined;
  #closed = false;

  constructor(options: LiveFeedOptions) {
    this.#o = { leaseTtlMs: 2500, tickMs: 750, maxSymbols: 10_000, shared: () => true, localGraceMs: 10_000, now: Date.now, ...options };
    this.#led = options.upstreams.map((upstream) => ({ upstream, token: undefined, last: '', busy: false }));
  }

  start(): void {
    if (this.#led.length === 0 || this.#timer !== undefined) return;
    this.#stopSub = this.#o.broadcast.subscribe(this.#o.channel, (message) => this.#onAnnouncement(message));
    this.#timer = setInterval(() => void this.tick(), this.#o.tickMs);
    this.#timer.unref();
    void this.tick();
  }

  /** The upstreams this instance leads now. */
  leading(): string[] {
    return this.#led.filter((l) => l.token !== undefined).map((l) => l.upstream.name);
  }

  /**
   * True while some instance of the fleet (this one included) has a push upstream connected that
   * prices `symbol` (any symbol when none is named). A peer's upstream is judged by this instance's
   * upstream of the same name; one this instance does not know covers nothing, so polling goes on.
   */
  pushing(symbol?: string): boolean {
    const covers = (led: Led | undefined) => led !== undefined && (symbol === undefined || led.upstream.covers(symbol));
    if (this.#led.some((l) => l.token !== undefined && l.upstream.isConnected && covers(l))) return true;
    const fresh = this.#o.now() - this.#o.leaseTtlMs;
    for (const peer of this.#peers.values()) {
      if (peer.at >= fresh && peer.up.some((name) => covers(this.#led.find((l) => l.upstream.name === name)))) return true;
    }
    return false;
  }

  /** The union of every live instance's symbols, bounded. */
  union(): string[] {
    const all = new Set(this.#o.symbols());
    const fresh = this.#o.now() - this.#o.leaseTtlMs;
    for (const [id, peer] of this.#peers) {
      if (peer.at < fresh) {
        this.#peers.delete(id);
        continue;
      }
      for (const symbol of peer.symbols) all.add(symbol);
    }
    return [...all].sort();
  }

  /** One round: announce, then renew or take each lease and hand the union to the upstreams led. */
  async tick(): Promise<void> {
    if (this.#closed) return;
    const own = [...this.#o.symbols()].slice(0, this.#o.maxSymbols);
    const up = this.#led.filter((l) => l.token !== undefined && l.upstream.isConnected).map((l) => l.upstream.name);
    const announcement: Announcement = { i: this.#id, s: own, u: up };
    await this.#o.broadcast.publish(this.#o.channel, JSON.stringify(announcement)).catch(() => undefined);
    const union = this.union();
    if (this.#o.shared()) this.#localSince = undefined;
    else this.#localSince ??= this.#o.now();
    await Promise.all(this.#led.map((led) => this.#lead(led, union)));
  }

  async #lead(led: Led, union: string[]): Promise<void> {
    if (led.busy || this.#closed) return;
    led.busy = true;
    const key = this.#o.leaseKey(led.upstream.name);
    try {
      if (led.token !== undefined) {
        const kept = await this.#o.lease.extendLock(key, led.token, this.#o.leaseTtlMs).catch(() => false);
        // While the fleet's store is away nobody else can take the lease over (they wait out the
        // grace), so the connection is kept; once it answers again, a lease it no longer confirms goes.
        if (!kept && this.#o.shared()) {
          this.#o.logger.warn({ upstream: led.upstream.name }, 'push upstream lease lost: closing the connection');
          led.token = undefined;
          led.last = '';
          await led.upstream.stop();
          return;
        }
      } else {
        if (this.#localSince !== undefined && this.#o.now() - this.#localSince < this.#o.localGraceMs) return;
        const token = await this.#o.lease.acquireLock(key, this.#o.leaseTtlMs).catch(() => undefined);
        if (token === undefined || this.#closed) return;
        led.token = token;
        this.#o.logger.info({ upstream: led.upstream.name }, 'push upstream lease taken: this instance connects');
        led.upstream.start({
          price: (update) => this.#o.onPrice(update, led.upstream.name),
          connected: (isUp) => this.#o.logger.info({ upstream: led.upstream.name, connected: isUp }, isUp ? 'push upstream connected' : 'push upstream disconnected: polling covers'),
        });
      }
      const joined = union.join(',');
      if (joined !== led.last) {
        led.last = joined;
        led.upstream.setSymbols(union);
      }
    } finally {
      led.busy = false;
    }
  }

  #onAnnouncement(message: string): void {
    let a: Announcement;
    try {
      a = JSON.parse(message) as Announcement;
    } catch {
      return;
    }
    if (typeof a.i !== 'string' || a.i === this.#id || !Array.isArray(a.s) || !Array.isArray(a.u)) return;
    const symbols = a.s.filter((s): s is string => typeof s === 'string' && s.length <= 32).slice(0, this.#o.maxSymbols);
    this.#peers.set(a.i, { symbols, up: a.u.filter((u): u is string => typeof u === 'string'), at: this.#o.now() });
  }

  /** Closes the sockets led here and gives the leases up, so another instance takes over at once. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#stopSub?.();
    await Promise.all(
      this.#led.map(async (led) => {
        await led.upstream.stop();
        if (led.token !== undefined) await this.#o.lease.releaseLock(this.#o.leaseKey(led.upstream.name), led.token).catch(() => undefined);
        led.token = undefined;
      }),
    );
  }
}
