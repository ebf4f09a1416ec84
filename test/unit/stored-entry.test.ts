import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, encodeFoundEntryBytes, type StoredEntry } from '../../src/services/stored-entry.js';

const BODY = '{"success":true,"data":{"symbol":"AAPL","price":1},"source":"yahoo","updated_at":"2026-11-26T16:00:00.000Z"}';

describe('stored entries of the representation cache', () => {
  it('when a body without parts is stored, then the stored string is the body itself and reads back as found', () => {
    const stored = encodeEntry({ outcome: 'found', body: BODY });

    expect(stored).toBe(BODY);
    expect(decodeEntry(stored)).toEqual({ outcome: 'found', body: BODY });
  });

  it('when a body with parts is stored, then the parts read back as typed fields and the body comes back byte for byte', () => {
    const parts = { data: { from: 23, to: 50 }, source: 'yahoo', updatedAt: '2026-11-26T16:00:00.000Z' };
    const stored = encodeEntry({ outcome: 'found', body: BODY, parts });

    const entry = decodeEntry(stored);
    expect(entry).toEqual({ outcome: 'found', body: BODY, parts });
    expect(entry?.outcome === 'found' && entry.body.slice(entry.parts!.data.from, entry.parts!.data.to)).toBe('{"symbol":"AAPL","price":1}');
  });

  it('when a found entry is stored from its body\'s bytes, then the bytes are those of the stored string, with or without parts, the body not copied when it needs no header', () => {
    const parts = { data: { from: 23, to: 50 }, source: 'yahoo', updatedAt: '2026-11-26T16:00:00.000Z' };
    const body = Buffer.from(BODY);
    const bare = encodeFoundEntryBytes(undefined, body);
    expect(bare).toBe(body);
    expect(Buffer.from(encodeFoundEntryBytes(parts, body)).toString('utf8')).toBe(encodeEntry({ outcome: 'found', body: BODY, parts }));
    const list = '[1,2]';
    expect(Buffer.from(encodeFoundEntryBytes(undefined, Buffer.from(list))).toString('utf8')).toBe(encodeEntry({ outcome: 'found', body: list }));
  });

  it('when a refusal is stored, then it reads back as the same typed refusal, with no body', () => {
    const refusal = { reason: 'too-many-candles', carrier: 'answer', candles: 7200, atLeast: false } as const;
    const stored = encodeEntry({ outcome: 'refused', refusal });

    expect(stored.startsWith('{')).toBe(false);
    expect(decodeEntry(stored)).toEqual({ outcome: 'refused', refusal });
  });

  it('when a body is not a JSON object, then it is stored with a header and still reads back unchanged', () => {
    const stored = encodeEntry({ outcome: 'found', body: '[]' });

    expect(decodeEntry(stored)).toEqual({ outcome: 'found', body: '[]' });
  });

  it("when the release before's unknown marker is read, then it is an unknown answer; its refusal marker and other strings are misses", () => {
    expect(decodeEntry('!unknown')).toEqual<StoredEntry>({ outcome: 'unknown' });
    expect(decodeEntry('!too-many:7200')).toBeUndefined();
    expect(decodeEntry('old')).toBeUndefined();
    expect(decodeEntry('')).toBeUndefined();
  });

  it('when a header is damaged or names what this release does not write, then the entry is a miss, never a wrong answer', () => {
    expect(decodeEntry('["refused",{"reason":"too-many-candles","carrier":"answer","candles":"many","atLeast":false}]')).toBeUndefined();
    expect(decodeEntry('["refused",{"reason":"something-else"}]')).toBeUndefined();
    expect(decodeEntry('["found",{"data":{"from":23,"to":9999},"source":"yahoo","updatedAt":"x"}]\n{"a":1}')).toBeUndefined();
    expect(decodeEntry('["gone",null]\n{}')).toBeUndefined();
    expect(decodeEntry('[not json')).toBeUndefined();
  });
});
