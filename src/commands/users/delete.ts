import { Args } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';

export default class UsersDelete extends MdsCommand {
  static override description = 'Delete a user account. The last administrator cannot be deleted.';

  static override examples = ['<%= config.bin %> <%= command.id %> analyst'];

  static override args = {
    username: Args.string({ description: 'The login name to delete.', required: true }),
  };

  async run(): Promise<void> {
    const { args } = await this.parse(UsersDelete);
    const { withAccounts } = await import('../../cli/context.js');
    await withAccounts(this, (accounts) => accounts.deleteUser(args.username));
    this.log(`User '${args.username}' deleted`);
  }
}
