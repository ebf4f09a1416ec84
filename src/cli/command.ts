/**
 * The base of every `mds` command. A flag or argument oclif's parser refuses (`--port abc`, a missing
 * argument, an unknown flag) is one line on stderr with exit code 2, like every other CLI error: oclif
 * printed it over three lines, boxed, followed by the usage. A missing argument is said as a sentence
 * naming it and what it is.
 */
import { Command, Errors, Flags, type Interfaces } from '@oclif/core';
import { fail } from './fail.js';

// oclif dims part of some messages when stderr is a terminal.
// eslint-disable-next-line no-control-regex
const ANSI_STYLE = /\u001B\[[0-9;]*m/g;
const HELP_HINT = 'See more help with --help';

/** oclif's parser message in one line: `--port: Expected an integer but received: abc (see --help)`. */
export function parseErrorLine(message: string): string {
  const lines = message
    .replace(ANSI_STYLE, '')
    .split('\n')
    .map((line) => line.trim().replace(/\s+/g, ' '))
    .filter((line) => line.length > 0 && line !== HELP_HINT);
  const [first = 'Invalid arguments', ...rest] = lines;
  const parsing = /^Parsing (--\S+)$/.exec(first);
  const text = parsing && rest.length > 0 ? `${parsing[1]}: ${rest.join(' ')}` : lines.join(' ');
  return `${text} (see --help)`;
}

/** An argument as oclif's RequiredArgsError lists it. */
interface MissingArg {
  name: string;
  description?: string;
}

/** `mds keys revoke needs ID, the id of the key, as `mds keys list` shows it (see --help)`. */
export function missingArgsLine(command: string, args: readonly MissingArg[]): string {
  const what = args.map((arg) => {
    const description = (arg.description ?? '').trim().replace(/\.$/, '');
    const about = description.length > 0 ? `, ${description.charAt(0).toLowerCase()}${description.slice(1)}` : '';
    return `${arg.name.toUpperCase()}${about}`;
  });
  return `${command} needs ${what.join('; and ')} (see --help)`;
}

/** What oclif's parser gives for flags and arguments (its FlagOutput and ArgOutput, which it does not export). */
type ParsedValues = Record<string, unknown>;

export abstract class MdsCommand extends Command {
  /**
   * Every command but the long-running ones takes `--verbose`: without it (and without LOG_LEVEL in
   * the environment) stderr holds no log line, only what the command tells its user. (Typed as any
   * flags, so that `serve` and `mcp` can take none.)
   */
  static override baseFlags: Interfaces.FlagInput = {
    verbose: Flags.boolean({ description: 'Show the log lines (audit lines included) on stderr; LOG_LEVEL set in the environment does the same.', helpGroup: 'GLOBAL' }),
  };

  /** Whether `--verbose` was given, once the command has parsed its flags. */
  verbose = false;

  protected override async parse<F extends ParsedValues, B extends ParsedValues, A extends ParsedValues>(
    options?: Interfaces.Input<F, B, A>,
    argv?: string[],
  ): Promise<Interfaces.ParserOutput<F, B, A>> {
    const parsed = await super.parse(options, argv);
    this.verbose = (parsed.flags as { verbose?: boolean }).verbose === true;
    return parsed;
  }

  protected override async catch(err: Errors.CLIError & { exitCode?: number; args?: unknown }): Promise<unknown> {
    if (err instanceof Errors.CLIError && 'parse' in err && err.message.startsWith('Missing ') && Array.isArray(err.args)) {
      fail(this, missingArgsLine(`${this.config.bin} ${this.id?.replaceAll(':', ' ') ?? ''}`.trim(), err.args as MissingArg[]), err.oclif.exit ?? 2);
    }
    // Parser errors carry `parse`, except a flag value that fails to parse ("Parsing --port ...").
    if (err instanceof Errors.CLIError && ('parse' in err || err.message.startsWith('Parsing --'))) fail(this, parseErrorLine(err.message), err.oclif.exit ?? 2);
    return super.catch(err);
  }
}
