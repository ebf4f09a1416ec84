import { NotAuthenticatedError } from '../../domain/errors.js';
import type { AccountService } from '../../services/accounts.js';
import { actionContext } from './context.js';
import type { Handler, JsonResponse } from './types.js';

export function authHandlers(accounts: AccountService): { login: Handler<'login'>; changePassword: Handler<'changePassword'> } {
  return {
    async login(req, res) {
      const body: JsonResponse<'login', 200> = await accounts.login(req.body.username, req.body.password, req.caller.address, actionContext(req).requestId);
      // A token: no cache, shared or private, may keep it (RFC 9111 5.2.2.5).
      res.status(200).set('Cache-Control', 'no-store').json(body);
    },
    async changePassword(req, res) {
      if (!req.principal) throw new NotAuthenticatedError();
      const body: JsonResponse<'changePassword', 200> = { success: true, data: await accounts.changePassword(req.principal, req.body.old_password, req.body.new_password, actionContext(req)) };
      res.status(200).set('Cache-Control', 'no-store').json(body);
    },
  };
}
