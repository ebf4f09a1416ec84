/**
 * `node --import tsx bench/fast-path-accept.ts [rounds]`: what the cached-answer shortcut's decision
 * costs per request (`FastPath.answerFor`, nothing else: no socket, no reply), for a history target
 * (whose URL answers CSV and Arrow too, so `Accept` is looked at) and a quote target (JSON whatever
 * the `Accept`), with the `Accept` values clients send. The header values are flat strings of their
 * own, as a parsed request's are, taken in turn from a pool made beforehand (a request's value is new,
 * so its hash is computed once more; a pooled one's only on the first of its ~30 uses: a lookup by a
 * browser's 80-character value costs some tens of ns more than measured here). Also the cost of one
 * negotiation (`acceptedFormat`, Express's own rule), which the shortcut pays once per distinct value.
 */
import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import { FastPath } from '../src/http/fast-path.js';
import { acceptedFormat } from '../src/http/handlers/representation.js';
import type { CachedRepresentation, CacheKind } from '../src/services/cache/cache-types.js';

const rounds = Number(process.argv[2] ?? 3);
const CALLS = 2_000_000;
const ACCEPTS: Array<string | undefined> = [undefined, 'application/json', '*/*', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'text/*'];
const TARGETS: Array<[CacheKind, string]> = [
  ['history', '/api/history/AAPL?interval=1d&range=1mo'],
  ['quotes', '/api/quotes?symbols=AAPL,MSFT'],
];

function request(target: string, accept: string | undefined): IncomingMessage {
  return { method: 'GET', url: target, originalUrl: target, headers: accept === undefined ? {} : { accept }, caller: { anonymousAllowed: true }, openapi: { openApiRoute: target } } as unknown as IncomingMessage;
}

const POOL = 1 << 16;
/** Flat copies of `text`, each a string of its own. */
const copies = (text: string) => Array.from({ length: POOL }, () => Buffer.from(text, 'latin1').toString('latin1'));

function nsPerCall(run: (i: number) => unknown, calls: number): number {
  for (let i = 0; i < calls / 10; i++) run(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) run(i);
  return Number(process.hrtime.bigint() - start) / calls;
}

for (const [kind, target] of TARGETS) {
  const rep = { key: 'k', kind } as CachedRepresentation;
  const fastPath = new FastPath({ engine: { serveFresh: () => rep }, now: () => 0 });
  fastPath.remember(request(target, undefined) as Request, rep);
  for (const accept of ACCEPTS) {
    const req = request(target, accept);
    const values = accept === undefined ? [] : copies(accept);
    const taken = fastPath.answerFor(req) !== undefined;
    const figures: string[] = [];
    for (let r = 0; r < rounds; r++) {
      const ns = nsPerCall((i) => {
        if (accept !== undefined) req.headers.accept = values[i & (POOL - 1)];
        return fastPath.answerFor(req);
      }, CALLS);
      figures.push(ns.toFixed(0));
    }
    console.log(`${kind.padEnd(8)} Accept: ${(accept ?? '(none)').slice(0, 40).padEnd(40)} ${taken ? 'taken   ' : 'declined'} ${figures.join(' / ')} ns per request`);
  }
}
const browser = request('/', ACCEPTS[3]);
console.log(`one negotiation of a browser's Accept (acceptedFormat): ${nsPerCall(() => acceptedFormat(browser), CALLS / 20).toFixed(0)} ns`);
