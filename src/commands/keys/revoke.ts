import { Args } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';

export default class KeysRevoke extends MdsCommand {
  static override description =
    'Revoke a managed API key (the same as DELETE /api/admin/api-keys/{id}). Running instances refuse it within a second.';

  static override examples = ['<%= config.bin %> <%= command.id %> 3f0c8a52-9b1e-4c47-8d2a-1f6e0b7c9a01'];

  static override args = {
    id: Args.string({ description: 'The id of the key, as `mds keys list` shows it.', required: true }),
  };

  async run(): Promise<void> {
    const { args } = await this.parse(KeysRevoke);
    const [{ withKeys }, { CLI_CONTEXT }] = await Promise.all([import('../../cli/context.js'), import('../../services/accounts.js')]);
    await withKeys(this, (keys) => keys.revoke(args.id, CLI_CONTEXT));
    this.log(`API key '${args.id}' revoked`);
  }
}
