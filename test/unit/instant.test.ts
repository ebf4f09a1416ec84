import { describe, expect, it } from 'vitest';
import { isoInstant, parseInstant } from '../../src/domain/instant.js';

describe('parseInstant', () => {
  it('when a date or a date-time exists, then it is its epoch ms (a date is midnight UTC)', () => {
    expect(parseInstant('2024-02-29')).toBe(Date.UTC(2024, 1, 29));
    expect(parseInstant('2026-11-02T10:00:00Z')).toBe(Date.UTC(2026, 10, 2, 10));
    expect(parseInstant('2026-11-02T10:00:00.250+01:00')).toBe(Date.UTC(2026, 10, 2, 9, 0, 0, 250));
    expect(parseInstant('2026-11-02T23:59:59-05:30')).toBe(Date.UTC(2026, 10, 3, 5, 29, 59));
  });

  it('when a day, an hour or an offset does not exist, or the text is not ISO 8601, then undefined', () => {
    for (const text of ['2023-02-29', '2030-02-30', '2030-04-31', '2030-13-01', '2030-01-01T24:00:00Z', '2030-01-01T10:60:00Z', '2030-01-01T10:00:61Z', '2030-01-01T10:00:00+24:00', '2030-1-2', 'tomorrow', '2030-01-01 10:00', '']) {
      expect(parseInstant(text), text).toBeUndefined();
    }
  });
});

describe('parseInstant across years 0000 to 9999', () => {
  it('when the year is below 100, then it is that year, not 19xx', () => {
    expect(parseInstant('0001-01-01')).toBe(-62_135_596_800_000);
    expect(new Date(parseInstant('0001-01-01')!).toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(new Date(parseInstant('0099-12-31T23:59:59Z')!).toISOString()).toBe('0099-12-31T23:59:59.000Z');
    expect(new Date(parseInstant('0050-06-15T12:00:00+02:00')!).toISOString()).toBe('0050-06-15T10:00:00.000Z');
    expect(new Date(parseInstant('0000-01-01')!).toISOString()).toBe('0000-01-01T00:00:00.000Z');
  });

  it('when the year is 0100 or later, then it is parsed as before', () => {
    expect(new Date(parseInstant('0100-01-01')!).toISOString()).toBe('0100-01-01T00:00:00.000Z');
    expect(parseInstant('1999-12-31T23:59:59.999Z')).toBe(Date.UTC(1999, 11, 31, 23, 59, 59, 999));
    expect(new Date(parseInstant('9999-12-31T23:59:59Z')!).toISOString()).toBe('9999-12-31T23:59:59.000Z');
  });

  it('when a leap day is asked of a year below 100, then it exists only in that year\'s calendar', () => {
    // 0004 is a leap year; 0100 is not (a century), 0400 is.
    expect(new Date(parseInstant('0004-02-29')!).toISOString()).toBe('0004-02-29T00:00:00.000Z');
    expect(parseInstant('0003-02-29')).toBeUndefined();
    expect(parseInstant('0100-02-29')).toBeUndefined();
    expect(new Date(parseInstant('0400-02-29')!).toISOString()).toBe('0400-02-29T00:00:00.000Z');
  });

  it('when the text carries fractions or offsets, then they agree with Date.parse for years Date.parse reads right', () => {
    for (const text of ['2026-11-02T10:00:00.1Z', '2026-11-02T10:00:00.123456Z', '2026-11-02T10:00:00-00:00', '2026-11-02T00:30:00+05:45', '2026-11-02T10:00Z', '1970-01-01T00:00:00Z']) {
      expect(parseInstant(text), text).toBe(Date.parse(text));
    }
  });

  it('when a five-digit or signed year is sent, then undefined (outside ISO 8601 without an agreed expansion)', () => {
    for (const text of ['10000-01-01', '+002026-01-01', '-0001-01-01']) expect(parseInstant(text), text).toBeUndefined();
  });
});

describe('isoInstant', () => {
  it('when the instant is in years 0000 to 9999, then it is toISOString character for character', () => {
    const edges = [0, 1, -1, 999, 86_399_999, 86_400_000, -62_167_219_200_000, -62_167_219_200_001, 253_402_300_799_999, Date.UTC(2000, 1, 29), Date.UTC(2100, 1, 28, 23, 59, 59, 999), Date.UTC(1900, 2, 1)];
    // Every day of 1600 to 2400 at a time of day that walks the fields, and a spread over the whole range.
    for (let day = Date.UTC(1600, 0, 1) / 86_400_000, i = 0; day < Date.UTC(2400, 0, 1) / 86_400_000; day++, i++) edges.push(day * 86_400_000 + ((i * 7_777_777) % 86_400_000));
    for (let i = 0; i < 20_000; i++) edges.push(-62_167_219_200_000 + Math.floor(((i * 2_654_435_761) % 1_000_003) / 1_000_003 * 315_569_519_999_999));
    const wrong = edges.filter((ms) => isoInstant(ms) !== new Date(ms).toISOString());
    expect(edges.length).toBeGreaterThan(300_000);
    expect(wrong.map((ms) => [ms, isoInstant(ms), new Date(ms).toISOString()])).toEqual([]);
  });

  it('when the instant is outside years 0000 to 9999 or not a whole millisecond, then it is what toISOString says (throws for none)', () => {
    for (const ms of [-62_167_219_200_001 - 86_400_000, 253_402_300_800_000, 8.64e15, 1.5, -0.5]) expect(isoInstant(ms)).toBe(new Date(ms).toISOString());
    expect(() => isoInstant(Number.NaN)).toThrow(RangeError);
  });
});
