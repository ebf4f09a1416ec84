import { Args, Errors, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { fail } from '../../cli/fail.js';
import type { openHistory } from '../../cli/open-history.js';
import type { HistoryInterval } from '../../domain/ports/market-data.js';
import { DAY_MS } from '../../domain/durations.js';

const INTERVALS: HistoryInterval[] = ['1m', '5m', '15m', '30m', '1h', '1d', '1wk', '1mo'];

export default class HistoryVerifyCommand extends MdsCommand {
  static override description =
    'Re-read the stored history of symbols from every provider of the chain that serves it and report the stored bars whose close differs by more than QUALITY_DIVERGENCE_BPS; with --repair, replace them by what the providers agree on (the raw bar stays in the data-issue record). Exits 1 when a divergence was found and not repaired.';

  static override examples = ['<%= config.bin %> <%= command.id %> AAPL', '<%= config.bin %> <%= command.id %> AAPL MSFT --since 2020-01-01 --repair'];

  static override strict = false;

  static override args = {
    symbols: Args.string({ description: 'One or more Yahoo-style symbols, up to 100.', required: true }),
  };

  static override flags = {
    interval: Flags.string({ description: 'Bar interval.', options: INTERVALS, default: '1d' }),
    since: Flags.string({ description: 'The first day to verify, ISO 8601 (default: a year ago).' }),
    repair: Flags.boolean({ description: 'Replace the diverging stored bars.', default: false }),
  };

  async run(): Promise<void> {
    const { argv, flags } = await this.parse(HistoryVerifyCommand);
    const [{ SingleBar }, { cliLogger, failure, loadCliConfig }, { parseInstant }, { isSymbol }, { openHistory }] = await Promise.all([
      import('cli-progress'),
      import('../../cli/context.js'),
      import('../../domain/instant.js'),
      import('../../domain/symbols.js'),
      import('../../cli/open-history.js'),
    ]);
    const symbols = [...new Set((argv as string[]).map((s) => s.toUpperCase()))];
    const bad = symbols.find((s) => !isSymbol(s));
    if (bad !== undefined || symbols.length > 100) fail(this, bad !== undefined ? `Not a symbol: '${bad.slice(0, 40)}'` : 'At most 100 symbols', 2);
    const sinceMs = flags.since === undefined ? Date.now() - 365 * DAY_MS : parseInstant(flags.since);
    if (sinceMs === undefined) fail(this, '--since is not a valid date or date-time', 2);
    const config = loadCliConfig(this);
    let opened: Awaited<ReturnType<typeof openHistory>> | undefined;
    let unrepaired = 0;
    try {
      opened = await openHistory(config, cliLogger(this, config));
      const bar = process.stdout.isTTY ? new SingleBar({ format: '{bar} {value}/{total} symbols | {symbol}', hideCursor: true }) : undefined;
      bar?.start(symbols.length, 0, { symbol: symbols[0] });
      const lines: string[] = [];
      for (const [i, symbol] of symbols.entries()) {
        bar?.update(i, { symbol });
        const result = await opened.verify.verify(symbol, flags.interval as HistoryInterval, { startMs: sinceMs!, endMs: Date.now() }, flags.repair);
        for (const d of result.divergences) {
          const others = Object.entries(d.fetched).map(([p, c]) => `${p} ${c}`).join(', ');
          lines.push(`${symbol} ${new Date(d.timeMs).toISOString()}: stored close ${d.stored}, ${others}${d.repaired ? ' (repaired)' : ''}`);
          if (!d.repaired) unrepaired++;
        }
        lines.push(`${symbol}: ${result.checked} bars checked against ${result.providers.join(', ') || 'no provider'}, ${result.divergences.length} diverge`);
        if (!bar) while (lines.length > 0) this.log(lines.shift()!);
      }
      bar?.update(symbols.length, { symbol: 'done' });
      bar?.stop();
      for (const line of lines) this.log(line);
    } catch (err) {
      if (err instanceof Errors.ExitError) throw err;
      fail(this, failure(err), 1);
    } finally {
      await opened?.close().catch(() => undefined);
    }
    if (unrepaired > 0) this.exit(1);
  }
}
