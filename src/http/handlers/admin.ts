import type { AuditLog } from '../../domain/ports/audit.js';
import type { HistoryJob } from '../../domain/ports/history-store.js';
import type { AccountService } from '../../services/accounts.js';
import type { ApiKeyService } from '../../services/api-keys.js';
import type { HistoryBackfill } from '../../services/history-backfill.js';
import type { MarketDataService } from '../../services/market-data.js';
import type { ProviderRouter } from '../../services/provider-router.js';
import type { StatusService } from '../../services/status.js';
import type { UsageMeter } from '../../services/usage-meter.js';
import { actionContext } from './context.js';
import type { Handler, JsonResponse } from './types.js';

/** A backfill job as the contract spells it. */
function jobBody(job: HistoryJob): JsonResponse<'getHistoryJob', 200> {
  return {
    success: true,
    job_id: job.id,
    data: {
      job_id: job.id,
      kind: job.kind,
      ...(job.verify !== undefined
        ? {
            repair: job.verify.repair,
            checked: job.verify.checked,
            divergences: job.verify.divergences.map((d) => ({ symbol: d.symbol, time: new Date(d.timeMs).toISOString(), stored: d.stored, fetched: d.fetched, repaired: d.repaired })),
          }
        : {}),
      state: job.state,
      interval: job.interval,
      since: new Date(job.sinceMs).toISOString(),
      symbols: job.symbols,
      done_symbols: job.doneSymbols,
      candles: job.candles,
      current_symbol: job.currentSymbol,
      failures: job.failures,
      created_by: job.createdBy,
      created_at: job.createdAt.toISOString(),
      updated_at: job.updatedAt.toISOString(),
    },
  };
}

export function adminHandlers(deps: {
  accounts: AccountService;
  keys: ApiKeyService;
  market: MarketDataService;
  providers: Pick<ProviderRouter, 'providers'>;
  status: StatusService;
  audit: AuditLog;
  backfill: HistoryBackfill;
  usage: Pick<UsageMeter, 'report'>;
}): {
  getAdminStatus: Handler<'getAdminStatus'>;
  listUsers: Handler<'listUsers'>;
  createUser: Handler<'createUser'>;
  deleteUser: Handler<'deleteUser'>;
  flushCache: Handler<'flushCache'>;
  listApiKeys: Handler<'listApiKeys'>;
  createApiKey: Handler<'createApiKey'>;
  revokeApiKey: Handler<'revokeApiKey'>;
  startHistoryBackfill: Handler<'startHistoryBackfill'>;
  getHistoryJob: Handler<'getHistoryJob'>;
  startHistoryVerify: Handler<'startHistoryVerify'>;
  getUsage: Handler<'getUsage'>;
  listProviders: Handler<'listProviders'>;
} {
  const { accounts, keys, market, providers, status, audit, backfill, usage } = deps;
  return {
    async getAdminStatus(_req, res) {
      const body: JsonResponse<'getAdminStatus', 200> = { success: true, data: await status.report() };
      res.status(200).json(body);
    },
    async listUsers(_req, res) {
      const body: JsonResponse<'listUsers', 200> = { success: true, data: await accounts.listUsers() };
      res.status(200).json(body);
    },
    async createUser(req, res) {
      const { username, password, is_admin } = req.body;
      const body: JsonResponse<'createUser', 201> = { success: true, data: await accounts.createUser({ username, password, is_admin: is_admin ?? false }, actionContext(req)) };
      res.status(201).json(body);
    },
    async deleteUser(req, res) {
      await accounts.deleteUser(req.params.username, actionContext(req));
      res.status(204).end();
    },
    async flushCache(req, res) {
      const removed = await market.flush();
      // The market-data service knows nothing of callers; the audit line is written where the caller is known.
      audit.record({ action: 'cache.flushed', target: 'cache', details: { removed } }, actionContext(req));
      const body: JsonResponse<'flushCache', 200> = { success: true, data: { removed } };
      res.status(200).json(body);
    },
    async listApiKeys(_req, res) {
      const body: JsonResponse<'listApiKeys', 200> = { success: true, data: await keys.list() };
      res.status(200).json(body);
    },
    async createApiKey(req, res) {
      const body: JsonResponse<'createApiKey', 201> = { success: true, data: await keys.create(req.body, actionContext(req)) };
      // The one response that carries a secret: no cache may keep it.
      res.status(201).set('Cache-Control', 'no-store').json(body);
    },
    async revokeApiKey(req, res) {
      await keys.revoke(req.params.id, actionContext(req));
      res.status(204).end();
    },
    async startHistoryBackfill(req, res) {
      const context = actionContext(req);
      const job = await backfill.start(backfill.check(req.body), context.actor);
      audit.record({ action: 'history.backfill_started', target: `job:${job.id}`, details: { symbols: job.symbols.length, interval: job.interval } }, context);
      res.status(202).json(jobBody(job));
    },
    async startHistoryVerify(req, res) {
      const context = actionContext(req);
      const repair = req.body.repair ?? false;
      const job = await backfill.start(backfill.checkVerify(req.body), context.actor, { repair });
      audit.record({ action: 'history.verify_started', target: `job:${job.id}`, details: { symbols: job.symbols.length, interval: job.interval, repair } }, context);
      res.status(202).json(jobBody(job));
    },
    async getHistoryJob(req, res) {
      res.status(200).json(jobBody(await backfill.get(req.params.id)));
    },
    async getUsage(req, res) {
      // The validator has checked the range (1 to 90); the query string still holds text.
      const { days } = req.query as { days?: string };
      const span = days === undefined ? 30 : Number(days);
      const rows = await usage.report(span);
      const body: JsonResponse<'getUsage', 200> = {
        success: true,
        days: span,
        data: rows.map((row) => ({
          day: row.day,
          caller_kind: row.callerKind,
          caller: row.caller,
          requests: row.requests,
          points: row.points,
          rate_limited: row.rateLimited,
          operations: row.operations.map((op) => ({ door: op.door, operation: op.operation, requests: op.requests, points: op.points, rate_limited: op.rateLimited })),
        })),
      };
      res.status(200).json(body);
    },
    async listProviders(_req, res) {
      const body: JsonResponse<'listProviders', 200> = { success: true, data: await providers.providers(), updated_at: new Date().toISOString() };
      // Health, counts and budgets change with every upstream call.
      res.status(200).set('Cache-Control', 'no-store').json(body);
    },
  };
}
