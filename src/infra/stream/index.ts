/** The push upstreams STREAM_UPSTREAMS names, built from their configuration (DESIGN 23). */
import type { Logger } from '../../domain/ports/logger.js';
import type { PushUpstream } from '../../domain/ports/push.js';
import { POLYGON_STREAM_URLS, PolygonSocket } from './polygon-socket.js';
import { YAHOO_STREAM_URL, YahooStreamer } from './yahoo-streamer.js';

export interface PushUpstreamSettings {
  upstreams: readonly ('yahoo' | 'polygon')[];
  yahooUrl: string | undefined;
  polygonUrl: string | undefined;
  /** Polygon's plan decides the host: `delayed.` or `socket.`. */
  polygonFeed: 'delayed' | 'realtime';
  polygonKeys: readonly string[];
  /** First reconnect delay (tests shorten it). */
  minReconnectMs?: number | undefined;
}

export function createPushUpstreams(settings: PushUpstreamSettings, logger: Logger): PushUpstream[] {
  const reconnect = settings.minReconnectMs !== undefined ? { minReconnectMs: settings.minReconnectMs } : {};
  return settings.upstreams.map((name) =>
    name === 'yahoo'
      ? new YahooStreamer({ url: settings.yahooUrl ?? YAHOO_STREAM_URL, logger: logger.child({ upstream: 'yahoo' }), ...reconnect })
      : new PolygonSocket({ url: settings.polygonUrl ?? POLYGON_STREAM_URLS[settings.polygonFeed], apiKeys: settings.polygonKeys, logger: logger.child({ upstream: 'polygon' }), ...reconnect }),
  );
}
