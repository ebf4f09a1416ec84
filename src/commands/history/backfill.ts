import { Args, Errors, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import type { openHistory } from '../../cli/open-history.js';
import type { HistoryInterval } from '../../domain/ports/market-data.js';

const INTERVALS: HistoryInterval[] = ['1m', '5m', '15m', '30m', '1h', '1d', '1wk', '1mo'];

export default class HistoryBackfillCommand extends MdsCommand {
  static override description =
    'Store the history of symbols from a date until now (the same as POST /api/admin/history/backfill, run in this process). Only what the store lacks is fetched, so running it again after an interruption continues where it stopped. Exits 1 when a symbol could not be backfilled.';

  static override examples = [
    '<%= config.bin %> <%= command.id %> AAPL ^GSPC --since 2000-01-01',
    '<%= config.bin %> <%= command.id %> BTC-USD --interval 1h --since 2026-10-01',
  ];

  static override strict = false;

  static override args = {
    symbols: Args.string({ description: 'One or more Yahoo-style symbols (AAPL ^GSPC BTC-USD EURUSD=X), up to 100.', required: true }),
  };

  static override flags = {
    interval: Flags.string({ description: 'Bar interval.', options: INTERVALS, default: '1d' }),
    since: Flags.string({ description: 'The first day to store, ISO 8601 (2000-01-01 or a date-time).', required: true }),
  };

  async run(): Promise<void> {
    const { argv, flags } = await this.parse(HistoryBackfillCommand);
    const [{ SingleBar }, { cliLogger, fail, failure, invalidInputLine, loadCliConfig }, { InvalidRequestError }, { openHistory }] = await Promise.all([
      import('cli-progress'),
      import('../../cli/context.js'),
      import('../../domain/errors.js'),
      import('../../cli/open-history.js'),
    ]);
    const config = loadCliConfig(this);
    let opened: Awaited<ReturnType<typeof openHistory>> | undefined;
    let failed = 0;
    try {
      opened = await openHistory(config, cliLogger(this, config));
      const { backfill } = opened;
      let request;
      try {
        request = backfill.check({ symbols: argv as string[], interval: flags.interval as HistoryInterval, since: flags.since });
      } catch (err) {
        if (err instanceof InvalidRequestError) fail(this, invalidInputLine(this, err), 2);
        throw err;
      }
      // A bar on a terminal; a line a symbol when the output is a file or a pipe.
      const bar = process.stdout.isTTY ? new SingleBar({ format: '{bar} {value}/{total} symbols | {symbol} | {candles} bars stored', hideCursor: true }) : undefined;
      let candles = 0;
      bar?.start(request.symbols.length, 0, { symbol: request.symbols[0], candles });
      const result = await backfill.fill(
        request,
        (p) => {
          candles += p.candles;
          if (bar) bar.update(p.index + 1, { symbol: p.error === undefined ? p.symbol : `${p.symbol} failed: ${p.error}`, candles });
          else this.log(p.error === undefined ? `${p.symbol}: ${p.candles} bars stored` : `${p.symbol}: failed: ${p.error}`);
        },
        (symbol) => bar?.update({ symbol }),
      );
      bar?.stop();
      failed = result.failures.length;
      for (const f of bar ? result.failures : []) this.log(`${f.symbol}: failed: ${f.error}`);
      const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
      this.log(`backfill done: ${result.candles} bars stored for ${request.symbols.length - failed} of ${request.symbols.length} symbols (${request.interval} since ${day(result.fetchableFromMs)})`);
      if (result.fetchableFromMs > request.sinceMs) {
        this.log(
          `note: ${request.interval} bars reach back to ${day(result.fetchableFromMs)} upstream, so nothing before it was fetched (asked since ${day(request.sinceMs)}); ` +
            'bars stored earlier stay, and a daily interval reaches further',
        );
      }
    } catch (err) {
      // `fail` ends the command by throwing oclif's exit: let it through.
      if (err instanceof Errors.ExitError) throw err;
      fail(this, failure(err), 1);
    } finally {
      await opened?.close().catch(() => undefined);
    }
    if (failed > 0) this.exit(1);
  }
}
