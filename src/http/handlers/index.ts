/** All handlers, keyed by operationId; `createApp` refuses to start when one is missing. */
import type { Contract } from '../contract.js';
import type { AuditLog } from '../../domain/ports/audit.js';
import type { AccountService } from '../../services/accounts.js';
import type { ApiKeyService } from '../../services/api-keys.js';
import type { DataQuality } from '../../services/data-quality.js';
import type { HistoryBackfill } from '../../services/history-backfill.js';
import type { HealthService } from '../../services/health.js';
import type { IndicatorService } from '../../services/indicators.js';
import type { MarketCalendarService } from '../../services/market-calendar.js';
import type { MarketDataService } from '../../services/market-data.js';
import type { ProviderRouter } from '../../services/provider-router.js';
import type { QuoteStreamHub } from '../../services/stream/hub.js';
import type { StatusService } from '../../services/status.js';
import type { UsageMeter } from '../../services/usage-meter.js';
import { adminHandlers } from './admin.js';
import { authHandlers } from './auth.js';
import { dataQualityHandlers } from './data-quality.js';
import { healthHandlers } from './health.js';
import { indicatorHandlers } from './indicators.js';
import { marketCalendarHandlers } from './market-calendar.js';
import { marketDataHandlers, type ExportFormatter, type RememberTarget } from './market-data.js';
import { metaHandlers } from './meta.js';
import { streamHandlers } from './stream.js';
import type { Handlers } from './types.js';

export interface HandlerDeps {
  contract: Contract;
  docs: () => Promise<string | undefined>;
  /** The AsyncAPI document's text (asyncapi.yaml); undefined when it cannot be read. */
  asyncApi: () => Promise<string | undefined>;
  health: HealthService;
  accounts: AccountService;
  keys: ApiKeyService;
  audit: AuditLog;
  market: MarketDataService;
  /** Technical indicators over stored history (and the study columns of history exports). */
  indicators: IndicatorService;
  /** Formats the history exports (CSV, Arrow) off the event loop. */
  compute: ExportFormatter;
  /** The chain of market-data providers, for GET /api/admin/providers. */
  providers: Pick<ProviderRouter, 'providers'>;
  /** The exchange calendars (sessions of a market). */
  calendar: MarketCalendarService;
  status: StatusService;
  /** History backfill jobs. */
  backfill: HistoryBackfill;
  /** The live-quote streams of this instance. */
  streams: QuoteStreamHub;
  /** API usage per caller per day. */
  usage: Pick<UsageMeter, 'report'>;
  /** The data-quality records, for GET /api/admin/data-issues. */
  quality: Pick<DataQuality, 'list'>;
  /** Lets the fast path answer this request target for the next second (omit to keep every request in Express). */
  rememberTarget?: RememberTarget;
}

export function createHandlers(deps: HandlerDeps): Handlers {
  return {
    ...healthHandlers(deps.health),
    ...metaHandlers(deps.contract, deps.docs, deps.asyncApi),
    ...authHandlers(deps.accounts),
    ...adminHandlers(deps),
    ...marketDataHandlers(deps.market, deps.compute, deps.rememberTarget, deps.indicators),
    ...indicatorHandlers(deps.indicators, deps.rememberTarget),
    ...marketCalendarHandlers(deps.calendar),
    ...streamHandlers(deps.streams),
    ...dataQualityHandlers(deps.quality),
  };
}
