/** Reading a secret without echoing it (a terminal) or from the first line of piped standard input. */
import { createInterface } from 'node:readline';

/** The first line of standard input (piped), without the line ending. */
async function firstLine(): Promise<string> {
  const rl = createInterface({ input: process.stdin, terminal: false });
  try {
    for await (const line of rl) return line.replace(/\r$/, '');
    return '';
  } finally {
    rl.close();
  }
}

/** Asks on the terminal with echo off; resolves on Enter, rejects on Ctrl-C / Ctrl-D. */
function hiddenQuestion(prompt: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = process.stdin;
    process.stderr.write(prompt);
    stdin.setRawMode(true);
    stdin.resume();
    let value = '';
    const finish = (err?: Error) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off('data', onData);
      process.stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003' || ch === '\u0004') return finish(new Error('cancelled'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}

/**
 * A password: asked twice with echo off on a terminal, or read from the first line of standard
 * input when it is piped (so it stays out of shell history and process lists).
 */
export async function readPassword(options: { confirm: boolean }): Promise<string> {
  if (!process.stdin.isTTY) return firstLine();
  const first = await hiddenQuestion('Password: ');
  if (options.confirm) {
    const second = await hiddenQuestion('Repeat password: ');
    if (first !== second) throw new Error('the two passwords differ');
  }
  return first;
}
