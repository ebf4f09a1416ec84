/**
 * Quotes: one symbol, a batch, the configured indices, and their refresh ahead of expiry. Every quote
 * is one cached entry per symbol; batches and the indices are assembled from those entries' JSON.
 */
import { AppError, DataSourceError, SymbolNotServedError, UnknownSymbolError } from '../../domain/errors.js';
import { convertibleFrom, convertQuote, lastPublishedDay, needsConversion, publishedAtMs, targetCurrency, unitOf, type LiveRate } from '../../domain/currencies.js';
import { RATE_SOURCE } from '../reference-rates.js';
import type { Quote } from '../../domain/ports/market-data.js';
import { canonical, canonicalSymbol, parseSymbolList } from '../../domain/symbols.js';
import type { CachedRepresentation, CacheRead, Loaded, ReadOutcome } from '../cache/cache-types.js';
import { REMEMBERED_UNKNOWN, UNKNOWN, type MarketDataContext } from './context.js';
import { DEGRADED_INDICES_TTL_MS, quoteLifetime, type QuoteLifetimes } from './lifetimes.js';
import { decodeQuote, writeQuoteBody } from './quote-body.js';

/** The quote reads of the market data service. */
export class Quotes {
  readonly #ctx: MarketDataContext;
  readonly #indices: readonly string[];
  readonly #lifetimes: QuoteLifetimes;

  constructor(ctx: MarketDataContext, indices: readonly string[], lifetimes: QuoteLifetimes) {
    this.#ctx = ctx;
    this.#indices = indices.map(canonical);
    this.#lifetimes = lifetimes;
  }

  /**
   * The configured indices. Symbols the provider does not know or cannot deliver now are left out;
   * throws `DataSourceError` when none can be had.
   */
  async getIndices(): Promise<CachedRepresentation> {
    const rep = await this.#ctx.engine.read(this.#indicesRead());
    if (rep.outcome !== 'found') throw new DataSourceError('No configured index is known to the provider');
    return rep;
  }

  /**
   * One quote, in `currency` when given (see `#convertedRead`). Throws `UnknownSymbolError` (404),
   * `InvalidRequestError` (422) for a currency that cannot be converted, or `DataSourceError` (503).
   */
  async getQuote(symbol: string, currency?: string): Promise<CachedRepresentation> {
    const canonical = canonicalSymbol(symbol, 'path.symbol');
    const to = currency === undefined ? undefined : targetCurrency(currency);
    const rep = await this.#ctx.engine.read(to === undefined ? this.#quoteRead(canonical) : this.#convertedRead(canonical, to));
    if (rep.outcome !== 'found') throw new UnknownSymbolError([canonical]);
    return rep;
  }

  /**
   * Quotes of 1 to 50 distinct symbols (comma-separated), in request order, unknown ones under
   * `missing`. Throws `UnknownSymbolError` when none is known, `InvalidRequestError` for a repeated
   * symbol or more than 50, `DataSourceError` when the upstream fails for any of them.
   */
  async getQuotes(symbolList: string, currency?: string): Promise<CachedRepresentation> {
    const symbols = parseSymbolList(symbolList, 'query.symbols');
    const to = currency === undefined ? undefined : targetCurrency(currency);
    const rep = await this.#ctx.engine.read({
      kind: 'quotes',
      params: `${symbols.join(',')}${to === undefined ? '' : `:in=${to}`}`,
      load: () => this.#loadBatch(symbols, to === undefined ? (s) => this.#quoteRead(s) : (s) => this.#convertedRead(s, to)),
      // A batch of symbols all remembered as unknown is answered without a round trip to the store.
      remembered: () => (symbols.every((symbol) => this.#ctx.remembered(`quote:${symbol}`) !== undefined) ? REMEMBERED_UNKNOWN : undefined),
    });
    if (rep.outcome !== 'found') throw new UnknownSymbolError(symbols);
    return rep;
  }

  /**
   * The current quote object of one canonical symbol, through the cache (the stream's first event).
   * `undefined` for an unknown symbol.
   */
  async quoteOf(symbol: string): Promise<Quote | undefined> {
    const rep = await this.#ctx.engine.read(this.#quoteRead(symbol));
    return rep.outcome === 'found' ? decodeQuote(rep).quote : undefined;
  }

  /**
   * Refreshes the configured indices ahead of expiry, for the scheduler: each quote whose cached
   * entry expires within `horizonMs` is loaded again, then the indices are assembled anew.
   * Resolves to 'skipped' when another instance holds the indices' lock.
   */
  async refreshIndices(horizonMs: number): Promise<'ok' | 'skipped'> {
    await Promise.all(this.#indices.map((symbol) => this.refreshQuote(symbol, horizonMs).catch(() => 'failed' as const)));
    return this.#ctx.engine.refresh(this.#indicesRead());
  }

  /**
   * Loads a quote again, so readers keep hitting fresh prices: always while its market may move
   * (open, pre, post), and while it is closed (or unknown) only when the entry expires within
   * `horizonMs`. Resolves to 'ok' when it loaded, 'skipped' when the entry needed nothing or another
   * instance is loading it. Throws `DataSourceError`.
   */
  async refreshQuote(symbol: string, horizonMs: number): Promise<'ok' | 'skipped'> {
    const read = this.#quoteRead(symbol);
    const rep = await this.#ctx.engine.read(read);
    if (rep.cacheStatus === 'MISS') return 'ok';
    // An unknown symbol is remembered in its own memory, with nothing to refresh.
    if (rep.outcome !== 'found') return 'skipped';
    const moving = decodeQuote(rep).quote.market_state !== 'closed';
    if (!moving && rep.ttlMs > horizonMs) return 'skipped';
    return this.#ctx.engine.refresh(read);
  }

  #indicesRead(): CacheRead {
    return { kind: 'indices', params: 'configured', load: () => this.#loadIndices() };
  }

  #quoteRead(symbol: string): CacheRead {
    const ctx = this.#ctx;
    return {
      kind: 'quote',
      params: symbol,
      load: async () => {
        const member = `quote:${symbol}`;
        if (await ctx.unknown?.has(member)) return REMEMBERED_UNKNOWN;
        const quote = await ctx.provider.getQuote(symbol);
        if (quote === undefined) {
          await ctx.unknown?.remember(member);
          return UNKNOWN;
        }
        const { value, parts } = writeQuoteBody(quote, ctx.sourceOf(quote), ctx.iso());
        return { outcome: 'found', value, parts, ttlMs: quoteLifetime(quote, this.#lifetimes, ctx.now()) };
      },
      remembered: () => ctx.remembered(`quote:${symbol}`),
    };
  }

  /**
   * The quote of `symbol` in `to`, cached on its own: the quote as cached, converted at the live rate
   * of the chain's FX quote (`USDEUR=X`, else the inverse pair `EURUSD=X`), else at the ECB's latest
   * reference rate. A quote already in `to` is the quote itself, with no `fx` block. It lives as long
   * as the shorter of the quote's and the rate's entries.
   */
  #convertedRead(symbol: string, to: string): CacheRead {
    const ctx = this.#ctx;
    return {
      kind: 'quote_in',
      params: `${symbol}:${to}`,
      load: async () => {
        const base = await ctx.engine.read(this.#quoteRead(symbol));
        if (base.outcome !== 'found') return { outcome: 'unknown', fetched: base.cacheStatus !== 'HIT' };
        const decoded = decodeQuote(base);
        if (!needsConversion(decoded.quote.currency, to)) return { outcome: 'found', sent: { body: base.body, etag: base.etag }, parts: base.parts, ttlMs: base.ttlMs };
        convertibleFrom(decoded.quote.currency, symbol);
        const live = await this.#liveRate(unitOf(decoded.quote.currency).code, to);
        const { value, parts } = writeQuoteBody(convertQuote(decoded.quote, to, live), decoded.source, decoded.updatedAt);
        return { outcome: 'found', value, parts, ttlMs: Math.min(base.ttlMs, live.ttlMs) };
      },
      remembered: () => ctx.remembered(`quote:${symbol}`),
    };
  }

  /** Units of `to` per `from` now: the chain's FX quote of the pair (or its inverse), else the ECB's latest reference rate. */
  async #liveRate(from: string, to: string): Promise<LiveRate & { ttlMs: number }> {
    if (from === to) return { rate: 1, source: RATE_SOURCE, timeMs: this.#ctx.now(), ttlMs: Infinity };
    for (const [pair, inverse] of [[`${from}${to}=X`, false], [`${to}${from}=X`, true]] as const) {
      try {
        const rep = await this.#ctx.engine.read(this.#quoteRead(pair));
        if (rep.outcome !== 'found') continue;
        const fx = decodeQuote(rep);
        const price = fx.quote.price;
        if (!(price > 0)) continue;
        return { rate: inverse ? 1 / price : price, source: fx.source, timeMs: Date.parse(fx.quote.timestamp), ttlMs: rep.ttlMs };
      } catch (err) {
        // A pair no provider of the chain serves, or one that failed now: the reference rate stands in.
        if (!(err instanceof AppError)) throw err;
      }
    }
    const table = await this.#ctx.rates.table();
    const found = table.rate(from, to, lastPublishedDay(this.#ctx.now()));
    if (found === undefined) throw new DataSourceError(`No current rate from ${from} to ${to}: no FX quote could be had and the latest reference rate is more than 4 days old`, { retryAfterSeconds: 60 });
    return { rate: found.rate, source: RATE_SOURCE, timeMs: publishedAtMs(found.day), ttlMs: this.#lifetimes.quoteTtlMs };
  }

  /**
   * Component quotes go through the cache, so batches, single reads and the stream share one entry
   * per symbol. The batch body is assembled from the components' serialized quotes, as cached: no
   * quote is parsed and serialized again.
   */
  async #loadBatch(symbols: readonly string[], readOf: (symbol: string) => CacheRead): Promise<Loaded> {
    // A symbol no configured provider serves is left out like an unknown one, but is never remembered as unknown.
    let notServed: SymbolNotServedError | undefined;
    const parts = await Promise.all(
      symbols.map(async (symbol) => {
        try {
          return { symbol, rep: await this.#ctx.engine.read(readOf(symbol)) };
        } catch (err) {
          if (!(err instanceof SymbolNotServedError)) throw err;
          notServed ??= err;
          return { symbol, rep: { outcome: 'unknown', cacheStatus: 'MISS' } as const };
        }
      }),
    );
    const data: string[] = [];
    // A batch may mix providers (each quote names its own then): the response names the first's.
    let source: string | undefined;
    const missing: string[] = [];
    let oldest: string | undefined;
    let ttlMs = Infinity;
    let stale = false;
    for (const { symbol, rep } of parts) {
      if (rep.outcome !== 'found') {
        missing.push(symbol);
        continue;
      }
      ttlMs = Math.min(ttlMs, rep.ttlMs);
      stale ||= rep.cacheStatus === 'STALE';
      const decoded = decodeQuote(rep);
      data.push(decoded.json);
      source ??= decoded.source;
      if (oldest === undefined || decoded.updatedAt < oldest) oldest = decoded.updatedAt;
    }
    // Answered as a HIT when no part had to be fetched.
    const fetched = parts.some(({ rep }) => rep.cacheStatus !== 'HIT');
    if (data.length === 0 && notServed !== undefined) throw notServed;
    if (data.length === 0) return { outcome: 'unknown', fetched };
    const value = `{"success":true,"data":[${data.join(',')}],"missing":${JSON.stringify(missing)},"source":${JSON.stringify(source ?? this.#ctx.source)},"updated_at":${JSON.stringify(oldest ?? this.#ctx.iso())}}`;
    return { outcome: 'found', value, ttlMs, stale, fetched };
  }

  /**
   * The configured indices from their component quotes. A symbol that fails upstream is left out
   * and the answer lives at most 5 s, so it comes back soon; when none can be had the failure is
   * the answer.
   */
  async #loadIndices(): Promise<Loaded> {
    const outcomes = await Promise.allSettled(this.#indices.map((symbol) => this.#ctx.engine.read(this.#quoteRead(symbol))));
    const data: string[] = [];
    // A batch may mix providers (each quote names its own then): the response names the first's.
    let source: string | undefined;
    let ttlMs = this.#lifetimes.quoteTtlMs;
    let failure: unknown;
    let stale = false;
    for (const outcome of outcomes) {
      // An index no configured provider serves is left out; it is no failure of the upstream.
      if (outcome.status === 'rejected' && outcome.reason instanceof SymbolNotServedError) continue;
      if (outcome.status === 'rejected') {
        failure ??= outcome.reason;
        continue;
      }
      const rep: ReadOutcome = outcome.value;
      if (rep.outcome !== 'found') continue;
      stale ||= rep.cacheStatus === 'STALE';
      ttlMs = Math.min(ttlMs, rep.ttlMs);
      const decoded = decodeQuote(rep);
      data.push(decoded.json);
      source ??= decoded.source;
    }
    if (data.length === 0) {
      if (failure !== undefined) throw failure;
      throw new DataSourceError('No configured index is known to the provider');
    }
    if (failure !== undefined) ttlMs = Math.min(ttlMs, DEGRADED_INDICES_TTL_MS);
    const value = `{"success":true,"data":[${data.join(',')}],"source":${JSON.stringify(source ?? this.#ctx.source)},"updated_at":${JSON.stringify(this.#ctx.iso())}}`;
    const fetched = outcomes.some((outcome) => (outcome.status === 'rejected' ? !(outcome.reason instanceof SymbolNotServedError) : outcome.value.cacheStatus !== 'HIT'));
    return { outcome: 'found', value, ttlMs, stale, fetched };
  }
}
