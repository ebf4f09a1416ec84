/**
 * Backfill: stored history for a list of symbols, one interval, from a date until now, fetched
 * through the history store (so only what it has not covered is asked of the upstream, within the
 * upstream's budget). Because the store keeps what it fetched and a bar's identity is (symbol,
 * interval, start), a backfill stopped half-way and run again continues where it was, and never
 * stores a bar twice.
 *
 * A job started through the API is a row in the database: any instance answers for it, its runner
 * saves its progress and a heartbeat, and a job whose runner went silent (the instance died) is taken
 * over by the next instance that looks (`resume`, run by the scheduler).
 */
import { inBackground } from '../domain/background-work.js';
import { randomUUID } from 'node:crypto';
import { AppError, HistoryJobNotFoundError, InvalidRequestError } from '../domain/errors.js';
import { parseInstant } from '../domain/instant.js';
import type { HistoryInterval } from '../domain/ports/market-data.js';
import { MAX_JOB_DIVERGENCES, type HistoryJob, type HistoryJobStore, type VerifyResult } from '../domain/ports/history-store.js';
import type { Logger } from '../domain/ports/logger.js';
import type { HistoryStore } from './history-store.js';
import type { HistoryVerify } from './history-verify.js';

/** The most symbols one backfill may name. */
export const MAX_BACKFILL_SYMBOLS = 100;

/** What to backfill, checked. */
export interface BackfillRequest {
  /** Canonical (upper-case), distinct. */
  symbols: string[];
  interval: HistoryInterval;
  sinceMs: number;
}

/** How one symbol went, for a progress display. */
export interface SymbolProgress {
  symbol: string;
  /** 0-based position in the request. */
  index: number;
  /** Bars stored for this symbol by this run. */
  candles: number;
  /** Why it could not be backfilled; absent when it was. */
  error?: string;
}

export interface HistoryBackfillOptions {
  history: HistoryStore;
  /** Runs verify jobs (`POST /api/admin/history/verify`, as `mds history verify`); without it none can start. */
  verify?: Pick<HistoryVerify, 'verify'> | undefined;
  jobs: HistoryJobStore;
  logger: Logger;
  /** This instance, as the owner of the jobs it runs. Default a random id. */
  owner?: string;
  /** How often a running job saves a heartbeat. Default 5 s. */
  heartbeatMs?: number;
  /** A running job whose heartbeat is older than this is taken over. Default 30 s. */
  staleAfterMs?: number;
  now?: () => number;
}

/** Backfill of stored history; see the module comment. */
export class HistoryBackfill {
  readonly #history: HistoryStore;
  readonly #verify: HistoryBackfillOptions['verify'];
  readonly #jobs: HistoryJobStore;
  readonly #logger: Logger;
  readonly #owner: string;
  readonly #heartbeatMs: number;
  readonly #staleAfterMs: number;
  readonly #now: () => number;
  readonly #running = new Set<Promise<void>>();
  #watch: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: HistoryBackfillOptions) {
    this.#history = options.history;
    this.#verify = options.verify;
    this.#jobs = options.jobs;
    this.#logger = options.logger;
    this.#owner = options.owner ?? randomUUID();
    this.#heartbeatMs = options.heartbeatMs ?? 5000;
    this.#staleAfterMs = options.staleAfterMs ?? 30_000;
    this.#now = options.now ?? Date.now;
  }

  /** Checks a request (the contract already bounded its shape); throws `InvalidRequestError` naming each rule broken. */
  check(input: { symbols: readonly string[]; interval?: HistoryInterval; since: string }): BackfillRequest {
    const symbols = input.symbols.map((s) => s.toUpperCase());
    const violations = [];
    if (symbols.length === 0 || symbols.length > MAX_BACKFILL_SYMBOLS) {
      violations.push({ path: 'body.symbols', message: `must list 1 to ${MAX_BACKFILL_SYMBOLS} symbols` });
    }
    const repeated = symbols.find((s, i) => symbols.indexOf(s) !== i);
    if (repeated !== undefined) violations.push({ path: 'body.symbols', message: `must not repeat a symbol ('${repeated}')` });
    const sinceMs = parseInstant(input.since);
    if (sinceMs === undefined) violations.push({ path: 'body.since', message: 'is not a valid date or date-time' });
    else if (sinceMs > this.#now()) violations.push({ path: 'body.since', message: 'must not be in the future' });
    if (violations.length > 0) throw new InvalidRequestError(violations);
    return { symbols, interval: input.interval ?? '1d', sinceMs: sinceMs! };
  }

  /**
   * Fills the store for each symbol in turn, calling `onProgress` after each; resolves to the bars
   * stored and the symbols that failed. Never throws for one symbol's failure.
   */
  async fill(
    request: BackfillRequest,
    onProgress: (progress: SymbolProgress) => void | Promise<void> = () => undefined,
    onStart?: (symbol: string) => void,
  ): Promise<{ candles: number; failures: HistoryJob['failures']; fetchableFromMs: number }> {
    // Asked from further back than the upstream keeps this interval: only the stored bars exist there.
    // (the earliest any of the symbols reaches: every symbol was trimmed at least to there).
    const fetchableFromMs = Math.max(request.sinceMs, Math.min(...request.symbols.map((symbol) => this.#history.oldestFetchableMs(request.interval, symbol))));
    let candles = 0;
    const failures: HistoryJob['failures'] = [];
    for (const [index, symbol] of request.symbols.entries()) {
      if (this.#closed) break;
      onStart?.(symbol);
      const progress: SymbolProgress = { symbol, index, candles: 0 };
      try {
        // Only the store's coverage is wanted: one bar back is enough to tell the read succeeded.
        // Background work: within BACKGROUND_BUDGET_SHARE of each provider's budget, never ahead of a caller.
        const read = await inBackground(() => this.#history.read(symbol, request.interval, { startMs: request.sinceMs, endMs: this.#now() }, 1));
        progress.candles = read.written;
        if (read.info === undefined) progress.error = 'unknown symbol';
        else if (read.failure !== undefined) progress.error = reasonOf(read.failure);
      } catch (err) {
        progress.error = reasonOf(err);
      }
      candles += progress.candles;
      if (progress.error !== undefined) failures.push({ symbol, error: progress.error });
      await onProgress(progress);
    }
    return { candles, failures, fetchableFromMs };
  }

  /** Checks a verify request: as a backfill's, `since` defaulting to a year ago. Throws `InvalidRequestError`. */
  checkVerify(input: { symbols: readonly string[]; interval?: HistoryInterval; since?: string | undefined }): BackfillRequest {
    return this.check({ ...input, since: input.since ?? new Date(this.#now() - 365 * 86_400_000).toISOString() });
  }

  /**
   * Records a job and starts it on this instance; resolves to the job as recorded (state `queued`).
   * `verify` makes it a verify job (compare, and with `repair` fix, the stored bars) instead of a backfill.
   */
  async start(request: BackfillRequest, actor: string, verify?: { repair: boolean }): Promise<HistoryJob> {
    const at = new Date(this.#now());
    const job = await this.#jobs.create({
      id: randomUUID(),
      kind: verify === undefined ? 'backfill' : 'verify',
      ...(verify !== undefined ? { verify: { repair: verify.repair, checked: 0, divergences: [] } } : {}),
      symbols: request.symbols,
      interval: request.interval,
      sinceMs: request.sinceMs,
      state: 'queued',
      doneSymbols: 0,
      candles: 0,
      currentSymbol: null,
      failures: [],
      createdBy: actor,
      createdAt: at,
      updatedAt: at,
    });
    this.#launch(job.id);
    return job;
  }

  /** The job; throws `HistoryJobNotFoundError`. */
  async get(id: string): Promise<HistoryJob> {
    const job = await this.#jobs.get(id);
    if (job === undefined) throw new HistoryJobNotFoundError(id);
    return job;
  }

  /** Takes over queued jobs and those whose runner went silent; resolves to how many this instance took. */
  async resume(): Promise<number> {
    const ids = await this.#jobs.unfinished(new Date(this.#now() - this.#staleAfterMs));
    for (const id of ids) this.#launch(id);
    return ids.length;
  }

  /**
   * Looks for jobs to take over now and every `intervalMs`. Every instance looks (a claim is atomic in
   * the database), so this is a timer of its own rather than a scheduler job under one fleet lock.
   */
  watch(intervalMs: number): void {
    if (this.#watch !== undefined || this.#closed) return;
    const look = () => void this.resume().catch((err: unknown) => this.#logger.warn({ err: reasonOf(err) }, 'could not look for backfill jobs to take over'));
    look();
    this.#watch = setInterval(look, intervalMs);
    this.#watch.unref();
  }

  /** Waits for the jobs this instance runs to stop at their next symbol; they are taken over elsewhere later. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#watch);
    await Promise.all([...this.#running]);
  }

  #launch(id: string): void {
    if (this.#closed) return;
    const run = this.#run(id).catch((err: unknown) => this.#logger.warn({ jobId: id, err: reasonOf(err) }, 'backfill job stopped: another instance takes it over'));
    this.#running.add(run);
    void run.finally(() => this.#running.delete(run));
  }

  async #run(id: string): Promise<void> {
    const at = () => new Date(this.#now());
    if (!(await this.#jobs.claim(id, this.#owner, at(), new Date(this.#now() - this.#staleAfterMs)))) return;
    const job = await this.get(id);
    // Symbols a previous runner finished are done; the store skips what it already holds of the current one.
    const state: { doneSymbols: number; candles: number; failures: HistoryJob['failures']; currentSymbol: string | null; verify?: VerifyResult } = { doneSymbols: job.doneSymbols, candles: job.candles, failures: job.failures, currentSymbol: job.currentSymbol };
    const save = (s: 'running' | 'done') => this.#jobs.update(id, { state: s, ...state }, at());
    const heartbeat = setInterval(() => void save('running').catch(() => undefined), this.#heartbeatMs);
    heartbeat.unref();
    this.#logger.info({ jobId: id, symbols: job.symbols.length, interval: job.interval }, 'backfill job running');
    try {
      const remaining = { symbols: job.symbols.slice(job.doneSymbols), interval: job.interval, sinceMs: job.sinceMs };
      if (job.kind === 'verify') {
        await this.#runVerify(job, remaining.symbols, state, save);
        return;
      }
      await this.fill(
        remaining,
        async (p) => {
          state.doneSymbols++;
          state.candles += p.candles;
          if (p.error !== undefined) state.failures = [...state.failures, { symbol: p.symbol, error: p.error }];
          state.currentSymbol = null;
          await save('running');
        },
        (symbol) => {
          state.currentSymbol = symbol;
        },
      );
      if (state.doneSymbols >= job.symbols.length) {
        await save('done');
        this.#logger.info({ jobId: id, candles: state.candles, failures: state.failures.length }, 'backfill job done');
      }
    } finally {
      clearInterval(heartbeat);
    }
  }
  /** A verify job's symbols in turn (each within the background share of the budgets), its findings saved after each. */
  async #runVerify(job: HistoryJob, symbols: readonly string[], state: { doneSymbols: number; currentSymbol: string | null; failures: HistoryJob['failures']; verify?: VerifyResult }, save: (s: 'running' | 'done') => Promise<void>): Promise<void> {
    const result: VerifyResult = job.verify ?? { repair: false, checked: 0, divergences: [] };
    state.verify = result;
    for (const symbol of symbols) {
      if (this.#closed) return;
      state.currentSymbol = symbol;
      try {
        if (this.#verify === undefined) throw new AppError('VERIFY_UNAVAILABLE', 'verify is not available on this instance');
        const found = await inBackground(() => this.#verify!.verify(symbol, job.interval, { startMs: job.sinceMs, endMs: this.#now() }, result.repair));
        result.checked += found.checked;
        for (const d of found.divergences) if (result.divergences.length < MAX_JOB_DIVERGENCES) result.divergences.push({ symbol, ...d });
        if (found.checked === 0) state.failures = [...state.failures, { symbol, error: 'nothing stored in the window' }];
      } catch (err) {
        state.failures = [...state.failures, { symbol, error: reasonOf(err) }];
      }
      state.doneSymbols++;
      state.currentSymbol = null;
      await save('running');
    }
    await save('done');
    this.#logger.info({ jobId: job.id, checked: result.checked, divergences: result.divergences.length, failures: state.failures.length }, 'verify job done');
  }
}

/** One line for a failure, fit for an operator: our errors' own words, never a stack or an internal message. */
function reasonOf(err: unknown): string {
  if (err instanceof AppError) return err.message;
  return 'unexpected failure (see the log)';
}
