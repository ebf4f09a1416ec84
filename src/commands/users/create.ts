import { Args, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { readPassword } from '../../cli/prompt.js';

export default class UsersCreate extends MdsCommand {
  static override description =
    'Create a user account. The password is asked for on the terminal (twice, not echoed) or read from the first line of standard input, so it stays out of shell history.';

  static override examples = [
    '<%= config.bin %> <%= command.id %> analyst',
    '<%= config.bin %> <%= command.id %> operator --admin',
    "printf '%s\\n' \"$PASSWORD\" | <%= config.bin %> <%= command.id %> robot",
  ];

  static override args = {
    username: Args.string({ description: 'Login name: 1 to 64 letters, digits, dots, dashes or underscores.', required: true }),
  };

  static override flags = {
    admin: Flags.boolean({ description: 'Grant administrator rights.', default: false }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(UsersCreate);
    const { withAccounts } = await import('../../cli/context.js');
    const user = await withAccounts(this, async (accounts) => {
      const password = await readPassword({ confirm: true });
      return accounts.createUser({ username: args.username, password, is_admin: flags.admin });
    });
    this.log(`User '${user.username}' created${user.is_admin ? ' (administrator)' : ''}`);
  }
}
