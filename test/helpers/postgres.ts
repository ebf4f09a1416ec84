/**
 * The real PostgreSQL for tests (127.0.0.1:5432, trust auth, database `test`). Each suite works in a
 * schema of its own, so parallel runs never see each other's rows.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

const CANDIDATE_URLS = ['postgres://postgres@127.0.0.1:5432/test', 'postgres://root@127.0.0.1:5432/test'];
const PROBE_TIMEOUT_MS = 2000;

/** Whether a PostgreSQL at `url` answers a query within `timeoutMs` (a server going away mid-probe is a no). */
export async function answers(url: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The URL of a PostgreSQL that answers (TEST_POSTGRES_URL first, then user postgres, then root), or
 * `undefined` when none does.
 */
export async function findPostgres(): Promise<string | undefined> {
  const candidates = [process.env.TEST_POSTGRES_URL, ...CANDIDATE_URLS].filter((u): u is string => !!u);
  for (const url of candidates) {
    if (await answers(url)) return url;
  }
  return undefined;
}

/**
 * Whether PostgreSQL suites should run: always in CI (where a missing server must fail the run),
 * elsewhere only when a server answers. Prints a loud line when it skips.
 */
export function shouldRunPostgres(url: string | undefined, suite: string): boolean {
  if (url || process.env.CI) return true;
  console.warn(
    `\n!!! SKIPPED: ${suite} — no PostgreSQL answered at 127.0.0.1:5432 (database 'test', user postgres or root; ` +
      'or set TEST_POSTGRES_URL). In CI (CI set) this is a failure, not a skip. !!!\n',
  );
  return false;
}

/** A schema created for one test or suite; `drop()` removes it with everything in it. */
export interface TestSchema {
  name: string;
  drop(): Promise<void>;
}

/** Creates a uniquely named schema (`mds_test_<pid>_<random>`). */
export async function createTestSchema(url: string): Promise<TestSchema> {
  const name = `mds_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA "${name}"`);
  } finally {
    await client.end();
  }
  return {
    name,
    async drop() {
      const dropper = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
      await dropper.connect();
      try {
        await dropper.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
      } finally {
        await dropper.end();
      }
    },
  };
}

/**
 * `url` with the schema as its search path (`?options=-c search_path=<schema>`), for a process that
 * only reads DATABASE_URL: every unqualified table, the migrations' included, lands in that schema.
 */
export function schemaUrl(url: string, schema: string): string {
  return `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}
