import type { AccountService } from '../services/accounts.js';
import type { MarketDataService } from '../services/market-data.js';
import type { StatusService } from '../services/status.js';
import type { Handler, JsonResponse } from './types.js';

export function adminHandlers(deps: { accounts: AccountService; market: MarketDataService; status: StatusService }): {
  getAdminStatus: Handler<'getAdminStatus'>;
  listUsers: Handler<'listUsers'>;
  createUser: Handler<'createUser'>;
  deleteUser: Handler<'deleteUser'>;
  flushCache: Handler<'flushCache'>;
} {
  const { accounts, market, status } = deps;
  return {
    async getAdminStatus(_req, res) {
      const body: JsonResponse<'getAdminStatus', 200> = await status.report();
      res.status(200).json(body);
    },
    async listUsers(_req, res) {
      const body: JsonResponse<'listUsers', 200> = await accounts.listUsers();
      res.status(200).json(body);
    },
    async createUser(req, res) {
      const { username, password, is_admin } = req.body;
      const body: JsonResponse<'createUser', 201> = await accounts.createUser({ username, password, is_admin: is_admin ?? false });
      res.status(201).json(body);
    },
    async deleteUser(req, res) {
      await accounts.deleteUser(req.params.username);
      res.status(204).end();
    },
    async flushCache(_req, res) {
      const body: JsonResponse<'flushCache', 200> = { ok: true, removed: await market.flush() };
      res.status(200).json(body);
    },
  };
}
