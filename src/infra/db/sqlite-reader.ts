/**
 * Large reads of the SQLite candle store on a thread of their own (DESIGN 24): better-sqlite3 reads
 * synchronously, and a window of tens of thousands of bars (an indicators request with its warm-up)
 * held the event loop for about 100 ms per request, in chunks, while health and cached reads waited.
 * The thread has its own read-only connection to the file; in WAL mode it reads the last committed
 * state while the event loop's connection writes, so a read needs no place in the store's serial
 * queue. It runs at a lower CPU priority than the event loop, like the compute pool's threads, and
 * holds the process open only while a read is under way (piscina's threads are unreferenced when idle).
 *
 * Reads are answered one at a time, in the order asked. If the thread cannot answer (it cannot open
 * the file, the file went away) the read rejects, and the store reads on its own connection instead.
 */
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import type { Piscina } from 'piscina';
import type { CandleColumns, TimeSpan } from '../../domain/ports/history-store.js';
import { workerModule } from '../worker-module.js';
import type { ReadRequest } from './sqlite-reader-worker.js';

export class SqliteReader {
  readonly #path: string;
  readonly #niceIncrement: number;
  #pool: Piscina | undefined;
  #closed = false;

  /** `path`: the database file (not `:memory:`, which no other connection can open). */
  constructor(path: string, niceIncrement: number) {
    this.#path = path;
    this.#niceIncrement = niceIncrement;
  }

  /** The bars of series `seriesId` in `span`, oldest first, at most `limit`. */
  read(seriesId: number, span: TimeSpan, limit: number | undefined): Promise<CandleColumns> {
    if (this.#closed) return Promise.reject(new Error('the SQLite reader is closed'));
    const request: ReadRequest = { seriesId, startMs: span.startMs, endMs: span.endMs, limit: limit ?? -1 };
    return this.#thread().run(request) as Promise<CandleColumns>;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.destroy();
  }

  #thread(): Piscina {
    if (this.#pool === undefined) {
      const { filename, execArgv } = workerModule(import.meta.url, 'sqlite-reader-worker');
      // Loaded with the first read it takes: a process that never reads candles (the CLI's account commands) never loads it.
      const { Piscina: Pool } = createRequire(import.meta.url)('piscina') as typeof import('piscina');
      this.#pool = new Pool({
        filename: pathToFileURL(filename).href,
        ...(execArgv !== undefined ? { execArgv } : {}),
        workerData: { path: this.#path },
        minThreads: 1,
        maxThreads: 1,
        idleTimeout: Number.POSITIVE_INFINITY,
        niceIncrement: this.#niceIncrement,
      });
    }
    return this.#pool;
  }
}
