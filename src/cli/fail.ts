/** The CLI's one-line error exit, apart from the rest of the CLI's helpers so a command's parse errors cost no import. */
import type { Command } from '@oclif/core';

/**
 * Prints `Error: <message>` as one line on stderr and exits with `code`. (oclif's own error output
 * wraps a long message over several lines at the terminal's width.)
 */
export function fail(command: Command, message: string, code: number): never {
  process.stderr.write(`Error: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
  return command.exit(code);
}
