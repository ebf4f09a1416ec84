import { Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';

export default class UsersList extends MdsCommand {
  static override description = 'List user accounts (the same as GET /api/admin/users).';

  static override examples = ['<%= config.bin %> <%= command.id %>', '<%= config.bin %> <%= command.id %> --json'];

  static override flags = {
    json: Flags.boolean({ description: 'Print the list as JSON, as the API answers it: `{success, data}`.' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(UsersList);
    const { withAccounts } = await import('../../cli/context.js');
    const users = await withAccounts(this, (accounts) => accounts.listUsers());
    if (flags.json) {
      this.log(JSON.stringify({ success: true, data: users }, null, 2));
      return;
    }
    const width = Math.max(8, ...users.map((u) => u.username.length));
    this.log(`${'USERNAME'.padEnd(width)}  ADMIN  CREATED`);
    for (const u of users) this.log(`${u.username.padEnd(width)}  ${(u.is_admin ? 'yes' : 'no').padEnd(5)}  ${u.created_at}`);
  }
}
