import { Errors, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { fail } from '../../cli/fail.js';

export default class HistoryPurgeCommand extends MdsCommand {
  static override description =
    "Remove every stored bar (and covered span) one provider gave, so the store fetches those spans again from the configured chain: after the demo, `--provider simulated` removes the simulated bars for good.";

  static override examples = ['<%= config.bin %> <%= command.id %> --provider simulated'];

  static override flags = {
    provider: Flags.string({ description: 'The provider whose bars go (simulated, yahoo, polygon, ..., or live:yahoo for the bars built from a push stream).', required: true }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(HistoryPurgeCommand);
    if (!/^(live:)?[a-z0-9_]{1,27}$/.test(flags.provider)) fail(this, `Not a provider name: '${flags.provider.slice(0, 40)}'`, 2);
    const [{ failure, loadCliConfig }, { purgeProviderBars }] = await Promise.all([import('../../cli/context.js'), import('../../cli/open-history.js')]);
    const config = loadCliConfig(this);
    try {
      const { removed } = await purgeProviderBars(config, flags.provider);
      this.log(`purged ${removed} bars of ${flags.provider}`);
    } catch (err) {
      if (err instanceof Errors.ExitError) throw err;
      fail(this, failure(err), 1);
    }
  }
}
