/**
 * docs/deploy/mds.service as systemd would run it (systemd itself is not on a build machine): its
 * ExecStart with the repository in place of /opt/mds, the variables of an EnvironmentFile, then its
 * KillSignal: the server must answer, drain and exit 0 within TimeoutStopSec.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const ROOT = resolve(import.meta.dirname, '../..');
const UNIT = readFileSync(join(ROOT, 'docs/deploy/mds.service'), 'utf8');

function directive(name: string): string {
  const value = new RegExp(`^${name}=(.*)$`, 'm').exec(UNIT)?.[1];
  if (value === undefined) throw new Error(`the unit has no ${name}=`);
  return value;
}

let dir: string | undefined;
afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));

describe('the systemd unit', () => {
  it('when its ExecStart runs with an environment file and then gets its KillSignal, then mds serves, drains and exits 0 within TimeoutStopSec', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-deploy-'));
    const [command, ...args] = directive('ExecStart').replaceAll('/opt/mds', ROOT).split(' ');
    expect(command).toBe('/usr/bin/node');
    const port = await freePort();
    const env = {
      PATH: process.env.PATH,
      // What /etc/mds/mds.env would hold, and the unit's own Environment=.
      NODE_ENV: /^Environment=NODE_ENV=(\w+)$/m.exec(UNIT)?.[1],
      SECRET_KEY: 'a-production-secret-of-at-least-32-bytes-long',
      DEFAULT_ADMIN_PASSWORD: 'not-the-shipped-one-1',
      PORT: String(port),
      METRICS_PORT: '0',
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      CACHE_URL: 'redis://127.0.0.1:1/0',
    };
    expect(env.NODE_ENV).toBe('production');
    const child = spawn(process.execPath, args, { cwd: directive('WorkingDirectory').replaceAll('/opt/mds', ROOT), env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));

    await waitFor(() => /listening on http/.test(stderr) || child.exitCode !== null, { timeoutMs: 60_000 });
    expect(child.exitCode, stderr).toBeNull();
    const health = await fetch(`http://127.0.0.1:${port}/api/health`);
    expect(health.status).toBe(200);
    child.kill(directive('KillSignal') as NodeJS.Signals);
    const stopWithinMs = Number(directive('TimeoutStopSec')) * 1000;
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('still running'), stopWithinMs).unref())]);

    expect(code).toBe(0);
  }, 120_000);
});
