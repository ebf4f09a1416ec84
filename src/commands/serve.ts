import { Command, Flags } from '@oclif/core';
import { loadCliConfig, failure } from '../cli/context.js';
import { createLogger } from '../logger.js';
import { startService } from '../main.js';

export default class Serve extends Command {
  static override description =
    'Start the HTTP API: connect the cache (or fall back to memory), open the database, check the default administrator, start the scheduler and authentication, then listen.';

  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --port 8080 --host 0.0.0.0',
    'CACHE_URL=redis://127.0.0.1:6379/0 <%= config.bin %> <%= command.id %>',
  ];

  static override flags = {
    port: Flags.integer({ char: 'p', description: 'Port to listen on (overrides PORT; 0 picks a free one).', min: 0, max: 65535 }),
    host: Flags.string({ char: 'H', description: 'Address to listen on (overrides HOST).' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Serve);
    const config = loadCliConfig(this, { PORT: flags.port?.toString(), HOST: flags.host });
    const logger = createLogger({ level: config.log.level });
    let service;
    try {
      service = await startService(config, logger);
    } catch (err) {
      logger.fatal({ err }, 'startup failed');
      this.error(failure(err), { exit: 1 });
    }
    process.stderr.write(`mds listening on ${service.url} (docs: ${service.url}/docs)\n`);
    await new Promise<void>((resolve) => {
      const stop = (signal: string) => {
        logger.info({ signal }, 'shutting down');
        service.close().then(resolve, (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          process.exitCode = 1;
          resolve();
        });
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
  }
}
