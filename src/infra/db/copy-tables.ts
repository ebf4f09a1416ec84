/**
 * What `mds db copy` knows of the schema: every table the migrations create, its primary key and the
 * kind of each column, and how a value of each kind is said canonically (the same text whichever
 * database it was read from) and written back into SQLite or PostgreSQL. The copy refuses a database
 * whose tables or columns differ from this list, so a migration that adds one without adding it here
 * fails the copy (and its test) instead of leaving the table behind.
 */

/**
 * `int`: integer and bigint columns (PostgreSQL answers bigint as a string); `real`: doubles;
 * `timestamp`: SQLite's `datetime` text (UTC, as TypeORM writes it) and PostgreSQL's `timestamptz`;
 * `bool`: SQLite's 0/1 and PostgreSQL's boolean; `bytes`: BLOB and bytea.
 */
export type ColumnKind = 'int' | 'real' | 'text' | 'bool' | 'timestamp' | 'bytes';

export interface CopyTable {
  name: string;
  /** The primary key's columns, in the key's order: rows are read, copied and hashed in this order. */
  key: readonly string[];
  /** Every column and its kind, in the order rows are serialized. */
  columns: Readonly<Record<string, ColumnKind>>;
  /** The column a PostgreSQL sequence numbers (set past the copied ids so the next insert does not collide). */
  serial?: string;
}

const PROVENANCE = { provider: 'text', fetched_at: 'int' } as const;

/** Parents before children (candle_series before candles and coverage): the foreign keys hold at every commit. */
export const COPY_TABLES: readonly CopyTable[] = [
  {
    name: 'users',
    key: ['id'],
    serial: 'id',
    columns: { id: 'int', username: 'text', password_hash: 'text', is_admin: 'bool', created_at: 'timestamp', updated_at: 'timestamp' },
  },
  {
    name: 'api_keys',
    key: ['id'],
    columns: {
      id: 'text', name: 'text', role: 'text', key_digest: 'text', rate_limit_per_minute: 'int',
      expires_at: 'timestamp', created_at: 'timestamp', last_used_at: 'timestamp', created_by: 'text',
    },
  },
  {
    name: 'history_jobs',
    key: ['id'],
    columns: {
      id: 'text', symbols: 'text', bar_interval: 'text', since: 'timestamp', state: 'text', done_symbols: 'int', candles: 'int',
      current_symbol: 'text', failures: 'text', created_by: 'text', created_at: 'timestamp', updated_at: 'timestamp',
      owner: 'text', heartbeat_at: 'timestamp', kind: 'text', result: 'text',
    },
  },
  { name: 'candle_series', key: ['id'], serial: 'id', columns: { id: 'int', symbol: 'text', bar_interval: 'text' } },
  {
    name: 'candles',
    key: ['series_id', 't'],
    columns: {
      series_id: 'int', t: 'int', open: 'real', high: 'real', low: 'real', close: 'real', adj_close: 'real', volume: 'real', ...PROVENANCE,
    },
  },
  { name: 'candle_coverage', key: ['series_id', 'start_ms'], columns: { series_id: 'int', start_ms: 'int', end_ms: 'int', ...PROVENANCE } },
  {
    name: 'corporate_actions',
    key: ['symbol', 'kind', 't'],
    columns: { symbol: 'text', kind: 'text', t: 'int', amount: 'real', numerator: 'real', denominator: 'real', ...PROVENANCE },
  },
  { name: 'instruments', key: ['symbol'], columns: { symbol: 'text', currency: 'text', timezone: 'text', ...PROVENANCE } },
  {
    name: 'data_issues',
    key: ['id'],
    serial: 'id',
    columns: {
      id: 'int', symbol: 'text', bar_interval: 'text', t: 'int', rule: 'text', action: 'text', flag: 'text',
      before_bar: 'text', after_bar: 'text', providers: 'text', recorded_at: 'int', closes: 'text',
    },
  },
  {
    name: 'usage_daily',
    key: ['day', 'caller_kind', 'caller'],
    columns: { day: 'text', caller_kind: 'text', caller: 'text', requests: 'int', rate_limited: 'int', points: 'int' },
  },
  {
    name: 'usage_operations',
    key: ['day', 'caller_kind', 'caller', 'door', 'operation'],
    columns: { day: 'text', caller_kind: 'text', caller: 'text', door: 'text', operation: 'text', requests: 'int', points: 'int', rate_limited: 'int' },
  },
  { name: 'fx_rates', key: ['source', 'currency', 'day'], columns: { source: 'text', currency: 'text', day: 'text', rate: 'real' } },
];

/** Tables of the machinery, not of mds: TypeORM's migration log and SQLite's own. */
export function isInternalTable(name: string): boolean {
  return name === 'migrations' || name === 'typeorm_metadata' || name.startsWith('sqlite_');
}

// SQLite `datetime` text as TypeORM writes it (UTC, no zone) and as CURRENT_TIMESTAMP defaults it.
const SQLITE_DATETIME = /^(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d(?::\d\d(?:\.\d+)?)?)$/;

function instantOf(value: unknown): Date {
  if (value instanceof Date) return value;
  if (typeof value === 'number' || typeof value === 'bigint') return new Date(Number(value));
  const text = String(value);
  const naive = SQLITE_DATETIME.exec(text);
  return new Date(naive ? `${naive[1]}T${naive[2]}Z` : text);
}

/**
 * A value as canonical text, the same for the same value read from either database: integers in
 * decimal, doubles as JavaScript's shortest exact form (`-0` kept), instants as ISO 8601 in UTC to the
 * millisecond (what mds writes), booleans as `true`/`false`, bytes in base64; `null` stays `null`.
 * Throws on a value its kind cannot hold (an integer column holding 1.5), so nothing is rounded silently.
 */
export function canonicalValue(kind: ColumnKind, value: unknown): string | null {
  if (value === null || value === undefined) return null;
  switch (kind) {
    case 'int': {
      if (typeof value === 'number' && !Number.isInteger(value)) throw new Error(`not an integer: ${value}`);
      return BigInt(value as number | bigint | string).toString();
    }
    case 'real': {
      const n = typeof value === 'number' ? value : Number(value);
      return Object.is(n, -0) ? '-0' : String(n);
    }
    case 'text':
      return String(value);
    case 'bool':
      return value === true || value === 1 || value === 1n || value === 't' || value === '1' ? 'true' : 'false';
    case 'timestamp': {
      const at = instantOf(value);
      if (Number.isNaN(at.getTime())) throw new Error(`not an instant: ${String(value)}`);
      return at.toISOString();
    }
    case 'bytes':
      return Buffer.from(value as Uint8Array).toString('base64');
  }
}

/** A canonical value as a query parameter of `kind` for SQLite (better-sqlite3) or PostgreSQL (pg). */
export function parameterValue(kind: ColumnKind, canonical: string | null, postgres: boolean): unknown {
  if (canonical === null) return null;
  switch (kind) {
    case 'int': {
      if (postgres) return canonical;
      const n = BigInt(canonical);
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
    }
    case 'real':
      return Number(canonical);
    case 'text':
      return canonical;
    case 'bool':
      return postgres ? canonical === 'true' : canonical === 'true' ? 1 : 0;
    case 'timestamp':
      // TypeORM's SQLite format: `YYYY-MM-DD HH:MM:SS.SSS`, UTC.
      return postgres ? canonical : canonical.replace('T', ' ').slice(0, 23);
    case 'bytes':
      return Buffer.from(canonical, 'base64');
  }
}
