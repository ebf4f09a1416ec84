/** The data-quality operations (DESIGN 20): what the checks recorded, for administrators. */
import type { DataQuality } from '../../services/data-quality.js';
import type { BarValues } from '../../domain/quality/data-issues.js';
import { isoInstant } from '../../domain/instant.js';
import type { Handler, JsonResponse } from './types.js';

type IssueBar = NonNullable<JsonResponse<'listDataIssues', 200>['data'][number]['before']>;

function barBody(bar: BarValues | null): IssueBar | null {
  return bar === null ? null : { open: bar.open, high: bar.high, low: bar.low, close: bar.close, adj_close: bar.adjClose, volume: bar.volume };
}

export function dataQualityHandlers(quality: Pick<DataQuality, 'list'>): { listDataIssues: Handler<'listDataIssues'> } {
  return {
    async listDataIssues(req, res) {
      // The validator has checked the shapes; the query string still holds text.
      const { symbol, since, limit } = req.query as { symbol?: string; since?: string; limit?: string };
      const issues = await quality.list({ symbol, since, limit: limit === undefined ? undefined : Number(limit) });
      const body: JsonResponse<'listDataIssues', 200> = {
        success: true,
        data: issues.map((i) => ({
          symbol: i.symbol,
          interval: i.interval,
          time: isoInstant(i.timeMs),
          rule: i.rule,
          action: i.action,
          ...(i.flag !== undefined ? { flag: i.flag as JsonResponse<'listDataIssues', 200>['data'][number]['flag'] & string } : {}),
          before: barBody(i.before),
          after: barBody(i.after),
          providers: i.providers,
          ...(i.closes !== undefined ? { closes: i.closes } : {}),
          recorded_at: isoInstant(i.recordedAtMs),
        })),
      };
      res.status(200).set('Cache-Control', 'no-store').json(body);
    },
  };
}
