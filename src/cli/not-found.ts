/**
 * `mds serv`: an unknown command names the nearest one. On a terminal, @oclif/plugin-not-found asks
 * "Did you mean serve?" and runs it on yes; elsewhere (a script, CI) that plugin can ask nobody and
 * says only that the command is unknown, so this says the suggestion in one line, exit 127 as a shell
 * does for a command it cannot find.
 */
import { toConfiguredId, type Hook } from '@oclif/core';
import askWhatWasMeant from '@oclif/plugin-not-found';
import { closest } from 'fastest-levenshtein';

const notFound: Hook.CommandNotFound = async function (options) {
  if (process.stdin.isTTY && process.stderr.isTTY) return askWhatWasMeant.call(this, options);
  const { config } = options;
  const ids = config.commands.filter((command) => !command.hidden).flatMap((command) => [command.id, ...command.aliases]);
  const typed = toConfiguredId(options.id, config);
  const nearest = ids.length > 0 ? `; did you mean '${config.bin} ${toConfiguredId(closest(options.id, ids), config)}'?` : '';
  process.stderr.write(`Error: '${typed}' is not an ${config.bin} command${nearest} (see ${config.bin} help)\n`);
  return this.exit(127);
};

export default notFound;
