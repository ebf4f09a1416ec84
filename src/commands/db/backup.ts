import { Args, Errors, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { fail } from '../../cli/fail.js';

export default class DbBackupCommand extends MdsCommand {
  static override description =
    'Write a consistent copy of the SQLite database to FILE while the service keeps running (SQLite online backup). For PostgreSQL use pg_dump (see docs/operations.md, "Backups").';

  static override examples = ['<%= config.bin %> <%= command.id %> backups/mds-$(date +%F).sqlite', '<%= config.bin %> <%= command.id %> /var/backups/mds.sqlite --force'];

  static override args = {
    file: Args.string({ description: 'The file to write the copy to.', required: true }),
  };

  static override flags = {
    force: Flags.boolean({ description: 'Replace FILE when it exists.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(DbBackupCommand);
    const { failure, loadCliConfig } = await import('../../cli/context.js');
    const config = loadCliConfig(this);
    const { parseDatabaseUrl } = await import('../../infra/db/data-source.js');
    const { backupSqlite, BackupRefusedError } = await import('../../infra/db/sqlite-backup.js');
    try {
      const target = parseDatabaseUrl(config.database.url);
      if (target.kind === 'postgres') {
        fail(this, 'mds db backup copies SQLite databases; DATABASE_URL is PostgreSQL: back it up with pg_dump --format=custom and restore with pg_restore (see docs/operations.md, "Backups")', 2);
      }
      if (target.path === ':memory:') fail(this, 'DATABASE_URL is an in-memory SQLite database: there is no file to back up', 2);
      const { bytes } = await backupSqlite(target.path, args.file, { force: flags.force });
      this.log(`backed up ${target.path} to ${args.file} (${bytes} bytes)`);
    } catch (err) {
      if (err instanceof Errors.ExitError) throw err;
      fail(this, failure(err), err instanceof BackupRefusedError ? 2 : 1);
    }
  }
}
