import type { MarketCalendarService } from '../../services/market-calendar.js';
import { setCacheControl } from '../cache-policy.js';
import type { Handler, JsonResponse } from './types.js';

export function marketCalendarHandlers(calendar: MarketCalendarService): { listMarketSessions: Handler<'listMarketSessions'> } {
  return {
    listMarketSessions(req, res) {
      const { start, end } = req.query as unknown as { start: string; end: string };
      const { body, maxAgeSeconds } = calendar.sessions(req.params.market, start, end);
      const typed: JsonResponse<'listMarketSessions', 200> = body;
      setCacheControl(req, res, maxAgeSeconds);
      res.status(200).json(typed);
    },
  };
}
