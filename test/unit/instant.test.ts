import { describe, expect, it } from 'vitest';
import { parseInstant } from '../../src/domain/instant.js';

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
