/**
 * The reference-rate ports (DESIGN 25): where the ECB's euro reference rates are kept, and where they
 * come from. Adapters in `src/infra` implement them and translate their technology's errors into the
 * errors of `domain/errors.ts` at their own boundary.
 */

/** One business day of reference rates: units of each currency per euro, as published. */
export interface RateDay {
  /** `YYYY-MM-DD`. */
  date: string;
  rates: ReadonlyMap<string, number>;
}

/**
 * Reference rates kept in the database, one row per (source, currency, day), so the full history is
 * fetched once. Every method throws an `AppError` (`DATABASE_ERROR`, `DATABASE_NOT_INITIALIZED`) when
 * the database fails.
 */
export interface FxRateStore {
  /** Every stored day of `source`, oldest first; `[]` when none is stored. */
  read(source: string): Promise<RateDay[]>;
  /** Stores `days` of `source`; a day already stored is replaced currency by currency. */
  write(source: string, days: readonly RateDay[]): Promise<void>;
}

/**
 * The publisher's files. Each resolves to the days it holds, oldest first, rates as published (units
 * of currency per euro), and throws `UpstreamFailureError` when the publisher cannot be reached or
 * its file does not parse.
 */
export interface ReferenceRateSource {
  /** Every published day since the first (1999-01-04): ECB's historical file. */
  history(): Promise<RateDay[]>;
  /** About the last 90 days. */
  recent(): Promise<RateDay[]>;
  /** The latest published day. */
  latest(): Promise<RateDay[]>;
}
