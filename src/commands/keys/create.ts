import { Args, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { RATE_LIMIT_MAX_PER_MINUTE } from '../../services/api-keys.js';

export default class KeysCreate extends MdsCommand {
  static override description =
    'Create a managed API key (the same as POST /api/admin/api-keys). The key is printed once, on its own line; only its SHA-256 digest is stored, so copy it now. Clients send it as X-API-Key.';

  static override examples = [
    '<%= config.bin %> <%= command.id %> dashboard',
    '<%= config.bin %> <%= command.id %> deploy-bot --role admin --expires-at 2027-01-01T00:00:00Z',
    '<%= config.bin %> <%= command.id %> partner-feed --rate-limit 600 --json',
  ];

  static override args = {
    name: Args.string({ description: 'A label for the key holder: 1 to 64 letters, digits, dots, dashes or underscores.', required: true }),
  };

  static override flags = {
    role: Flags.string({ description: '`read` calls the data endpoints (403 on admin endpoints); `admin` is an administrator.', options: ['read', 'admin'], default: 'read' }),
    'rate-limit': Flags.integer({ description: "The key's own requests per minute (default: RATE_LIMIT_AUTHENTICATED_PER_MINUTE).", min: 1, max: RATE_LIMIT_MAX_PER_MINUTE }),
    'expires-at': Flags.string({ description: 'When the key stops working, ISO 8601 (e.g. 2027-01-01T00:00:00Z); default never.' }),
    json: Flags.boolean({ description: 'Print the created key as JSON, as the API answers it: `{success, data}`, the key at `data.key`.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(KeysCreate);
    const [{ withKeys }, { CLI_CONTEXT }] = await Promise.all([import('../../cli/context.js'), import('../../services/accounts.js')]);
    const created = await withKeys(this, (keys) =>
      keys.create(
        {
          name: args.name,
          role: flags.role as 'read' | 'admin',
          ...(flags['rate-limit'] === undefined ? {} : { rate_limit_per_minute: flags['rate-limit'] }),
          ...(flags['expires-at'] === undefined ? {} : { expires_at: flags['expires-at'] }),
        },
        CLI_CONTEXT,
      ),
      { rate_limit_per_minute: '--rate-limit' },
    );
    if (flags.json) {
      this.log(JSON.stringify({ success: true, data: created }, null, 2));
      return;
    }
    this.log(`API key '${created.name}' created (id ${created.id}, role ${created.role}${created.expires_at ? `, expires ${created.expires_at}` : ''})`);
    this.log(created.key);
    this.log('Copy the key now: it is not stored and cannot be shown again.');
  }
}
