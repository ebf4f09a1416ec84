import { Errors } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { fail } from '../../cli/fail.js';

export default class HistoryPruneCommand extends MdsCommand {
  static override description =
    'Remove the stored bars older than their interval\'s HISTORY_KEEP_<INTERVAL> (default: 1m 2y, 5m 10y, the rest forever) now, with the covered spans they made, in small batches: what the service does once an hour. Safe while the service runs.';

  static override examples = ['<%= config.bin %> <%= command.id %>', 'HISTORY_KEEP_1M=90d <%= config.bin %> <%= command.id %>'];

  async run(): Promise<void> {
    await this.parse(HistoryPruneCommand);
    const [{ cliLogger, failure, loadCliConfig }, { pruneStoredHistory }, { describeKeep, keepVariable, KEPT_INTERVALS }] = await Promise.all([
      import('../../cli/context.js'),
      import('../../cli/open-history.js'),
      import('../../domain/retention.js'),
    ]);
    const config = loadCliConfig(this);
    try {
      const { results } = await pruneStoredHistory(config, cliLogger(this, config));
      for (const interval of KEPT_INTERVALS) {
        const keepMs = config.retention[interval];
        const result = results.find((r) => r.interval === interval);
        const setting = `${keepVariable(interval)}=${describeKeep(keepMs)}`;
        if (result === undefined) this.log(`${interval}: kept forever (${setting})`);
        else this.log(`${interval}: ${result.candles} bars before ${new Date(result.beforeMs).toISOString()} removed (${setting})`);
      }
    } catch (err) {
      if (err instanceof Errors.ExitError) throw err;
      fail(this, failure(err), 1);
    }
  }
}
