import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, encodeFoundEntryBytes, type CacheEntry } from '../../src/services/cache/cache-entry.js';

const BODY = '{"success":true,"data":{"symbol":"AAPL","price":1},"source":"yahoo","updated_at":"2026-11-26T16:00:00.000Z"}';
const NOW = 1_800_000_000_000;

describe('stored entries of the representation cache', () => {
  it('when a body is stored with a grace, then it reads back as found with its fresh and stale ends from the store TTL', () => {
    const stored = encodeEntry({ outcome: 'found', body: BODY }, 300_000);

    // The store TTL covers the fresh time and the grace: 60 s fresh left, then 300 s of grace.
    expect(decodeEntry(stored, 360_000, NOW)).toEqual<CacheEntry>({ value: { outcome: 'found', body: BODY }, freshUntilMs: NOW + 60_000, staleUntilMs: NOW + 360_000 });
  });

  it('when an entry is read within its grace only, then its fresh end is past and its stale end is not', () => {
    const entry = decodeEntry(encodeEntry({ outcome: 'found', body: BODY }, 300_000), 100_000, NOW);

    expect(entry!.freshUntilMs).toBeLessThan(NOW);
    expect(entry!.staleUntilMs).toBe(NOW + 100_000);
  });

  it('when a body with parts is stored, then the parts read back as typed fields and the body comes back byte for byte', () => {
    const parts = { data: { from: 23, to: 50 }, source: 'yahoo', updatedAt: '2026-11-26T16:00:00.000Z' };
    const entry = decodeEntry(encodeEntry({ outcome: 'found', body: BODY, parts }, 0), 60_000, NOW);

    expect(entry?.value).toEqual({ outcome: 'found', body: BODY, parts });
    expect(entry?.value.outcome === 'found' && entry.value.body.slice(parts.data.from, parts.data.to)).toBe('{"symbol":"AAPL","price":1}');
  });

  it("when a found entry is stored from its body's bytes, then the bytes are those of the stored string, with or without parts", () => {
    const parts = { data: { from: 23, to: 50 }, source: 'yahoo', updatedAt: '2026-11-26T16:00:00.000Z' };
    const body = Buffer.from(BODY);
    expect(Buffer.from(encodeFoundEntryBytes(undefined, body, 5000)).toString('utf8')).toBe(encodeEntry({ outcome: 'found', body: BODY }, 5000));
    expect(Buffer.from(encodeFoundEntryBytes(parts, body, 5000)).toString('utf8')).toBe(encodeEntry({ outcome: 'found', body: BODY, parts }, 5000));
  });

  it('when a refusal is stored, then it reads back as the same typed refusal, with no body', () => {
    const refusal = { reason: 'too-many-candles', carrier: 'answer', candles: 7200, atLeast: false } as const;
    const stored = encodeEntry({ outcome: 'refused', refusal }, 1000);

    expect(stored.includes('\n')).toBe(false);
    expect(decodeEntry(stored, 2000, NOW)).toEqual<CacheEntry>({ value: { outcome: 'refused', refusal }, freshUntilMs: NOW + 1000, staleUntilMs: NOW + 2000 });
  });

  it('when a body is not a JSON object, then it still reads back unchanged (nothing is told by its first byte)', () => {
    expect(decodeEntry(encodeEntry({ outcome: 'found', body: '[]' }, 0), 1000, NOW)?.value).toEqual({ outcome: 'found', body: '[]' });
    expect(decodeEntry(encodeEntry({ outcome: 'found', body: 'line one\nline two' }, 0), 1000, NOW)?.value).toEqual({ outcome: 'found', body: 'line one\nline two' });
  });

  it("when the format before's strings are read (a bare body, its markers, its tagged headers), then each is a miss", () => {
    expect(decodeEntry(BODY, 1000, NOW)).toBeUndefined();
    expect(decodeEntry('!unknown', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('!too-many:7200', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('["found",null]\n{"a":1}', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('["refused",{"reason":"too-many-candles","carrier":"answer","candles":7200,"atLeast":false}]', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('', 1000, NOW)).toBeUndefined();
  });

  it('when a header is damaged or names what this release does not write, then the entry is a miss, never a wrong answer', () => {
    expect(decodeEntry('{"outcome":"refused","graceMs":0,"refusal":{"reason":"too-many-candles","carrier":"answer","candles":"many","atLeast":false}}', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('{"outcome":"found","graceMs":0,"parts":{"data":{"from":23,"to":9999},"source":"yahoo","updatedAt":"x"}}\n{"a":1}', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('{"outcome":"found","graceMs":-1,"parts":null}\n{}', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('{"outcome":"found","parts":null}\n{}', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('{"outcome":"gone","graceMs":0}\n{}', 1000, NOW)).toBeUndefined();
    expect(decodeEntry('{not json', 1000, NOW)).toBeUndefined();
  });
});
