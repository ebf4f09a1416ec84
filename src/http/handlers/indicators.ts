import type { IndicatorParams, IndicatorService } from '../../services/indicators.js';
import { send, type RememberTarget } from './market-data.js';
import type { Handler } from './types.js';

export function indicatorHandlers(indicators: IndicatorService, remember?: RememberTarget): { getIndicators: Handler<'getIndicators'> } {
  return {
    async getIndicators(req, res) {
      const query = req.query as unknown as Omit<IndicatorParams, 'symbol'>;
      send(req, res, await indicators.get({ ...query, symbol: req.params.symbol }), remember);
    },
  };
}
