/** What every command shares: config from the environment with flag overrides, a quiet logger, one-line errors. */
import type { Command } from '@oclif/core';
import { pino } from 'pino';
import { loadConfig, type Config } from '../config.js';
import { AppError } from '../domain/errors.js';
import { createLogger, type Logger } from '../infra/logger.js';
import { openAccounts } from '../main.js';

/** Loads config; flags win over the environment. A bad value exits with one line naming the variable. */
export function loadCliConfig(command: Command, overrides: Record<string, string | undefined> = {}): Config {
  try {
    return loadConfig(undefined, { overrides });
  } catch (err) {
    return fail(command, failure(err), 2);
  }
}

/**
 * Prints `Error: <message>` as one line on stderr and exits with `code`. (oclif's own error output
 * wraps a long message over several lines at the terminal's width.)
 */
export function fail(command: Command, message: string, code: number): never {
  process.stderr.write(`Error: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
  return command.exit(code);
}

/** One line saying what failed, without a stack. */
export function failure(err: unknown): string {
  if (err instanceof AppError) return err.message;
  if (err instanceof Error) return err.message.split('\n')[0] ?? 'failed';
  return String(err);
}

/** Operator commands keep stdout for their answer: log lines (warnings and up) go to stderr. */
export function cliLogger(config: Config): Logger {
  const level = config.log.level === 'silent' ? 'silent' : 'warn';
  return createLogger({ level }, pino.destination(2));
}

/**
 * Audit lines of operator actions (actor `cli`) go to stderr as JSON, at info whatever the CLI's own
 * log level, so a CLI change leaves the same trail as one made through the API. LOG_LEVEL=silent mutes them.
 */
export function cliAuditLogger(config: Config): Logger {
  return createLogger({ level: config.log.level === 'silent' ? 'silent' : 'info' }, pino.destination(2));
}

/**
 * Runs `work` with the accounts service over the configured database, then closes it. Any failure
 * becomes one line on stderr and a non-zero exit.
 */
export async function withAccounts<T>(
  command: Command,
  work: (accounts: Awaited<ReturnType<typeof openAccounts>>['accounts'], config: Config) => Promise<T>,
): Promise<T> {
  return withServices(command, (opened, config) => work(opened.accounts, config));
}

/** Runs `work` with the managed API keys service over the configured database, as `withAccounts`. */
export async function withKeys<T>(
  command: Command,
  work: (keys: Awaited<ReturnType<typeof openAccounts>>['keys'], config: Config) => Promise<T>,
): Promise<T> {
  return withServices(command, (opened, config) => work(opened.keys, config));
}

async function withServices<T>(command: Command, work: (opened: Awaited<ReturnType<typeof openAccounts>>, config: Config) => Promise<T>): Promise<T> {
  const config = loadCliConfig(command);
  let opened: Awaited<ReturnType<typeof openAccounts>> | undefined;
  try {
    opened = await openAccounts(config, cliLogger(config), { auditLogger: cliAuditLogger(config) });
    return await work(opened, config);
  } catch (err) {
    return fail(command, failure(err), 1);
  } finally {
    await opened?.close().catch(() => undefined);
  }
}
