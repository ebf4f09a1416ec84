/**
 * `series(steps)`: several middleware steps as one. Express's router pays for every layer it passes a
 * request through (matching the layer's path, its own `next`), so the steps every request takes in
 * order are chained here instead, each calling the next through one shared continuation.
 *
 * A step that throws, or passes an error to `next`, ends the series with that error (Express's own
 * rule for a layer); a step that neither answers nor calls `next` ends the request there; when the
 * last step calls `next()`, the request goes on to the app's next layer.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';

export function series(steps: readonly RequestHandler[]): RequestHandler {
  const chain = [...steps];
  return (req: Request, res: Response, next: NextFunction) => {
    let at = 0;
    const proceed = (err?: unknown) => {
      if (err !== undefined && err !== null) {
        next(err);
        return;
      }
      const step = chain[at];
      at += 1;
      if (step === undefined) {
        next();
        return;
      }
      runStep(step, req, res, proceed as NextFunction);
    };
    proceed();
  };
}

/**
 * Calls one step; a throw or a rejected promise (an async step) goes to `next` as its error, as
 * Express 5 does for a layer.
 */
export function runStep(step: RequestHandler, req: Request, res: Response, next: NextFunction): void {
  try {
    const result: unknown = step(req, res, next);
    if (result instanceof Promise) result.catch((error: unknown) => next(error ?? new Error('Rejected promise')));
  } catch (thrown) {
    next(thrown);
  }
}
