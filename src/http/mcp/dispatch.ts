/**
 * A tool call goes through the app's own request path, in-process: the operation's request is
 * injected (light-my-request: a request and response object pair, no socket) into the same request
 * listener the HTTP server runs, with the caller's credentials, address and request id. So it meets
 * the same steps as a REST call (the fast path, quotas and the usage meter, credentials, contract
 * validation, the handler, the envelope), and is counted as the operation it maps to.
 */
import type { IncomingHttpHeaders, RequestListener } from 'node:http';
import inject from 'light-my-request';

/** The caller a tool call acts for, as the transport learnt it. */
export interface CallerRequest {
  /** The credential headers the caller sent (`authorization`, the API-key header), forwarded as they are. */
  credentials: Record<string, string>;
  /** The caller's socket address, so an anonymous caller counts against its own address's quota. */
  remoteAddress: string;
  /** X-Forwarded-For as the caller sent it (read only when the service trusts its proxy). */
  forwardedFor?: string | undefined;
  /** The request id of the transport's request, carried into the operation's log lines. */
  requestId?: string | undefined;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/** Makes one GET into the app for a caller; resolves with the complete answer. */
export type Dispatch = (path: string, caller: CallerRequest, accept?: string) => Promise<Answer>;

/**
 * The response methods light-my-request captures the answer with. Express replaces a response's
 * prototype with its own (whose chain ends at Node's ServerResponse), which would drop them: they
 * are pinned on the instance first.
 */
const CAPTURING_METHODS = ['writeHead', 'write', 'end', 'destroy', 'addTrailers', 'setTimeout'] as const;

function pinned(listener: RequestListener): RequestListener {
  return (req, res) => {
    const own = res as unknown as Record<string, unknown>;
    for (const name of CAPTURING_METHODS) own[name] = own[name];
    // Its socket is a stand-in that never drains, so Node would call the complete answer unfinished
    // (and the request log "aborted"): an answer is finished once it is ended.
    Object.defineProperty(res, 'writableFinished', { get: () => res.writableEnded });
    listener(req, res);
  };
}

/** The dispatch into `listener` (the function the HTTP server calls for every request). */
export function inProcess(app: RequestListener): Dispatch {
  const listener = pinned(app);
  return async (path, caller, accept = 'application/json') => {
    const headers: IncomingHttpHeaders = { ...caller.credentials, accept };
    if (caller.forwardedFor !== undefined) headers['x-forwarded-for'] = caller.forwardedFor;
    if (caller.requestId !== undefined) headers['x-request-id'] = caller.requestId;
    const answer = await inject(listener, { method: 'GET', url: path, headers, remoteAddress: caller.remoteAddress });
    return { status: answer.statusCode, headers: answer.headers, body: answer.payload };
  };
}
