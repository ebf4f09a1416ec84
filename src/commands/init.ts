import { MdsCommand } from '../cli/command.js';

export default class Init extends MdsCommand {
  static override description =
    'Create the user table (run the database migrations) and the default administrator from DEFAULT_ADMIN_USERNAME / DEFAULT_ADMIN_PASSWORD. Safe to run again.';

  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    'DATABASE_URL=postgres://mds:secret@127.0.0.1:5432/mds <%= config.bin %> <%= command.id %>',
    'DEFAULT_ADMIN_USERNAME=root DEFAULT_ADMIN_PASSWORD=a-long-passphrase <%= config.bin %> <%= command.id %>',
  ];

  async run(): Promise<void> {
    await this.parse(Init);
    const { withAccounts } = await import('../cli/context.js');
    // Progress for a person at a terminal; piped output stays the two lines scripts read.
    if (process.stderr.isTTY) process.stderr.write('Running database migrations and checking the default administrator...\n');
    await withAccounts(this, async (accounts, config) => {
      const outcome = await accounts.ensureDefaultAdmin();
      const name = config.auth.defaultAdmin.username;
      this.log(outcome === 'created' ? `Default administrator '${name}' created` : `Default administrator '${name}' already exists`);
    });
    this.log('init done');
  }
}
