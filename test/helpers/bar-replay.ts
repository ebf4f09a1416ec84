/**
 * Replays for live bar tests (DESIGN 26): ticks made from the recorded Yahoo streamer frame of
 * BTC-USD (test/fixtures/yahoo-streamer) with their times moved to the minutes a test needs, and the
 * reference bars a test compares with, built here on their own from the same ticks (group by minute:
 * first, highest, lowest and latest price; volume as the rise of the cumulative day volume).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { decodePricing, encodePricing, type PricingData } from '../../src/infra/stream/yahoo-pricing.js';

const { frames } = JSON.parse(readFileSync(resolve(import.meta.dirname, '../fixtures/yahoo-streamer/frames.json'), 'utf8')) as { frames: Array<{ symbol: string; base64: string }> };

/** The recorded BTC-USD frame, decoded. */
export function recordedBtcFrame(): PricingData {
  return decodePricing(frames.find((f) => f.symbol === 'BTC-USD')!.base64);
}

export interface ReplayTick {
  symbol: string;
  price: number;
  timeMs: number;
  dayVolume: number;
}

/**
 * `perMinute` ticks in each minute starting at `minutes[i]` (epoch ms, minute starts), prices walking
 * around the recorded price in quarter steps (exact in float32, so the wire keeps them), the recorded day
 * volume rising by a varying amount per tick. Deterministic.
 */
export function btcReplay(minutes: readonly number[], perMinute: number, start: { dayVolume?: number } = {}): ReplayTick[] {
  const base = recordedBtcFrame();
  const anchor = Math.round(base.price);
  let dayVolume = start.dayVolume ?? base.dayVolume;
  const ticks: ReplayTick[] = [];
  let step = 0;
  for (const minute of minutes) {
    for (let i = 0; i < perMinute; i++) {
      step += 1;
      const offset = ((step * 37) % 23) - 11;
      dayVolume += 1000 + ((step * 7919) % 5000);
      ticks.push({ symbol: 'BTC-USD', price: anchor + offset * 0.25, timeMs: minute + Math.floor(((i + 0.5) * 60_000) / perMinute), dayVolume });
    }
  }
  return ticks;
}

/** A tick as the recorded frame it stands for, with the moved time and new price and volume: base64 PricingData. */
export function frameOf(tick: ReplayTick): Partial<PricingData> & { id: string } {
  const base = recordedBtcFrame();
  return { ...base, id: tick.symbol, price: tick.price, time: tick.timeMs, dayVolume: tick.dayVolume };
}

/** The same through the wire: encoded and decoded with our schema. */
export function throughTheWire(tick: ReplayTick): ReplayTick {
  const d = decodePricing(encodePricing(frameOf(tick)));
  return { symbol: d.id, price: Number(d.price.toPrecision(7)), timeMs: d.time, dayVolume: d.dayVolume };
}

export interface ReferenceBar {
  time: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number;
}

/**
 * The one-minute bars of ticks given in market-time order: the volume of a minute is the day volume of its
 * last tick less that of the last tick before the minute (none before the first tick: it is the base).
 */
export function referenceBars(ticks: readonly ReplayTick[]): ReferenceBar[] {
  const bars: ReferenceBar[] = [];
  let before = ticks[0]?.dayVolume ?? 0;
  let current: (ReferenceBar & { minute: number; lastVolume: number }) | undefined;
  const finish = () => {
    if (current === undefined) return;
    const { minute: _m, lastVolume, ...bar } = current;
    bars.push({ ...bar, volume: lastVolume - before });
    before = lastVolume;
  };
  for (const tick of ticks) {
    const minute = Math.floor(tick.timeMs / 60_000) * 60_000;
    if (current?.minute !== minute) {
      finish();
      current = { minute, time: new Date(minute).toISOString(), open: tick.price, high: tick.price, low: tick.price, close: tick.price, volume: 0, lastVolume: tick.dayVolume };
    }
    current.high = Math.max(current.high, tick.price);
    current.low = Math.min(current.low, tick.price);
    current.close = tick.price;
    current.lastVolume = tick.dayVolume;
  }
  finish();
  return bars;
}
