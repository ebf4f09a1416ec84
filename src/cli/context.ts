/** What every command shares: config from the environment with flag overrides, a log shown only when asked for, one-line errors. */
import type { Command } from '@oclif/core';
import { pino } from 'pino';
import { loadConfig, type Config } from '../config.js';
import { AppError, InvalidRequestError } from '../domain/errors.js';
import { createLogger, logFormatFor, type Logger } from '../infra/logger.js';
import { fail } from './fail.js';
import type { OpenOptions } from './open-accounts.js';

export { fail };

/** Loads config; flags win over the environment. A bad value exits with one line naming the variable. */
export function loadCliConfig(command: Command, overrides: Record<string, string | undefined> = {}): Config {
  try {
    return loadConfig(undefined, { overrides });
  } catch (err) {
    return fail(command, failure(err), 2);
  }
}


/**
 * What a command calls the request field `field` (`body.expires_at`): its argument (`NAME`), its flag
 * (`--expires-at`), a name the command gives it in `inputs`, or the field's words (`password`).
 */
function inputName(command: Command, field: string, inputs: Record<string, string>): string {
  const ctor = command.constructor as typeof Command;
  if (inputs[field] !== undefined) return inputs[field];
  if (ctor.args?.[field] !== undefined) return field.toUpperCase();
  const flag = field.replaceAll('_', '-');
  if (ctor.flags?.[flag] !== undefined) return `--${flag}`;
  return field.replaceAll('_', ' ');
}

/** A value the service refused, said in the command's terms: `NAME must be 1 to 64 letters, ... (see --help)`. */
export function invalidInputLine(command: Command, err: InvalidRequestError, inputs: Record<string, string> = {}): string {
  const said = err.violations.map((v) => `${inputName(command, v.path.replace(/^[a-z]+\./, ''), inputs)} ${v.message}`);
  return `${said.join('; ')} (see --help)`;
}

/** One line saying what failed, without a stack. */
export function failure(err: unknown): string {
  if (err instanceof AppError) return err.message;
  if (err instanceof Error) return err.message.split('\n')[0] ?? 'failed';
  return String(err);
}

/** A command as the helpers see it: oclif's, and whether it was asked for its log (`--verbose`). */
export interface CliCommand extends Command {
  readonly verbose: boolean;
}

/**
 * Whether a command shows its log: with `--verbose`, or when LOG_LEVEL is set in the environment (a
 * script or a journal that wants the trail says so). Otherwise stderr holds only what the command
 * tells its user (errors, warnings about its effect).
 */
export function showsLog(command: CliCommand, config: Config): boolean {
  return command.verbose || config.log.levelInEnvironment;
}

/** A logger on stderr, in LOG_FORMAT: readable on a terminal, JSON lines when stderr is piped or a file; silent unless the log is asked for. */
function stderrLogger(command: CliCommand, config: Config, level: 'warn' | 'info'): Logger {
  const format = logFormatFor(config.log.format, 2);
  const shown = showsLog(command, config) && config.log.level !== 'silent';
  return createLogger({ level: shown ? level : 'silent', format, colorize: process.stderr.isTTY }, pino.destination(2));
}

/** Operator commands keep stdout for their answer: log lines (warnings and up), when asked for, go to stderr. */
export function cliLogger(command: CliCommand, config: Config): Logger {
  return stderrLogger(command, config, 'warn');
}

/**
 * Audit lines of operator actions (actor `cli`) are part of the CLI's log on stderr, at info whatever
 * the CLI's own log level, so a CLI change asked to leave a trail (`--verbose`, LOG_LEVEL in the
 * environment) leaves the same one as a change made through the API: JSON lines for a script or a
 * journal that keeps stderr, one readable line on an operator's terminal. LOG_LEVEL=silent mutes them.
 */
export function cliAuditLogger(command: CliCommand, config: Config): Logger {
  return stderrLogger(command, config, 'info');
}

/** Says one warning line on stderr (`Warning: ...`), for what the user must know when the log is not shown. */
export function warnLine(text: string): void {
  process.stderr.write(`Warning: ${text.replace(/\s*\n\s*/g, ' ')}\n`);
}

type OpenModule = typeof import('./open-accounts.js');

/**
 * Runs `work` with the accounts service over the configured database, then closes it. Any failure
 * becomes one line on stderr and a non-zero exit.
 */
export async function withAccounts<T>(
  command: CliCommand,
  work: (accounts: Awaited<ReturnType<OpenModule['openAccounts']>>['accounts'], config: Config) => Promise<T>,
  inputs: Record<string, string> = {},
): Promise<T> {
  return withOpened(command, (open) => open.openAccounts, (opened, config) => work(opened.accounts, config), inputs);
}

/**
 * Runs `work` with the managed API keys service over the configured database, as `withAccounts`.
 * A value the service refuses exits 2 (a usage error), named as the command's argument or flag;
 * `inputs` names request fields the command spells differently (`rate_limit_per_minute` -> `--rate-limit`).
 */
export async function withKeys<T>(
  command: CliCommand,
  work: (keys: Awaited<ReturnType<OpenModule['openKeys']>>['keys'], config: Config) => Promise<T>,
  inputs: Record<string, string> = {},
): Promise<T> {
  return withOpened(command, (open) => open.openKeys, (opened, config) => work(opened.keys, config), inputs);
}

async function withOpened<O extends { close(): Promise<void> }, T>(
  command: CliCommand,
  opener: (open: OpenModule) => (config: Config, logger: Logger, options: OpenOptions) => Promise<O>,
  work: (opened: O, config: Config) => Promise<T>,
  inputs: Record<string, string>,
): Promise<T> {
  const config = loadCliConfig(command);
  let opened: O | undefined;
  try {
    // The database and the services load only when a command asks for them (`mds --help` never does).
    const open = opener(await import('./open-accounts.js'));
    opened = await open(config, cliLogger(command, config), {
      auditLogger: cliAuditLogger(command, config),
      ...(showsLog(command, config) ? {} : { warn: warnLine }),
    });
    return await work(opened, config);
  } catch (err) {
    if (err instanceof InvalidRequestError) return fail(command, invalidInputLine(command, err, inputs), 2);
    return fail(command, failure(err), 1);
  } finally {
    await opened?.close().catch(() => undefined);
  }
}
