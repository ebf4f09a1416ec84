/**
 * `mds db copy`: every mds table from one database to another (SQLite to PostgreSQL and back), in
 * primary-key order, in batches each committed in its own transaction, then verified by counts and
 * checksums read the same way on both sides.
 *
 * Resuming: because each table is copied in key order and every batch commits whole, an interrupted
 * copy leaves the target holding, per table, exactly a prefix of the source's rows. A second run checks
 * that (the target's rows hash like the source's first rows, table by table), then reads the source from
 * just after the target's highest key. Nothing is read twice from an index scan's start, and a row the
 * target already holds is never offered again, so no insert can meet a duplicate. (INSERT ... ON CONFLICT
 * DO NOTHING would also skip duplicates, but would re-read every copied row and would hide a target row
 * that differs from the source's; the prefix check refuses that instead.)
 */
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../../domain/errors.js';
import { COPY_TABLES, canonicalValue, isInternalTable, parameterValue, type CopyTable } from './copy-tables.js';
import { parseDatabaseUrl } from './data-source.js';
import { openUserStore } from './typeorm-user-store.js';

/** Rows read from the source per batch by default: one transaction on the target each. */
export const DEFAULT_BATCH_ROWS = 5000;
// Parameters per INSERT stay under SQLite's 32,766 (and PostgreSQL's 65,535).
const MAX_PARAMETERS = 30_000;

type Row = Record<string, unknown>;
type Query = (sql: string, parameters?: unknown[]) => Promise<Row[]>;

/** One end of the copy: its dialect and how to ask it things. */
interface Side {
  postgres: boolean;
  description: string;
  query: Query;
  transaction(work: (query: Query) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

/** How far one table is, for a progress bar: `done` of `total` source rows are in the target. */
export interface CopyProgress {
  table: string;
  done: number;
  total: number;
}

/** What the end of the copy found for one table. */
export interface TableReport {
  table: string;
  sourceRows: number;
  targetRows: number;
  /** Rows this run inserted (the rest were there from an interrupted run). */
  copied: number;
  /** SHA-256 (hex) of the table's rows in key order, canonically serialized, on each side. */
  sourceChecksum: string;
  targetChecksum: string;
  matches: boolean;
}

export interface CopyOptions {
  sourceUrl: string;
  targetUrl: string;
  /** Empty the target's mds tables before copying, whatever they hold. */
  replace?: boolean;
  /** Source rows per batch (and per target transaction); default `DEFAULT_BATCH_ROWS`. */
  batchRows?: number;
  /** Called once per table before it is copied, after each batch, and once per table in the verification. */
  onProgress?: (progress: CopyProgress & { phase: 'copy' | 'verify' }) => void;
}

/** The copy cannot start: the target is the source, or holds rows that are not a copy of it. */
export class CopyRefusedError extends AppError {
  constructor(message: string) {
    super('DATABASE_COPY_REFUSED', message);
  }
}

async function openSide(url: string): Promise<Side> {
  const opened = await openUserStore(url, { runMigrations: true });
  const dataSource: DataSource = opened.dataSource;
  const postgres = dataSource.options.type === 'postgres';
  return {
    postgres,
    description: opened.description,
    query: (sql, parameters) => dataSource.query(sql, parameters) as Promise<Row[]>,
    transaction: (work) => dataSource.transaction((manager: EntityManager) => work((sql, parameters) => manager.query(sql, parameters) as Promise<Row[]>)),
    close: () => opened.close(),
  };
}

function sameDatabase(sourceUrl: string, targetUrl: string): boolean {
  const source = parseDatabaseUrl(sourceUrl);
  const target = parseDatabaseUrl(targetUrl);
  if (source.kind === 'sqlite' && target.kind === 'sqlite') return source.path !== ':memory:' && resolve(source.path) === resolve(target.path);
  return source.kind === 'postgres' && target.kind === 'postgres' && source.url === target.url;
}

const quote = (name: string) => `"${name}"`;

/** Placeholder `n` (1-based) in the side's dialect. */
const placeholder = (side: Side, n: number) => (side.postgres ? `$${n}` : '?');

/** A key column as it sorts: text bytewise on both sides (SQLite's BINARY; PostgreSQL's "C", whatever the database's collation). */
function sortable(side: Side, table: CopyTable, column: string): string {
  return side.postgres && table.columns[column] === 'text' ? `${quote(column)} COLLATE "C"` : quote(column);
}

function orderBy(side: Side, table: CopyTable, direction: 'ASC' | 'DESC' = 'ASC'): string {
  return table.key.map((k) => `${sortable(side, table, k)} ${direction}`).join(', ');
}

/** The table's rows after `after` (canonical key values; none: from the first), in key order, at most `limit`. */
function readBatch(side: Side, table: CopyTable, after: readonly (string | null)[] | undefined, limit: number): Promise<Row[]> {
  const columns = Object.keys(table.columns).map(quote).join(', ');
  const parameters = after ? table.key.map((k, i) => parameterValue(table.columns[k]!, after[i] ?? null, side.postgres)) : [];
  const where = after ? ` WHERE (${table.key.map((k) => sortable(side, table, k)).join(', ')}) > (${table.key.map((_, i) => placeholder(side, i + 1)).join(', ')})` : '';
  return side.query(`SELECT ${columns} FROM ${quote(table.name)}${where} ORDER BY ${orderBy(side, table)} LIMIT ${limit}`, parameters);
}

function canonicalRow(table: CopyTable, row: Row): (string | null)[] {
  return Object.entries(table.columns).map(([column, kind]) => {
    try {
      return canonicalValue(kind, row[column]);
    } catch (err) {
      throw new AppError('DATABASE_COPY_FAILED', `${table.name}.${column}: ${(err as Error).message}`, { cause: err });
    }
  });
}

function keyOf(table: CopyTable, canonical: readonly (string | null)[]): (string | null)[] {
  const names = Object.keys(table.columns);
  return table.key.map((k) => canonical[names.indexOf(k)] ?? null);
}

async function countRows(side: Side, table: CopyTable): Promise<number> {
  const [row] = await side.query(`SELECT count(*) AS n FROM ${quote(table.name)}`);
  return Number(row?.n ?? 0);
}

/** Count and SHA-256 of the table's first `limit` rows (default: all) in key order, read in batches. */
async function digest(side: Side, table: CopyTable, batchRows: number, limit = Number.POSITIVE_INFINITY): Promise<{ rows: number; checksum: string }> {
  const hash = createHash('sha256');
  let rows = 0;
  let after: (string | null)[] | undefined;
  while (rows < limit) {
    const batch = await readBatch(side, table, after, Math.min(batchRows, limit - rows));
    for (const row of batch) {
      const canonical = canonicalRow(table, row);
      hash.update(`${JSON.stringify(canonical)}\n`);
      after = keyOf(table, canonical);
    }
    rows += batch.length;
    if (batch.length === 0) break;
  }
  return { rows, checksum: hash.digest('hex') };
}

/** The tables and their columns as the database's catalog has them, mds's only. */
async function catalog(side: Side): Promise<Map<string, string[]>> {
  const found = new Map<string, string[]>();
  if (side.postgres) {
    const rows = await side.query(
      "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE') " +
        // The months of a partitioned table (candles) are its storage, not tables of their own.
        "AND table_name NOT IN (SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relispartition AND n.nspname = current_schema()) ORDER BY table_name, ordinal_position",
    );
    for (const row of rows) {
      const name = String(row.table_name);
      if (!isInternalTable(name)) found.set(name, [...(found.get(name) ?? []), String(row.column_name)]);
    }
    return found;
  }
  const tables = await side.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  for (const { name } of tables) {
    if (isInternalTable(String(name))) continue;
    const columns = await side.query(`PRAGMA table_info(${quote(String(name))})`);
    found.set(String(name), columns.map((c) => String(c.name)));
  }
  return found;
}

/**
 * How the database's tables and columns differ from `COPY_TABLES`, one sentence each; empty when they
 * match. With `foreignTables: 'ignore'` a table mds does not know is not a difference (a target may share
 * its schema with another application).
 */
async function catalogProblems(side: Side, foreignTables: 'report' | 'ignore' = 'report'): Promise<string[]> {
  const found = await catalog(side);
  const problems: string[] = [];
  for (const [name, columns] of found) {
    const known = COPY_TABLES.find((t) => t.name === name);
    if (!known) {
      if (foreignTables === 'report') problems.push(`table ${name} is not one mds db copy knows`);
      continue;
    }
    const expected = Object.keys(known.columns);
    const missing = expected.filter((c) => !columns.includes(c));
    const extra = columns.filter((c) => !expected.includes(c));
    if (missing.length + extra.length > 0) problems.push(`table ${name} differs (${[...extra.map((c) => `unknown column ${c}`), ...missing.map((c) => `no column ${c}`)].join(', ')})`);
  }
  for (const table of COPY_TABLES) if (!found.has(table.name)) problems.push(`table ${table.name} is missing`);
  return problems;
}

/**
 * Throws unless the database holds the tables and columns `COPY_TABLES` lists: a source table this
 * release would not copy must stop the copy, not be left behind; the target's other tables are not ours.
 */
async function checkCatalog(side: Side, which: 'source' | 'target'): Promise<void> {
  const problems = await catalogProblems(side, which === 'source' ? 'report' : 'ignore');
  if (problems.length > 0) throw new AppError('DATABASE_COPY_SCHEMA', `The ${which} database (${side.description}) is not the schema this release copies: ${problems.join('; ')}`);
}

/** Refuses a target whose rows are not, table by table, the first rows of the source (an interrupted copy of it). */
async function checkResumable(source: Side, target: Side, batchRows: number): Promise<void> {
  for (const table of COPY_TABLES) {
    const held = await countRows(target, table);
    if (held === 0) continue;
    const [theirs, ours] = await Promise.all([digest(target, table, batchRows), digest(source, table, batchRows, held)]);
    if (ours.rows !== theirs.rows || ours.checksum !== theirs.checksum) {
      throw new CopyRefusedError(
        `The target (${target.description}) already holds rows that are not from a copy of this source: its table ${table.name} has ${held} row(s) that are not the source's first ${held}. ` +
          'Point --to at an empty database, or pass --replace to delete what its mds tables hold and copy afresh.',
      );
    }
  }
}

async function insertRows(query: Query, side: Side, table: CopyTable, rows: readonly (string | null)[][]): Promise<void> {
  const kinds = Object.values(table.columns);
  const columns = Object.keys(table.columns).map(quote).join(', ');
  const perStatement = Math.max(1, Math.floor(MAX_PARAMETERS / kinds.length));
  for (let start = 0; start < rows.length; start += perStatement) {
    const chunk = rows.slice(start, start + perStatement);
    const parameters: unknown[] = [];
    const tuples = chunk.map((row) => `(${row.map((value, i) => {
      parameters.push(parameterValue(kinds[i]!, value, side.postgres));
      return placeholder(side, parameters.length);
    }).join(', ')})`);
    await query(`INSERT INTO ${quote(table.name)} (${columns}) VALUES ${tuples.join(', ')}`, parameters);
  }
}

/** Copies the source rows after the target's highest key; resolves to how many it inserted. */
async function copyTable(source: Side, target: Side, table: CopyTable, batchRows: number, onProgress: (done: number, total: number) => void): Promise<number> {
  const total = await countRows(source, table);
  let done = await countRows(target, table);
  const [highest] = await target.query(`SELECT ${table.key.map(quote).join(', ')} FROM ${quote(table.name)} ORDER BY ${orderBy(target, table, 'DESC')} LIMIT 1`);
  let after = highest ? table.key.map((k) => canonicalValue(table.columns[k]!, highest[k])) : undefined;
  let copied = 0;
  onProgress(done, total);
  for (;;) {
    const batch = await readBatch(source, table, after, batchRows);
    if (batch.length === 0) break;
    const rows = batch.map((row) => canonicalRow(table, row));
    await target.transaction((query) => insertRows(query, target, table, rows));
    after = keyOf(table, rows[rows.length - 1]!);
    copied += rows.length;
    done += rows.length;
    onProgress(done, Math.max(total, done));
  }
  if (table.serial && target.postgres) {
    // Copied ids bypass the sequence: move it past them, or the next insert would reuse an id.
    const column = quote(table.serial);
    await target.query(`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(MAX(${column}), 0) + 1, false) FROM ${quote(table.name)}`, [quote(table.name), table.serial]);
  }
  return copied;
}

/** Migrates the database at `url` and says how its tables differ from what `copyDatabase` copies (empty: not at all). */
export async function schemaDrift(url: string): Promise<string[]> {
  const side = await openSide(url);
  try {
    return await catalogProblems(side);
  } finally {
    await side.close();
  }
}

/**
 * Copies every mds table from `sourceUrl` to `targetUrl` (both migrated first), then reads both again
 * and resolves to a report per table. Throws `CopyRefusedError` when the target is the source or holds
 * rows that are not an interrupted copy of it (unless `replace`), `AppError` `DATABASE_COPY_SCHEMA` when
 * either database has a table or column this release does not know, and the stores' errors when a
 * database cannot be opened.
 */
export async function copyDatabase(options: CopyOptions): Promise<TableReport[]> {
  if (sameDatabase(options.sourceUrl, options.targetUrl)) throw new CopyRefusedError('The target is the configured database itself: point --to at another database');
  const batchRows = options.batchRows ?? DEFAULT_BATCH_ROWS;
  const source = await openSide(options.sourceUrl);
  let target: Side | undefined;
  try {
    target = await openSide(options.targetUrl);
    await checkCatalog(source, 'source');
    await checkCatalog(target, 'target');
    const opened = target;
    if (options.replace) {
      await opened.transaction(async (query) => {
        for (const table of [...COPY_TABLES].reverse()) await query(`DELETE FROM ${quote(table.name)}`);
      });
    } else {
      await checkResumable(source, opened, batchRows);
    }
    const copied = new Map<string, number>();
    for (const table of COPY_TABLES) {
      copied.set(table.name, await copyTable(source, opened, table, batchRows, (done, total) => options.onProgress?.({ phase: 'copy', table: table.name, done, total })));
    }
    const reports: TableReport[] = [];
    for (const table of COPY_TABLES) {
      const [ours, theirs] = await Promise.all([digest(source, table, batchRows), digest(opened, table, batchRows)]);
      options.onProgress?.({ phase: 'verify', table: table.name, done: theirs.rows, total: ours.rows });
      reports.push({
        table: table.name,
        sourceRows: ours.rows,
        targetRows: theirs.rows,
        copied: copied.get(table.name) ?? 0,
        sourceChecksum: ours.checksum,
        targetChecksum: theirs.checksum,
        matches: ours.rows === theirs.rows && ours.checksum === theirs.checksum,
      });
    }
    return reports;
  } finally {
    await target?.close().catch(() => undefined);
    await source.close().catch(() => undefined);
  }
}
