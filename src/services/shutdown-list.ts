/** The list of parts a process closes at shutdown, last built first. */
import type { Logger } from '../domain/ports/logger.js';

/**
 * What a shutdown closes: every part that holds a connection, a timer or a listener registers here as
 * soon as it is built, and `close` ends them last built first, so each part closes before what it was
 * built on (the streams before the cache they publish through, the cache last). A startup that fails
 * half-way closes exactly what it had opened.
 */
export class ShutdownList {
  readonly #closers: Array<{ name: string; close: () => void | Promise<void> }> = [];
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Registers `close` (named for the log) to run at shutdown, before everything registered earlier. */
  add(name: string, close: () => void | Promise<void>): void {
    this.#closers.push({ name, close });
  }

  /**
   * Runs every closer once, last registered first. A failing one is logged and the others still run;
   * rejects with the first failure once all have run.
   */
  async close(): Promise<void> {
    let failure: { err: unknown } | undefined;
    for (const { name, close } of this.#closers.splice(0).reverse()) {
      try {
        await close();
      } catch (err) {
        this.#logger.error({ err, part: name }, `closing ${name} failed`);
        failure ??= { err };
      }
    }
    if (failure) throw failure.err;
  }
}
