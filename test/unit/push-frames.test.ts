/**
 * Yahoo's streamer frames read with our PricingData schema: the recorded captures decode to the
 * values they carried (64-bit zigzag time, float32 prices, unknown fields skipped), frames built with
 * the schema read back, and a pushed price merges into a cached quote.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodePricing, encodePricing } from '../../src/infra/stream/yahoo-pricing.js';
import { mergePushedPrice } from '../../src/services/pushed-quotes.js';
import type { Quote } from '../../src/domain/ports/market-data.js';

interface Frame {
  symbol: string;
  base64: string;
  expected: Record<string, string | number>;
}
const { frames } = JSON.parse(readFileSync(resolve(import.meta.dirname, '../fixtures/yahoo-streamer/frames.json'), 'utf8')) as { frames: Frame[] };

describe("Yahoo's PricingData frames", () => {
  it('when the recorded BTC-USD frame is decoded, then every field read matches the capture (time as sint64, floats within float32 precision)', () => {
    const frame = frames.find((f) => f.symbol === 'BTC-USD')!;
    const d = decodePricing(frame.base64);
    const e = frame.expected;
    expect(d.id).toBe('BTC-USD');
    expect(d.time).toBe(Number(e.time));
    expect(new Date(d.time).toISOString()).toBe('2025-01-10T11:39:00.000Z');
    expect(d.currency).toBe(e.currency);
    expect(d.exchange).toBe(e.exchange);
    expect(d.marketHours).toBe(e.market_hours);
    expect(d.dayVolume).toBe(Number(e.day_volume));
    for (const [field, key] of [['price', 'price'], ['changePercent', 'change_percent'], ['dayHigh', 'day_high'], ['dayLow', 'day_low'], ['change', 'change'], ['openPrice', 'open_price']] as const) {
      expect(d[field]).toBeCloseTo(e[key] as number, 1);
    }
  });

  it('when the recorded JPY=X frame is decoded, then it names the stream ticker and its price', () => {
    const frame = frames.find((f) => f.symbol === 'JPY=X')!;
    const d = decodePricing(frame.base64);
    expect(d.id).toBe('JPY=X');
    expect(d.price).toBeCloseTo(frame.expected.price_approx as number, 3);
  });

  it('when a frame is built with the schema, then it reads back (a time past 2^32 ms included)', () => {
    const time = Date.UTC(2026, 10, 26, 16, 30);
    const d = decodePricing(encodePricing({ id: 'AAPL', price: 201.5, time, dayVolume: 51_234_000 }));
    expect(d).toMatchObject({ id: 'AAPL', price: 201.5, time, dayVolume: 51_234_000 });
  });

  it('when bytes are not a PricingData, then decoding throws instead of inventing a price', () => {
    expect(() => decodePricing(Buffer.from([0x0a, 0xff, 0xff, 0xff]).toString('base64'))).toThrow();
  });
});

describe('a pushed price merged into the cached quote', () => {
  const base: Quote = {
    symbol: 'AAPL', name: 'Apple Inc.', price: 200, change: 0, change_percent: 0, open: 199, high: 201, low: 198, prev_close: 200,
    volume: 1000, currency: 'USD', timestamp: '2026-11-26T16:00:00.000Z', exchange: 'NMS', instrument_type: 'equity', timezone: 'America/New_York', market_state: 'open',
  };

  it('when only a price comes, then change, change_percent and the range follow it and the rest stays', () => {
    const q = mergePushedPrice(base, { symbol: 'AAPL', price: 210, timeMs: Date.UTC(2026, 10, 26, 16, 30) });
    expect(q).toMatchObject({ price: 210, change: 10, change_percent: 5, high: 210, low: 198, open: 199, prev_close: 200, volume: 1000, name: 'Apple Inc.', timestamp: '2026-11-26T16:30:00.000Z' });
  });

  it("when the upstream sends its own change, range and volume, then they are taken", () => {
    const q = mergePushedPrice(base, { symbol: 'AAPL', price: 190, timeMs: Date.UTC(2026, 10, 26, 16, 30), change: -10, changePercent: -5, dayHigh: 202, dayLow: 189, dayVolume: 5000 });
    expect(q).toMatchObject({ price: 190, change: -10, change_percent: -5, high: 202, low: 189, volume: 5000 });
  });
});
