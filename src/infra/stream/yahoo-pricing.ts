/**
 * Yahoo's streamer frames: base64 of a protobuf `PricingData`. The schema below is our own, written
 * for the fields this service reads, with the field numbers and wire types of yfinance's
 * `pricing.proto`; protobufjs walks past every field it does not name. `time` and the volumes are
 * zigzag varints (`sint64`): epoch milliseconds do not fit 32 bits.
 */
import protobuf from 'protobufjs';

export const PRICING_PROTO = `
syntax = "proto3";
message PricingData {
  string id = 1;
  float price = 2;
  sint64 time = 3;
  string currency = 4;
  string exchange = 5;
  int32 market_hours = 7;
  float change_percent = 8;
  sint64 day_volume = 9;
  float day_high = 10;
  float day_low = 11;
  float change = 12;
  float open_price = 15;
  float previous_close = 16;
}
`;

/** A decoded frame; numbers only (64-bit fields as JavaScript numbers). */
export interface PricingData {
  id: string;
  price: number;
  time: number;
  currency: string;
  exchange: string;
  marketHours: number;
  changePercent: number;
  dayVolume: number;
  dayHigh: number;
  dayLow: number;
  change: number;
  openPrice: number;
  previousClose: number;
}

export const PricingDataType = protobuf.parse(PRICING_PROTO).root.lookupType('PricingData');

/** Decodes one frame's base64; throws on bytes that are not a `PricingData`. */
export function decodePricing(base64: string): PricingData {
  const message = PricingDataType.decode(Buffer.from(base64, 'base64'));
  return PricingDataType.toObject(message, { longs: Number, defaults: true }) as PricingData;
}

/** Encodes a frame (tests and the bench build replay frames with it). */
export function encodePricing(data: Partial<PricingData>): string {
  return Buffer.from(PricingDataType.encode(PricingDataType.fromObject(data)).finish()).toString('base64');
}
