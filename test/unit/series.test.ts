/**
 * `series(steps)` stands for one Express layer per step: the order, the end of the series on an error
 * (thrown, passed to `next`, or a rejected promise) and a step that answers by itself. Over HTTP,
 * every request of the suite goes through it (app.ts).
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { describe, expect, it } from 'vitest';
import { series } from '../../src/http/series.js';

const req = {} as Request;
const res = {} as Response;

/** Runs `handler` and resolves with what it passed to the outer `next` (`'not called'` if it never did). */
function outcome(handler: RequestHandler): Promise<unknown> {
  return new Promise((resolve) => {
    const next = ((err?: unknown) => resolve(err === undefined ? 'next()' : err)) as NextFunction;
    void handler(req, res, next);
    setImmediate(() => resolve('not called'));
  });
}

describe('series of middleware steps', () => {
  it('when every step calls next, then they run in order and the series calls next once', async () => {
    const ran: string[] = [];
    const step = (name: string): RequestHandler => (_req, _res, next) => {
      ran.push(name);
      next();
    };

    expect(await outcome(series([step('a'), step('b'), step('c')]))).toBe('next()');
    expect(ran).toEqual(['a', 'b', 'c']);
  });

  it('when a step continues later, then the next step waits for it', async () => {
    const ran: string[] = [];
    const later: RequestHandler = (_req, _res, next) => {
      void Promise.resolve().then(() => {
        ran.push('later');
        next();
      });
    };

    expect(await outcome(series([later, (_q, _s, next) => (ran.push('after'), next())]))).toBe('next()');
    expect(ran).toEqual(['later', 'after']);
  });

  it('when a step throws, passes an error or returns a rejected promise, then the rest is skipped and the error goes on', async () => {
    const failure = new Error('boom');
    const ran: string[] = [];
    const rest: RequestHandler = (_q, _s, next) => {
      ran.push('rest');
      next();
    };

    expect(await outcome(series([() => { throw failure; }, rest]))).toBe(failure);
    expect(await outcome(series([(_q, _s, next) => next(failure), rest]))).toBe(failure);
    expect(await outcome(series([() => Promise.reject(failure), rest]))).toBe(failure);
    expect(await outcome(series([() => Promise.reject(undefined), rest]))).toEqual(new Error('Rejected promise'));
    expect(ran).toEqual([]);
  });

  it('when a step answers without calling next, then nothing after it runs', async () => {
    const ran: string[] = [];

    expect(await outcome(series([() => ran.push('answered'), () => ran.push('never')]))).toBe('not called');
    expect(ran).toEqual(['answered']);
  });
});
