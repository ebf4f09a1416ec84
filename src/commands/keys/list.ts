import { Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';

export default class KeysList extends MdsCommand {
  static override description = 'List managed API keys, newest first, without their secrets (the same as GET /api/admin/api-keys).';

  static override examples = ['<%= config.bin %> <%= command.id %>', '<%= config.bin %> <%= command.id %> --json'];

  static override flags = {
    json: Flags.boolean({ description: 'Print the list as JSON, as the API answers it: `{success, data}`.' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(KeysList);
    const { withKeys } = await import('../../cli/context.js');
    const keys = await withKeys(this, (service) => service.list());
    if (flags.json) {
      this.log(JSON.stringify({ success: true, data: keys }, null, 2));
      return;
    }
    const rows = [
      ['ID', 'NAME', 'ROLE', 'RATE/MIN', 'EXPIRES', 'LAST USED', 'CREATED BY'],
      ...keys.map((k) => [k.id, k.name, k.role, k.rate_limit_per_minute?.toString() ?? '-', k.expires_at ?? 'never', k.last_used_at ?? 'never', k.created_by]),
    ];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const row of rows) this.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
  }
}
