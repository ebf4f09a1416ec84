/** Who did what from where: the audit context of a request, from its principal, address and id. */
import type { Request } from 'express';
import type { ActionContext } from '../../domain/ports/audit.js';
import { actorOf } from '../../services/accounts.js';

export function actionContext(req: Request): ActionContext {
  return {
    actor: req.principal ? actorOf(req.principal) : 'anonymous',
    ip: req.ip,
    requestId: typeof req.id === 'string' ? req.id : req.id === undefined ? undefined : String(req.id),
  };
}
