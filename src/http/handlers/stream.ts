import type { Response } from 'express';
import { addressGroup } from '../../domain/address-group.js';
import { parseSymbolList } from '../../domain/symbols.js';
import type { StreamSink } from '../../services/stream/contracts.js';
import type { QuoteStreamHub } from '../../services/stream/hub.js';
import { toErrorResponse } from '../envelope.js';
import type { Handler } from './types.js';

/** Headers of an event stream: never stored or transformed, never buffered by a proxy (nginx honours X-Accel-Buffering). */
const SSE_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-transform',
  'X-Accel-Buffering': 'no',
};

/** The response as the hub sees it. */
function sinkOf(res: Response): StreamSink {
  return {
    begin() {
      res.status(200).set(SSE_HEADERS);
      res.flushHeaders();
    },
    write: (chunk) => res.write(chunk),
    get writableLength() {
      return res.writableLength;
    },
    end: () => res.end(),
    destroy: () => res.destroy(),
    // The envelope the same refusal gets as an answer to a request (401 for credentials that ended).
    refuse: (refusal) => res.end(`event: error\ndata: ${JSON.stringify(toErrorResponse(refusal).body)}\n\n`),
    onClose: (listener) => res.once('close', listener),
  };
}

export function streamHandlers(hub: QuoteStreamHub): { streamQuotes: Handler<'streamQuotes'> } {
  return {
    async streamQuotes(req, res) {
      const { symbols, bars } = req.query as unknown as { symbols: string; bars?: '1m' };
      const list = parseSymbolList(symbols, 'query.symbols');
      // HEAD: the headers a stream begins with, without opening one (no slot taken, no event counted).
      if (req.head === true) {
        res.status(200).set(SSE_HEADERS).end();
        return;
      }
      const lastEventId = req.headers['last-event-id'];
      await hub.open({
        symbols: list,
        // A few streams per anonymous address (an IPv6 address's /64); an identified caller's own share
        // of the instance wherever it connects from, for as long as its credentials stay good.
        address: addressGroup(req.caller.address),
        principal: req.principal,
        ...(typeof lastEventId === 'string' ? { lastEventId: Number(lastEventId) } : {}),
        bars: bars === '1m',
        sink: sinkOf(res),
      });
    },
  };
}
