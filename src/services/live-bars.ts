/**
 * Live one-minute bars (DESIGN 26), built once per fleet and streamed by every instance.
 *
 * The leader of a push upstream (live-feed.ts) hands each pushed price to `accept`; the pure builder
 * (domain/bar-builder.ts) turns it into bar changes. Each symbol's builder state (its open bars, its
 * recent final bars, and what identifies the last tick counted) is kept in the shared cache, written
 * a few times a second while it changes, so a leader that takes over (the lease moved: a crash, a
 * restart) reads it before counting anything of that symbol and goes on where its predecessor's last
 * write left it: a tick counted there is recognised and skipped, a tick only the dead leader saw after
 * its last write is lost rather than doubled (with Yahoo's cumulative day volume, its volume comes back
 * in the next tick's rise). A new leader also reads the state of every symbol the fleet follows, so an
 * open bar nobody trades any more is still finalised. Without Redis the state is this process's.
 *
 * Bars go to every instance over the broadcast bus: an open bar at most once a second per symbol
 * (its latest state), a final or revised bar at once. Each instance's stream hub sends them as `bar`
 * events to the streams and sessions of that symbol that asked for bars. Final and revised bars also
 * go to the sink (the history store, as provider `live:<upstream>`), from the leader only.
 */
import { applyTick, closeBars, emptySymbolBars, type BarBuilderOptions, type BarChange, type BarTick, type SymbolBars } from '../domain/bar-builder.js';
import { MINUTE_MS } from '../domain/durations.js';
import type { BarSession, LiveBar, LiveBarSink } from '../domain/live-bar.js';
import type { Broadcast, CacheStore } from '../domain/ports/cache.js';
import type { Logger } from '../domain/ports/logger.js';
import type { PushedPrice } from '../domain/ports/push.js';

export interface LiveBarsOptions {
  /** Holds each symbol's builder state for the next leader (`keys.liveBarState`). */
  store: CacheStore;
  stateKey: (upstream: string, symbol: string) => string;
  /** Carries bars to every instance (this one included). */
  broadcast: Broadcast;
  channel: string;
  /** The push upstreams this instance leads now (`LiveFeed.leading`). */
  leading: () => readonly string[];
  /** Every symbol the fleet follows (`LiveFeed.union`): a new leader reads their state. */
  symbols: () => readonly string[];
  /** Sends a bar's wire JSON to this instance's subscribers of the symbol (`QuoteStreamHub.sendBar`). */
  deliver: (symbol: string, json: string) => void;
  /** Where final and revised bars are stored; none: they are only streamed. */
  sink?: LiveBarSink | undefined;
  /** The session of a minute of a symbol (domain/bar-sessions.ts). */
  sessionOf: (symbol: string, minuteMs: number) => BarSession | undefined;
  /** LIVE_BAR_GRACE_MS. */
  graceMs: number;
  /** LIVE_BAR_REVISION_SECONDS in ms. */
  revisionWindowMs: number;
  logger: Logger;
  /** How often bars are closed and open-bar updates sent. Default 100. */
  tickMs?: number;
  /** An open bar is published at most this often per symbol. Default 1000. */
  updateEveryMs?: number;
  /** How often a changed builder state is written to the store. Default 250. */
  persistEveryMs?: number;
  now?: () => number;
}

/** One upstream this instance leads: its symbols' builder states. */
interface Led {
  builder: BarBuilderOptions;
  states: Map<string, SymbolBars>;
  /** Symbols whose state is being read: their ticks wait here, in order. */
  loading: Map<string, BarTick[]>;
  /** Symbols whose state changed since it was last written. */
  dirty: Set<string>;
}

/** The bar as the streams carry it: `time` in ISO 8601 UTC like every answer's times. */
export function wireBar(bar: LiveBar): string {
  return JSON.stringify({
    symbol: bar.symbol,
    interval: bar.interval,
    time: new Date(bar.timeMs).toISOString(),
    open: bar.open,
    high: bar.high,
    low: bar.low,
    close: bar.close,
    volume: bar.volume,
    final: bar.final,
    revised: bar.revised,
    session: bar.session,
  });
}

function tickOf(update: PushedPrice): BarTick {
  return { symbol: update.symbol, price: update.price, timeMs: update.timeMs, size: update.size, dayVolume: update.dayVolume, sequence: update.sequence, aggregate: update.aggregate };
}

function isSymbolBars(value: unknown): value is SymbolBars {
  return typeof value === 'object' && value !== null && Array.isArray((value as SymbolBars).bars);
}

export class LiveBars {
  readonly #o: Required<Omit<LiveBarsOptions, 'sink'>> & { sink: LiveBarSink | undefined };
  readonly #led = new Map<string, Led>();
  /** Open-bar updates waiting for their symbol's next turn, by `upstream\nsymbol`. */
  readonly #pending = new Map<string, LiveBar>();
  /** When each `upstream\nsymbol` last had an open bar published. */
  readonly #sentAt = new Map<string, number>();
  /** Final bars for the sink, sent in one batch per tick. */
  #finals: LiveBar[] = [];
  /** The earliest moment a kept bar becomes final. */
  #due = Infinity;
  /** Wakes the round at `#due` itself rather than at the next 100 ms step. */
  #dueTimer: NodeJS.Timeout | undefined;
  #dueTimerAt = Infinity;
  #lastPersist = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopSub: (() => void) | undefined;
  #accepted = 0;

  constructor(options: LiveBarsOptions) {
    this.#o = { tickMs: 100, updateEveryMs: 1000, persistEveryMs: 250, now: Date.now, ...options, sink: options.sink };
  }

  /** Ticks taken by the builder (counted or not). */
  get accepted(): number {
    return this.#accepted;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#stopSub = this.#o.broadcast.subscribe(this.#o.channel, (message) => this.#onBar(message));
    this.#timer = setInterval(() => this.tick(), this.#o.tickMs);
    this.#timer.unref();
  }

  /** Takes a price the leader of `upstream` received. */
  accept(update: PushedPrice, upstream: string): void {
    this.#accepted += 1;
    const led = this.#lead(upstream);
    const tick = tickOf(update);
    const waiting = led.loading.get(tick.symbol);
    if (waiting !== undefined) {
      waiting.push(tick);
      return;
    }
    const state = led.states.get(tick.symbol);
    if (state === undefined) {
      led.loading.set(tick.symbol, [tick]);
      void this.#load(upstream, led, tick.symbol);
      return;
    }
    this.#apply(upstream, led, state, tick);
  }

  /** One round: follows leadership, closes bars that are due, publishes waiting updates, writes changed states. */
  tick(): void {
    const now = this.#o.now();
    const leading = new Set(this.#o.leading());
    for (const upstream of [...this.#led.keys()]) {
      // Another instance leads it now: what this one kept is no longer the truth.
      if (!leading.has(upstream)) this.#led.delete(upstream);
    }
    for (const upstream of leading) this.#lead(upstream);
    if (now >= this.#due) {
      this.#due = Infinity;
      const followed = new Set(this.#o.symbols());
      for (const [upstream, led] of this.#led) {
        for (const [symbol, state] of led.states) {
          const changes: BarChange[] = [];
          const before = state.bars.length;
          closeBars(led.builder, symbol, state, now, changes);
          if (changes.length > 0 || state.bars.length !== before) led.dirty.add(symbol);
          this.#emit(upstream, changes, now);
          this.#noteDue(led, state);
          // A symbol nobody follows any more, with nothing left to close or revise, leaves memory (its state stays in the store for its TTL).
          if (state.bars.length === 0 && !led.dirty.has(symbol) && !followed.has(symbol)) {
            led.states.delete(symbol);
            this.#sentAt.delete(`${upstream}\n${symbol}`);
          }
        }
      }
    }
    for (const [key, bar] of this.#pending) {
      if (now - (this.#sentAt.get(key) ?? -Infinity) < this.#o.updateEveryMs) continue;
      this.#pending.delete(key);
      this.#publish(key, bar, now);
    }
    if (this.#finals.length > 0 && this.#o.sink !== undefined) {
      const batch = this.#finals;
      this.#finals = [];
      this.#o.sink.storeFinal(batch).catch((err: unknown) => this.#o.logger.warn({ err: (err as Error).message, bars: batch.length }, 'final live bars could not be stored'));
    } else this.#finals = [];
    if (now - this.#lastPersist >= this.#o.persistEveryMs) {
      this.#lastPersist = now;
      void this.#persist();
    }
  }

  /** Writes every changed state now (a leader that shuts down hands its bars over). */
  async flush(): Promise<void> {
    await this.#persist();
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#dueTimer !== undefined) clearTimeout(this.#dueTimer);
    this.#dueTimer = undefined;
    this.#stopSub?.();
    await this.#persist();
  }

  #lead(upstream: string): Led {
    let led = this.#led.get(upstream);
    if (led !== undefined) return led;
    const o = this.#o;
    led = { builder: { upstream, sessionOf: o.sessionOf, graceMs: o.graceMs, revisionWindowMs: o.revisionWindowMs }, states: new Map(), loading: new Map(), dirty: new Set() };
    this.#led.set(upstream, led);
    // A new leader reads what its predecessor was building for every followed symbol, traded or not.
    for (const symbol of o.symbols()) {
      if (led.loading.has(symbol)) continue;
      led.loading.set(symbol, []);
      void this.#load(upstream, led, symbol);
    }
    return led;
  }

  /** Reads a symbol's state from the store, then applies the ticks that waited for it. */
  async #load(upstream: string, led: Led, symbol: string): Promise<void> {
    let state = emptySymbolBars();
    try {
      const entry = await this.#o.store.get(this.#o.stateKey(upstream, symbol));
      if (entry !== undefined) {
        const parsed = JSON.parse(entry.value) as unknown;
        if (isSymbolBars(parsed)) state = parsed;
      }
    } catch (err) {
      // Without the shared state the bars start afresh: nothing is counted twice, earlier ticks are missing.
      this.#o.logger.warn({ err: (err as Error).message, upstream, symbol }, 'live bar state unreadable: starting afresh');
    }
    if (this.#led.get(upstream) !== led) return;
    const waiting = led.loading.get(symbol) ?? [];
    led.loading.delete(symbol);
    led.states.set(symbol, state);
    this.#noteDue(led, state);
    for (const tick of waiting) this.#apply(upstream, led, state, tick);
    // A bar its predecessor left open past its grace is final now.
    this.#setDue(this.#o.now());
  }

  #apply(upstream: string, led: Led, state: SymbolBars, tick: BarTick): void {
    const now = this.#o.now();
    const changes: BarChange[] = [];
    const outcome = applyTick(led.builder, state, tick, now, changes);
    if (outcome === 'duplicate' || outcome === 'invalid') return;
    led.dirty.add(tick.symbol);
    if (outcome === 'too-late') this.#o.logger.debug({ upstream, symbol: tick.symbol, timeMs: tick.timeMs }, 'a tick past the revision window was dropped');
    this.#emit(upstream, changes, now);
    this.#noteDue(led, state);
  }

  #noteDue(led: Led, state: SymbolBars): void {
    for (const bar of state.bars) if (!bar.f) this.#setDue(bar.t + MINUTE_MS + led.builder.graceMs);
  }

  #setDue(at: number): void {
    if (at >= this.#due) return;
    this.#due = at;
    if (this.#timer === undefined || at >= this.#dueTimerAt) return;
    if (this.#dueTimer !== undefined) clearTimeout(this.#dueTimer);
    this.#dueTimerAt = at;
    this.#dueTimer = setTimeout(() => {
      this.#dueTimer = undefined;
      this.#dueTimerAt = Infinity;
      this.tick();
    }, Math.max(0, at - this.#o.now()) + 1);
    this.#dueTimer.unref();
  }

  #emit(upstream: string, changes: readonly BarChange[], now: number): void {
    for (const { kind, bar } of changes) {
      const key = `${upstream}\n${bar.symbol}`;
      if (kind === 'final') {
        const waiting = this.#pending.get(key);
        if (waiting !== undefined && waiting.timeMs <= bar.timeMs) this.#pending.delete(key);
        this.#finals.push(bar);
        this.#publish(key, bar, now);
      } else if (now - (this.#sentAt.get(key) ?? -Infinity) >= this.#o.updateEveryMs && !this.#pending.has(key)) this.#publish(key, bar, now);
      else this.#pending.set(key, bar);
    }
  }

  #publish(key: string, bar: LiveBar, now: number): void {
    if (!bar.final) this.#sentAt.set(key, now);
    this.#o.broadcast.publish(this.#o.channel, JSON.stringify(bar)).catch(() => undefined);
  }

  /** A bar from the bus (this instance's own included): to this instance's subscribers. */
  #onBar(message: string): void {
    let bar: LiveBar;
    try {
      bar = JSON.parse(message) as LiveBar;
    } catch {
      return;
    }
    if (typeof bar.symbol !== 'string' || typeof bar.timeMs !== 'number') return;
    this.#o.deliver(bar.symbol, wireBar(bar));
  }

  #persist(): Promise<void> {
    const writes: Array<Promise<void>> = [];
    for (const [upstream, led] of this.#led) {
      for (const symbol of led.dirty) {
        const state = led.states.get(symbol);
        if (state === undefined) continue;
        // Kept as long as a bar in it can still change, and a little more for the next leader to read.
        const ttlMs = MINUTE_MS * 2 + led.builder.graceMs + led.builder.revisionWindowMs;
        const written = this.#o.store.set(this.#o.stateKey(upstream, symbol), JSON.stringify(state), ttlMs).catch((err: unknown) => {
          led.dirty.add(symbol);
          this.#o.logger.debug({ err: (err as Error).message, symbol }, 'live bar state not written; the next round tries again');
        });
        writes.push(written);
      }
      led.dirty.clear();
    }
    return Promise.all(writes).then(() => undefined);
  }
}
