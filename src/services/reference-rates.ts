/**
 * The ECB's reference rates for currency conversion (DESIGN 25), read through the database: the
 * historical file once, when nothing is stored, then the daily file after each publication (the
 * 90-day file, or the historical one again, when more than a day is missing). A refresh that fails
 * keeps serving what is stored; with nothing stored, conversions are refused with a 503.
 */
import { isWeekend, parseIsoDate } from '../domain/civil-date.js';
import { lastPublishedDay, RateTable, type RateDay } from '../domain/currencies.js';
import { DataSourceError } from '../domain/errors.js';
import type { FxRateStore, ReferenceRateSource } from '../domain/ports/fx-rates.js';
import type { Logger } from '../domain/ports/logger.js';

/** The rates' source, as stored and as answers name it. */
export const RATE_SOURCE = 'ecb';
/** The 90-day file holds about 62 business days: a gap within 85 days is filled from it. */
const RECENT_REACH_DAYS = 85;
/** How long after a failed or fruitless look for new rates the next one waits. */
const REFRESH_EVERY_MS = 15 * 60_000;
/** The Retry-After of a conversion refused for want of any rate. */
const RETRY_AFTER_SECONDS = 60;

export interface ReferenceRatesParts {
  store: FxRateStore;
  source: ReferenceRateSource;
  logger?: Logger | undefined;
  now?: (() => number) | undefined;
  /** See `REFRESH_EVERY_MS`. */
  refreshEveryMs?: number | undefined;
}

export class ReferenceRates {
  readonly #store: FxRateStore;
  readonly #source: ReferenceRateSource;
  readonly #logger: Logger | undefined;
  readonly #now: () => number;
  readonly #refreshEveryMs: number;
  #days: RateDay[] | undefined;
  #table = new RateTable([]);
  #lastLookMs = -Infinity;
  #pending: Promise<RateTable> | undefined;
  /** With nothing stored, the last failure to fetch the history, answered again until it is RETRY_AFTER_SECONDS old. */
  #failure: { atMs: number; error: DataSourceError } | undefined;

  constructor(parts: ReferenceRatesParts) {
    this.#store = parts.store;
    this.#source = parts.source;
    this.#logger = parts.logger;
    this.#now = parts.now ?? Date.now;
    this.#refreshEveryMs = parts.refreshEveryMs ?? REFRESH_EVERY_MS;
  }

  /**
   * The rates, with the latest publication when it is due and can be had. Throws `DataSourceError`
   * (503 with Retry-After) when none is stored and the ECB cannot be reached.
   */
  table(): Promise<RateTable> {
    const now = this.#now();
    const last = this.#table.lastDay;
    const current = last !== undefined && last >= lastPublishedDay(now);
    if (this.#days !== undefined && (current || (last !== undefined && now - this.#lastLookMs < this.#refreshEveryMs))) return Promise.resolve(this.#table);
    // Nothing stored and the ECB just failed: callers are refused at once rather than each waiting for a timeout.
    if (this.#failure !== undefined && now - this.#failure.atMs < RETRY_AFTER_SECONDS * 1000) return Promise.reject(this.#failure.error);
    if (this.#pending === undefined) {
      this.#pending = this.#update().finally(() => {
        this.#pending = undefined;
      });
    }
    return this.#pending;
  }

  async #update(): Promise<RateTable> {
    if (this.#days === undefined) {
      this.#days = await this.#store.read(RATE_SOURCE);
      this.#table = new RateTable(this.#days);
      if (this.#table.lastDay !== undefined && this.#table.lastDay >= lastPublishedDay(this.#now())) return this.#table;
    }
    this.#lastLookMs = this.#now();
    try {
      const added = await this.#fetchNew();
      this.#failure = undefined;
      if (added.length > 0) {
        await this.#store.write(RATE_SOURCE, added);
        this.#days = [...this.#days, ...added];
        this.#table = new RateTable(this.#days);
      }
    } catch (err) {
      if (this.#table.size === 0) {
        const error = new DataSourceError(`The ECB's reference rates could not be fetched and none are stored, so nothing can be converted: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
          retryAfterSeconds: RETRY_AFTER_SECONDS,
        });
        this.#failure = { atMs: this.#now(), error };
        this.#logger?.warn({ err }, 'reference rates: none stored and the ECB could not be reached; conversions answer 503');
        throw error;
      }
      this.#logger?.warn({ err, last: this.#table.lastDay }, 'reference rates: could not fetch the latest; converting with the stored ones');
    }
    return this.#table;
  }

  /** The published days after the last stored one, from the smallest file that holds them all. */
  async #fetchNew(): Promise<RateDay[]> {
    const last = this.#table.lastDay;
    if (last === undefined) return this.#source.history();
    const after = (days: readonly RateDay[]) => days.filter((d) => (parseIsoDate(d.date) ?? -Infinity) > last);
    const latest = after(await this.#source.latest());
    const newest = latest.reduce((max, d) => Math.max(max, parseIsoDate(d.date) ?? -Infinity), -Infinity);
    if (latest.length === 0) return [];
    let skipped = false;
    for (let day = last + 1; day < newest; day++) if (!isWeekend(day)) skipped = true;
    if (!skipped) return latest;
    return after(newest - last <= RECENT_REACH_DAYS ? await this.#source.recent() : await this.#source.history());
  }
}
