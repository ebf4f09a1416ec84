/**
 * Handler typing from the generated contract: request bodies, path parameters and JSON responses
 * are indexed from `operations[...]`, never written by hand.
 */
import type { Request, Response } from 'express';
import type { operations } from '../../generated/api.js';

export type OperationId = keyof operations;

export type RequestBody<Id extends OperationId> = operations[Id] extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : undefined;

export type PathParams<Id extends OperationId> = operations[Id] extends { parameters: { path: infer P } }
  ? P extends Record<string, string>
    ? P
    : Record<string, never>
  : Record<string, never>;

export type JsonResponse<Id extends OperationId, Status extends keyof operations[Id]['responses']> = operations[Id]['responses'][Status] extends {
  content: { 'application/json': infer R };
}
  ? R
  : never;

/** A handler bound to one operation. Express 5 forwards rejected promises to the error middleware. */
export type Handler<Id extends OperationId> = (req: Request<PathParams<Id>, unknown, RequestBody<Id>>, res: Response) => void | Promise<void>;

/** One handler per operationId of the contract. */
export type Handlers = { [Id in OperationId]: Handler<Id> };
