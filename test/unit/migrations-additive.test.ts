/**
 * The migration rule of a rolling upgrade (docs/operations.md, "Upgrading one instance at a time"):
 * release N only adds (tables, nullable columns or columns with a default, indexes), because the
 * release before still runs on the migrated database; what N replaced is removed in N+1, once no
 * instance of N-1 is left. This scans the `up()` of every migration (its SQLite and PostgreSQL
 * branches alike) and fails on anything that takes away or changes what exists.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const MIGRATIONS = resolve(import.meta.dirname, '../../src/infra/db/migrations');

/**
 * The newest migration when the rule was written (1764600000000, create-fx-rates): it and every older
 * one shipped before the rule and are not scanned (none of them removes anything).
 */
const SHIPPED_BEFORE_THE_RULE = 1_764_600_000_000;

/**
 * Migrations of a release N+1 allowed to remove what release N stopped using: timestamp -> what it
 * removes and which release stopped reading it. Empty so far.
 */
const REMOVALS: Readonly<Record<number, string>> = {};

/**
 * Migrations that rename only to put an equivalent in place under the same name, which the release
 * before keeps using unchanged: timestamp -> what and why, with the test that runs the release
 * before's statements on the result. Only RENAME is allowed to them; every other rule still holds.
 */
const SAME_NAME_REPLACEMENTS: Readonly<Record<number, string>> = {
  1_764_700_000_000:
    'candles becomes partitioned by month on PostgreSQL (DESIGN 27): the table as it was is renamed candles_before_partitions and attached as the first partition of a new candles ' +
    'with the same columns, primary key and foreign key; test/integration/candle-partitions.test.ts runs the previous release\'s statements on it',
};

/** What removes or changes something the release before reads or writes. */
const FORBIDDEN: ReadonlyArray<{ pattern: RegExp; why: string }> = [
  {
    pattern: /\.(dropTable|dropColumns?|renameColumn|renameTable|changeColumns?|dropIndex|dropIndices|dropForeignKeys?|dropPrimaryKey|dropUniqueConstraints?|dropCheckConstraints?|dropExclusionConstraints?|clearTable|clearDatabase|dropSchema|dropView|dropDatabase)\s*\(/,
    why: 'a QueryRunner call that removes, renames or changes',
  },
  { pattern: /\bDROP\s+(TABLE|COLUMN|INDEX|VIEW|SCHEMA|CONSTRAINT|TRIGGER|DEFAULT)\b/i, why: 'SQL DROP' },
  { pattern: /\bRENAME\b/i, why: 'SQL RENAME' },
  { pattern: /\bALTER\s+COLUMN\b/i, why: 'SQL ALTER COLUMN (a type, a default or a NOT NULL changed under the release before)' },
  { pattern: /\bTRUNCATE\b|\bDELETE\s+FROM\b/i, why: 'rows removed' },
  { pattern: /\bADD\s+(COLUMN\s+)?"?\w+"?\s+[^,;]*\bNOT\s+NULL\b(?![^,;]*\bDEFAULT\b)/i, why: 'SQL ADD COLUMN NOT NULL without a DEFAULT (the release before inserts without it)' },
];

/** The text of the `up()` method of a migration's source (from its name to its closing brace). */
function upBody(source: string): string {
  const start = source.search(/\basync\s+up\s*\(/);
  if (start < 0) throw new Error('no async up() in the migration');
  const open = source.indexOf('{', source.indexOf(')', start));
  let depth = 0;
  for (let i = open; i < source.length; i++) {
    if (source[i] === '{') depth++;
    else if (source[i] === '}' && --depth === 0) return source.slice(start, i + 1);
  }
  throw new Error('the up() method never closes');
}

/** What a migration's `up()` does that the rule forbids, one line each; empty when it only adds. */
function forbiddenIn(source: string, allowRename = false): string[] {
  const body = upBody(source);
  const found = FORBIDDEN.filter((f) => !(allowRename && f.why === 'SQL RENAME') && f.pattern.test(body)).map((f) => `${f.why}: ${f.pattern.exec(body)![0].trim()}`);
  // A column added through TypeORM that must hold a value but has none by default.
  for (const column of body.match(/new\s+TableColumn\s*\(\s*\{[^}]*\}/g) ?? []) {
    if (/isNullable\s*:\s*false/.test(column) && !/\bdefault\s*:/.test(column)) found.push(`a NOT NULL column without a default (the release before inserts without it): ${column}`);
  }
  return found;
}

const files = readdirSync(MIGRATIONS).filter((f) => f.endsWith('.ts'));
const timestampOf = (file: string): number => Number(/^(\d+)-/.exec(file)?.[1]);

describe('migrations only add (rolling upgrades)', () => {
  it('when a migration newer than the rule is read, then its up() removes, renames and retypes nothing, unless it is a listed removal', () => {
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) expect(Number.isSafeInteger(timestampOf(file)), `${file} starts with its timestamp`).toBe(true);
    const checked = files.filter((f) => timestampOf(f) > SHIPPED_BEFORE_THE_RULE && REMOVALS[timestampOf(f)] === undefined);
    const offences = checked.flatMap((f) => forbiddenIn(readFileSync(join(MIGRATIONS, f), 'utf8'), SAME_NAME_REPLACEMENTS[timestampOf(f)] !== undefined).map((o) => `${f}: ${o}`));
    expect(offences).toEqual([]);
  });

  it('when a listed removal is read, then it names a migration that exists', () => {
    for (const timestamp of Object.keys(REMOVALS).map(Number)) expect(files.some((f) => timestampOf(f) === timestamp), String(timestamp)).toBe(true);
  });

  it('when a migration drops, renames, retypes or adds a NOT NULL column without a default, then the scan names it', () => {
    const migration = (up: string) => `export class M1 { async up(queryRunner) { ${up} } async down(queryRunner) { await queryRunner.dropTable('t'); } }`;
    expect(forbiddenIn(migration(`await queryRunner.dropColumn('users', 'email');`))).toHaveLength(1);
    expect(forbiddenIn(migration(`await queryRunner.renameColumn('users', 'a', 'b');`))).toHaveLength(1);
    expect(forbiddenIn(migration(`if (pg) { await queryRunner.query('ALTER TABLE "candles" ALTER COLUMN "volume" TYPE bigint'); } else { await queryRunner.changeColumn('candles', 'volume', c); }`))).toHaveLength(2);
    expect(forbiddenIn(migration(`await queryRunner.query('DROP INDEX "candles_by_day"');`))).toHaveLength(1);
    expect(forbiddenIn(migration(`await queryRunner.query('ALTER TABLE users RENAME TO people');`))).toHaveLength(1);
    expect(forbiddenIn(migration(`await queryRunner.query('ALTER TABLE users ADD COLUMN plan varchar(8) NOT NULL');`))).toHaveLength(1);
    expect(forbiddenIn(migration(`await queryRunner.addColumn('users', new TableColumn({ name: 'plan', type: 'varchar', isNullable: false }));`))).toHaveLength(1);
  });

  it('when a migration only adds (a table, a nullable column, a column with a default, an index), then the scan finds nothing, whatever its down() drops', () => {
    const migration = (up: string) => `export class M1 { async up(queryRunner) { ${up} } async down(queryRunner) { await queryRunner.dropTable('t'); await queryRunner.query('DROP INDEX x'); } }`;
    expect(forbiddenIn(migration(`await queryRunner.createTable(new Table({ name: 't', columns: [{ name: 'a', type: 'text' }] }));`))).toEqual([]);
    expect(forbiddenIn(migration(`await queryRunner.addColumn('users', new TableColumn({ name: 'plan', type: 'varchar', isNullable: false, default: "'free'" }));`))).toEqual([]);
    expect(forbiddenIn(migration(`await queryRunner.addColumn('users', new TableColumn({ name: 'note', type: 'text', isNullable: true }));`))).toEqual([]);
    expect(forbiddenIn(migration(`await queryRunner.query('ALTER TABLE users ADD COLUMN plan varchar(8) NOT NULL DEFAULT \\'free\\'');`))).toEqual([]);
    expect(forbiddenIn(migration(`await queryRunner.query('CREATE INDEX IF NOT EXISTS "users_by_plan" ON users (plan)');`))).toEqual([]);
  });

  it('when a same-name replacement is read, then it names a migration that exists, and only its RENAME is let through', () => {
    for (const timestamp of Object.keys(SAME_NAME_REPLACEMENTS).map(Number)) expect(files.some((f) => timestampOf(f) === timestamp), String(timestamp)).toBe(true);
    const migration = (up: string) => `export class M1 { async up(queryRunner) { ${up} } async down(queryRunner) {} }`;
    expect(forbiddenIn(migration(`await queryRunner.query('ALTER TABLE candles RENAME TO old_candles');`), true)).toEqual([]);
    expect(forbiddenIn(migration(`await queryRunner.query('ALTER TABLE candles RENAME TO old_candles'); await queryRunner.query('DROP TABLE old_candles');`), true)).toHaveLength(1);
  });

  it('when the migrations that shipped before the rule are scanned anyway, then none of them removes anything either', () => {
    const offences = files.filter((f) => timestampOf(f) <= SHIPPED_BEFORE_THE_RULE).flatMap((f) => forbiddenIn(readFileSync(join(MIGRATIONS, f), 'utf8')).map((o) => `${f}: ${o}`));
    expect(offences).toEqual([]);
  });
});
