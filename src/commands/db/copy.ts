import { Errors, Flags } from '@oclif/core';
import { MdsCommand } from '../../cli/command.js';
import { fail } from '../../cli/fail.js';
import type { CopyProgress, TableReport } from '../../infra/db/database-copy.js';

// Without a terminal, a line each time a table passes another tenth of its rows.
const LINES_PER_TABLE = 10;

export default class DbCopyCommand extends MdsCommand {
  static override description =
    'Copy every mds table (users, API keys, stored history, data issues, usage, jobs, rates) from the configured database to another, SQLite to PostgreSQL or back. ' +
    'The target is migrated first and must be empty or an interrupted copy of this source (run the command again to resume it). ' +
    'At the end each table is counted and checksummed on both sides; a difference exits 1.';

  static override examples = [
    '<%= config.bin %> <%= command.id %> --to postgres://mds:secret@db.internal:5432/mds',
    'DATABASE_URL=postgres://mds:secret@db.internal:5432/mds <%= config.bin %> <%= command.id %> --to sqlite:./data/back.sqlite',
  ];

  static override flags = {
    to: Flags.string({ description: 'The target database: sqlite:<path> or postgres://user:pass@host:port/db.', required: true }),
    replace: Flags.boolean({ description: "Delete every row the target's mds tables hold before copying (needed when it holds rows that are not an interrupted copy of this source)." }),
    'batch-size': Flags.integer({ description: 'Rows per batch; each batch is one transaction on the target.', default: 5000, min: 1, max: 100_000 }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(DbCopyCommand);
    const { failure, loadCliConfig } = await import('../../cli/context.js');
    const config = loadCliConfig(this);
    const { parseDatabaseUrl, redactDatabaseUrl } = await import('../../infra/db/data-source.js');
    try {
      parseDatabaseUrl(flags.to);
    } catch {
      fail(this, `--to must be sqlite:<path> or postgres://user:pass@host:port/db, not '${redactDatabaseUrl(flags.to).slice(0, 80)}' (see --help)`, 2);
    }
    const { copyDatabase, CopyRefusedError } = await import('../../infra/db/database-copy.js');
    const progress = await progressShown(this);
    let reports: TableReport[];
    try {
      reports = await copyDatabase({
        sourceUrl: config.database.url,
        targetUrl: flags.to,
        replace: flags.replace,
        batchRows: flags['batch-size'],
        onProgress: (p) => progress.update(p),
      });
    } catch (err) {
      progress.stop();
      if (err instanceof Errors.ExitError) throw err;
      return fail(this, failure(err), err instanceof CopyRefusedError ? 2 : 1);
    }
    progress.stop();
    this.log(summary(reports));
    const wrong = reports.filter((r) => !r.matches);
    const rows = reports.reduce((n, r) => n + r.targetRows, 0);
    if (wrong.length > 0) fail(this, `the copy in ${redactDatabaseUrl(flags.to)} differs from the source in ${wrong.map((r) => r.table).join(', ')}: run mds db copy again, with --replace if it still differs`, 1);
    this.log(`copy verified: ${reports.length} tables, ${rows} rows, counts and checksums match (${redactDatabaseUrl(flags.to)})`);
  }
}

/** Where progress goes: a bar per table on a terminal (stderr), plain lines on stdout otherwise. */
async function progressShown(command: MdsCommand): Promise<{ update(p: CopyProgress & { phase: 'copy' | 'verify' }): void; stop(): void }> {
  if (process.stderr.isTTY) {
    const { SingleBar } = await import('cli-progress');
    // The count is a payload: an empty table shows 0/0, where the bar itself needs a total of at least 1.
    const bar = new SingleBar({ format: '{table} {bar} {rows} rows', hideCursor: true });
    let current: string | undefined;
    return {
      update(p) {
        if (p.phase !== 'copy') return;
        const payload = { table: p.table.padEnd(17), rows: `${p.done}/${p.total}` };
        const [value, total] = p.total === 0 ? [1, 1] : [p.done, p.total];
        if (p.table !== current) {
          if (current !== undefined) bar.stop();
          current = p.table;
          bar.start(total, value, payload);
        } else {
          bar.setTotal(total);
          bar.update(value, payload);
        }
      },
      stop: () => bar.stop(),
    };
  }
  let shown = { table: '', tenth: -1 };
  return {
    update(p) {
      if (p.phase !== 'copy') return;
      const tenth = p.total === 0 ? LINES_PER_TABLE : Math.floor((p.done / p.total) * LINES_PER_TABLE);
      if (p.table === shown.table && tenth === shown.tenth) return;
      shown = { table: p.table, tenth };
      command.log(`${p.table}: ${p.done}/${p.total} rows`);
    },
    stop: () => undefined,
  };
}

function summary(reports: readonly TableReport[]): string {
  const lines = [`${'table'.padEnd(18)}${'source'.padStart(10)}${'target'.padStart(10)}${'copied'.padStart(10)}  checksum (SHA-256, first 16)`];
  for (const r of reports) {
    const checksum = r.matches ? `${r.sourceChecksum.slice(0, 16)}  ok` : `source ${r.sourceChecksum.slice(0, 16)} target ${r.targetChecksum.slice(0, 16)}  MISMATCH`;
    lines.push(`${r.table.padEnd(18)}${String(r.sourceRows).padStart(10)}${String(r.targetRows).padStart(10)}${String(r.copied).padStart(10)}  ${checksum}`);
  }
  return lines.join('\n');
}
