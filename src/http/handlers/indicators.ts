import type { IndicatorParams, IndicatorService } from '../../services/indicators.js';
import { representationReply } from './representation.js';
import type { Handler } from './types.js';

export function indicatorHandlers(indicators: IndicatorService): { getIndicators: Handler<'getIndicators'> } {
  return {
    async getIndicators(req, res) {
      const query = req.query as unknown as Omit<IndicatorParams, 'symbol'>;
      const rep = await indicators.get({ ...query, symbol: req.params.symbol });
      const reply = representationReply(rep, req.headers['if-none-match']);
      res.status(reply.status).set(reply.headers);
      if (reply.body) res.end(reply.body);
      else res.end();
    },
  };
}
