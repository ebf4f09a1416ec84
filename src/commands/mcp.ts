import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { MdsCommand } from '../cli/command.js';
import { fail } from '../cli/fail.js';
import type { startService } from '../main.js';

/**
 * Why `mds mcp` may not open `databaseUrl`: a SQLite file that does not exist, which opening would
 * create empty. A desktop client starts the command in a folder of its own choosing, where the default
 * relative path names no database, and an empty one knows no key. PostgreSQL URLs are not files.
 */
async function missingDatabase(databaseUrl: string): Promise<string | undefined> {
  const { parseDatabaseUrl } = await import('../infra/db/data-source.js');
  const target = parseDatabaseUrl(databaseUrl);
  if (target.kind !== 'sqlite' || target.path === ':memory:') return undefined;
  const file = resolve(target.path);
  if (existsSync(file)) return undefined;
  const from = isAbsolute(target.path) ? '' : ` (DATABASE_URL=${databaseUrl}, relative to the working directory ${process.cwd()})`;
  return `DATABASE_URL: no database at ${file}${from}; mds mcp never creates one. Set DATABASE_URL to the database \`mds init\` created, as an absolute path (sqlite:/path/to/mds/data/mds.sqlite)`;
}

export default class Mcp extends MdsCommand {
  static override description =
    'Serve the Model Context Protocol over stdio, for desktop MCP clients (Claude Desktop, VS Code, Cursor): the same service as `mds serve`, with the same configuration, whose tools and resources are its REST operations. Tool calls are made with the key in MCP_API_KEY (anonymous without it). It opens the database `mds init` created and never creates one: a desktop client gives DATABASE_URL as an absolute path. Logs go to stderr; stdout carries the protocol.';

  static override examples = ['<%= config.bin %> <%= command.id %>', 'MCP_API_KEY=mds_... <%= config.bin %> <%= command.id %>'];

  // A long-running service: its log on stderr is always shown, so no --verbose.
  static override baseFlags = {};

  async run(): Promise<void> {
    await this.parse(Mcp);
    // The service and the MCP SDK load only when asked for: `mds --help` never pays for them.
    const [{ failure, loadCliConfig }, { pino }, { createLogger, logFormatFor }, { startService }] = await Promise.all([
      import('../cli/context.js'),
      import('pino'),
      import('../infra/logger.js'),
      import('../main.js'),
    ]);
    // The service listens on a loopback port of its own choosing (nothing calls it there: tool calls
    // are made in-process); metrics and the refresh timer belong to `mds serve`.
    const config = loadCliConfig(this, { PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', REFRESH_INTERVAL_SECONDS: '0' });
    let missing: string | undefined;
    try {
      missing = await missingDatabase(config.database.url);
    } catch (err) {
      missing = failure(err);
    }
    if (missing !== undefined) fail(this, missing, 1);
    // stdout is the protocol's: every log line goes to stderr.
    const logger = createLogger({ level: config.log.level, format: logFormatFor(config.log.format, 2) }, pino.destination(2));
    let service;
    try {
      service = await startService(config, logger, { scheduler: false });
    } catch (err) {
      logger.fatal({ err }, 'startup failed');
      fail(this, failure(err), 1);
    }
    const apiKey = config.mcp.apiKey;
    try {
      // A key that is refused (or none under DATA_REQUIRES_AUTH) would refuse every call: say so now.
      const principal = await service.mcp.identifyKey(apiKey);
      logger.info({ caller: principal?.username ?? 'anonymous', tools: service.mcp.toolNames.length }, 'mcp over stdio ready');
    } catch (err) {
      await service.close().catch(() => undefined);
      fail(this, apiKey === undefined ? `${failure(err)}: DATA_REQUIRES_AUTH is on, so set MCP_API_KEY to an API key` : `MCP_API_KEY: ${failure(err)}`, 1);
    }
    await this.#serve(service, apiKey);
  }

  /** Serves stdin/stdout until the client goes or a signal comes, then closes the service. */
  async #serve(service: Awaited<ReturnType<typeof startService>>, apiKey: string | undefined): Promise<void> {
    const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
    const transport = new StdioServerTransport();
    const closed = new Promise<void>((resolve) => {
      transport.onclose = resolve;
      process.stdin.once('end', resolve);
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
    });
    await service.mcp.connect(transport, apiKey);
    await closed;
    await service.close();
  }
}
