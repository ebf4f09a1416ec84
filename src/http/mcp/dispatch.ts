/**
 * A tool call goes through the app's own request path, in-process: the operation's request is
 * injected (light-my-request: a request and response object pair, no socket) into the same request
 * listener the HTTP server runs, acting for the MCP caller (caller.ts `actFor`: the caller step takes
 * the door's caller instead of reading the request, so no credential or address is forwarded as a
 * header). It meets the same steps as a REST call (the quota and the price, contract validation, the
 * handler, the envelope) and is counted and metered as the operation it maps to, through the MCP door.
 */
import type { RequestListener } from 'node:http';
import inject from 'light-my-request';
import { actFor, type CallerOf } from '../caller.js';

/** The caller a tool call acts for: whom it is charged to, and the request id of the MCP request. */
export interface ToolCaller {
  /** Who is calling, as the caller step of the MCP request (or `mds mcp`'s key) decided. */
  caller: CallerOf;
  /** The request id of the transport's request, carried into the operation's log lines. */
  requestId?: string | undefined;
  /** Aborted when the MCP request is gone: the operation's request is abandoned with it. */
  signal?: AbortSignal | undefined;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/** Makes one GET into the app for a caller; resolves with the complete answer. */
export type Dispatch = (path: string, caller: ToolCaller, accept?: string) => Promise<Answer>;

/**
 * The response methods light-my-request captures the answer with. Express replaces a response's
 * prototype with its own (whose chain ends at Node's ServerResponse), which would drop them: they
 * are pinned on the instance first.
 */
const CAPTURING_METHODS = ['writeHead', 'write', 'end', 'destroy', 'addTrailers', 'setTimeout'] as const;

function pinned(listener: RequestListener, caller: CallerOf): RequestListener {
  return (req, res) => {
    actFor(req, caller);
    const own = res as unknown as Record<string, unknown>;
    for (const name of CAPTURING_METHODS) own[name] = own[name];
    // Its socket is a stand-in that never drains: an answer is finished once it is ended, and a
    // writer that waits for room (the exports) never has to wait (light-my-request keeps every chunk).
    Object.defineProperty(res, 'writableFinished', { get: () => res.writableEnded });
    Object.defineProperty(res, 'writableNeedDrain', { get: () => false });
    listener(req, res);
  };
}

/** The dispatch into `app` (the function the HTTP server calls for every request). */
export function inProcess(app: RequestListener): Dispatch {
  return async (path, { caller, requestId, signal }, accept = 'application/json') => {
    const headers: Record<string, string> = { accept };
    if (requestId !== undefined) headers['x-request-id'] = requestId;
    const answer = await inject(pinned(app, caller), { method: 'GET', url: path, headers, remoteAddress: caller.address, ...(signal ? { signal } : {}) });
    return { status: answer.statusCode, headers: answer.headers, body: answer.payload };
  };
}
