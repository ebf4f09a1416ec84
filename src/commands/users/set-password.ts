import { Args } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { readPassword } from '../../cli/prompt.js';

export default class UsersSetPassword extends MdsCommand {
  static override description =
    "Set a user's password (every token issued before stops working). Asked on the terminal or read from the first line of standard input.";

  static override examples = ['<%= config.bin %> <%= command.id %> admin', "printf '%s\\n' \"$NEW_PASSWORD\" | <%= config.bin %> <%= command.id %> admin"];

  static override args = {
    username: Args.string({ description: 'The login name.', required: true }),
  };

  async run(): Promise<void> {
    const { args } = await this.parse(UsersSetPassword);
    const { withAccounts } = await import('../../cli/context.js');
    await withAccounts(this, async (accounts) => {
      const password = await readPassword({ confirm: true });
      await accounts.setPassword(args.username, password);
    });
    this.log(`Password of '${args.username}' changed`);
  }
}
