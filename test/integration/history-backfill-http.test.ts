/**
 * History backfill over HTTP: POST /api/admin/history/backfill starts a job any instance answers for,
 * GET /api/admin/history/jobs/{id} follows it, and a job whose runner died is taken over and finished
 * without storing a bar twice. The upstream is the embedded simulated provider.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

interface JobBody {
  success: boolean;
  job_id: string;
  data: { state: string; done_symbols: number; candles: number; symbols: string[]; failures: Array<{ symbol: string; error: string }>; current_symbol: string | null };
}

describe('history backfill over HTTP', () => {
  let svc: TestService;
  let token: string;

  beforeAll(async () => {
    svc = await startTestService({}, { init: true });
    token = await svc.login(ADMIN.username, ADMIN.password);
  });

  afterAll(async () => {
    await svc?.close();
  });

  const post = (body: unknown, auth = `Bearer ${token}`) =>
    svc.fetch('/api/admin/history/backfill', { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const job = async (id: string) => (await (await svc.fetch(`/api/admin/history/jobs/${id}`, { headers: { authorization: `Bearer ${token}` } })).json()) as JobBody;

  it('when an administrator starts a backfill, then 202 names a job that ends done with the bars stored; unknown symbols are listed as failures', async () => {
    const res = await post({ symbols: ['aapl', '^GSPC', 'NOSUCH'], interval: '1d', since: '2024-01-01' });
    expect(res.status).toBe(202);
    const started = (await res.json()) as JobBody;
    expect(started.success).toBe(true);
    expect(started.data.symbols).toEqual(['AAPL', '^GSPC', 'NOSUCH']);

    let done: JobBody | undefined;
    await waitFor(async () => (done = await job(started.job_id)).data.state === 'done', { timeoutMs: 15_000, message: 'the job to finish' });
    expect(done!.data.done_symbols).toBe(3);
    expect(done!.data.candles).toBeGreaterThan(2 * 400);
    expect(done!.data.failures).toEqual([{ symbol: 'NOSUCH', error: 'unknown symbol' }]);

    // What was stored is what history answers, and a second backfill of it stores nothing new.
    const again = (await (await post({ symbols: ['AAPL'], since: '2024-01-01' })).json()) as JobBody;
    let second: JobBody | undefined;
    await waitFor(async () => (second = await job(again.job_id)).data.state === 'done', { timeoutMs: 15_000, message: 'the second job to finish' });
    expect(second!.data.candles).toBeLessThanOrEqual(2);
  });

  it('when the body lists no symbol, 101 symbols, a repeated symbol or a future date, then 422 names the rule', async () => {
    const none = await post({ symbols: [], since: '2024-01-01' });
    expect(none.status).toBe(422);
    expect(((await none.json()) as { error: string }).error).toContain('body.symbols');

    const many = await post({ symbols: Array.from({ length: 101 }, (_, i) => `S${i}`), since: '2024-01-01' });
    expect(many.status).toBe(422);

    const repeated = await post({ symbols: ['AAPL', 'aapl'], since: '2024-01-01' });
    expect(repeated.status).toBe(422);
    expect(((await repeated.json()) as { error: string }).error).toContain("must not repeat a symbol ('AAPL')");

    const future = await post({ symbols: ['AAPL'], since: '2999-01-01' });
    expect(future.status).toBe(422);
    expect(((await future.json()) as { error: string }).error).toContain('body.since must not be in the future');
  });

  it('when the job id is unknown, then 404; without credentials, then 401', async () => {
    const unknown = await svc.fetch('/api/admin/history/jobs/7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6', { headers: { authorization: `Bearer ${token}` } });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: string }).error).toBe("Backfill job '7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6' not found");

    const anonymous = await svc.fetch('/api/admin/history/backfill', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"symbols":["AAPL"],"since":"2024-01-01"}' });
    expect(anonymous.status).toBe(401);
  });
});

describe('history backfill: a job whose runner died', () => {
  it('when a job was left running half-way, then the next instance takes it over and stores each bar once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mds-backfill-resume-'));
    try {
      // A run that stored AAPL and died before ^GSPC: its heartbeat stopped long ago.
      const first = await startTestService({}, { init: true, dir, scheduler: false });
      const token = await first.login(ADMIN.username, ADMIN.password);
      const started = (await (
        await first.fetch('/api/admin/history/backfill', {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ symbols: ['AAPL'], since: '2023-01-01' }),
        })
      ).json()) as JobBody;
      await waitFor(async () => ((await (await first.fetch(`/api/admin/history/jobs/${started.job_id}`, { headers: { authorization: `Bearer ${token}` } })).json()) as JobBody).data.state === 'done', {
        timeoutMs: 15_000,
        message: 'the first job',
      });
      await first.close();
      const db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
      const storedBefore = (await db.candles.footprint()).candles;
      const orphanId = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
      const longAgo = new Date(Date.now() - 3_600_000);
      await db.historyJobs.create({
        id: orphanId,
        kind: 'backfill',
        symbols: ['AAPL', '^GSPC'],
        interval: '1d',
        sinceMs: Date.UTC(2023, 0, 1),
        state: 'running',
        doneSymbols: 1,
        candles: storedBefore,
        currentSymbol: '^GSPC',
        failures: [],
        createdBy: 'admin',
        createdAt: longAgo,
        updatedAt: longAgo,
      });
      await db.close();

      const second = await startTestService({}, { dir });
      try {
        const secondToken = await second.login(ADMIN.username, ADMIN.password);
        let resumed: JobBody | undefined;
        await waitFor(
          async () => (resumed = (await (await second.fetch(`/api/admin/history/jobs/${orphanId}`, { headers: { authorization: `Bearer ${secondToken}` } })).json()) as JobBody).data.state === 'done',
          { timeoutMs: 20_000, message: 'the orphaned job to be taken over and finished' },
        );
        expect(resumed!.data.done_symbols).toBe(2);
        const check = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: false });
        const after = (await check.candles.footprint()).candles;
        const gspc = await check.candles.getCandles('^GSPC', '1d', { startMs: Date.UTC(2023, 0, 1), endMs: Date.now() });
        const aapl = await check.candles.getCandles('AAPL', '1d', { startMs: Date.UTC(2023, 0, 1), endMs: Date.now() });
        await check.close();
        expect(gspc.length).toBeGreaterThan(400);
        // AAPL's bars were not fetched again as new rows: only ^GSPC's were added (plus at most a forming bar).
        expect(after - storedBefore - gspc.length).toBeLessThanOrEqual(1);
        expect(new Set(aapl.map((c) => c.timeMs)).size).toBe(aapl.length);
        expect(resumed!.data.candles).toBeGreaterThanOrEqual(storedBefore + gspc.length - 1);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
