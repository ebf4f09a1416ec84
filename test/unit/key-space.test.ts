/**
 * The key space pinned: every key and channel the service writes, exactly as instances of earlier
 * releases wrote them (a fleet mid-upgrade shares one Redis), and none with a hash tag.
 */
import { describe, expect, it } from 'vitest';
import { channels, FORMATS, keys, legacyChannels, QUOTA_KEY_PREFIX, SHARED_PREFIX, THROTTLE_KEY_PREFIX, thisFormatAndTheOneBefore, UPSTREAM_KEY_PREFIX, utcDay } from '../../src/domain/key-space.js';

describe('key space', () => {
  it('when the prefixes are read, then every one starts with mds:v1:', () => {
    expect(SHARED_PREFIX).toBe('mds:v1:');
    expect(THROTTLE_KEY_PREFIX).toBe('mds:v1:throttle:');
    expect(QUOTA_KEY_PREFIX).toBe('mds:v1:ratelimit:');
    expect(UPSTREAM_KEY_PREFIX).toBe('mds:v1:upstream:');
  });

  it('when cached representations are named, then entry and lock keys keep their shapes and the kind can be read back', () => {
    const key = keys.representation('quote', 'yahoo', 'AAPL');
    expect(key).toBe('mds:v2:quote:yahoo:AAPL');
    expect(keys.representation('indices', 'simulated', 'configured')).toBe('mds:v2:indices:simulated:configured');
    expect(keys.fillLock(key)).toBe('mds:v2:lock:quote:yahoo:AAPL');
    expect(keys.kindOf(key)).toBe('quote');
    expect(keys.kindOf(keys.representation('history', 'yahoo', '^GSPC:1d:1mo'))).toBe('history');
    // A flush takes the kind's entries in this format and the one before, and the one before's stale copies (a second key then).
    expect(keys.flushOf('quotes')).toEqual(['mds:v2:quotes:', 'mds:v1:quotes:', 'mds:v1:stale:quotes:']);
    // A flush by kind prefix takes the kind's keys and nothing of a kind that starts the same.
    expect(keys.flushOf('quote').some((prefix) => keys.representation('quotes', 'yahoo', 'AAPL,MSFT').startsWith(prefix))).toBe(false);
  });

  it('when locks, versions, quotas, throttles and upstream budgets are named, then each keeps its shape', () => {
    expect(keys.jobLock('yahoo', 'refresh-indices')).toBe('mds:v1:lock:job:yahoo:refresh-indices');
    expect(keys.quoteVersion('simulated', '^GSPC')).toBe('mds:v2:quote-version:simulated:^GSPC');
    expect(keys.unknownSymbols('yahoo', 63)).toBe('mds:v1:unknown:yahoo:63');
    expect(keys.unknownSymbolsFlushOf('yahoo')).toEqual(['mds:v1:unknown:yahoo:']);
    expect(keys.quota('ip:127.0.0.1')).toBe('mds:v1:ratelimit:ip:127.0.0.1');
    expect(keys.quota('ip:2001:db8:1:2::/64')).toBe('mds:v1:ratelimit:ip:2001:db8:1:2::/64');
    expect(keys.quota('user:admin')).toBe('mds:v1:ratelimit:user:admin');
    expect(keys.throttle.user('alice')).toBe('mds:v1:throttle:user:alice');
    expect(keys.throttle.ip('203.0.113.7')).toBe('mds:v1:throttle:ip:203.0.113.7');
    expect(keys.upstream.rps('yahoo', 1_764_000_000)).toBe('mds:v1:upstream:yahoo:rps:1764000000');
    expect(keys.upstream.pauseUntil('yahoo')).toBe('mds:v1:upstream:yahoo:pause-until');
    expect(keys.upstream.daily('alpha_vantage', 'k3y4', utcDay(Date.UTC(2026, 10, 25, 23, 59, 59)))).toBe('mds:v1:upstream:alpha_vantage:daily:k3y4:2026-11-25');
  });

  it('when usage is counted, then the caller keys and the keys by door and operation keep their shapes', () => {
    expect(keys.usage('2026-11-25', 'api-key', 'k1', 'requests')).toBe('mds:v1:usage:2026-11-25:api-key:k1:requests');
    expect(keys.usage('2026-11-25', 'user', 'alice', 'limited')).toBe('mds:v1:usage:2026-11-25:user:alice:limited');
    expect(keys.usage('2026-11-25', 'user', 'alice', 'points')).toBe('mds:v1:usage:2026-11-25:user:alice:points');
    expect(keys.usageOperation('2026-11-25', 'rest', 'getQuotes', 'points', 'api-key', 'static:0a1b2c3d')).toBe('mds:v1:usage-op:2026-11-25:rest:getQuotes:points:api-key:static:0a1b2c3d');
    expect(keys.usageOperation('2026-11-25', 'mcp', 'mcp:tools/list', 'requests', 'user', 'alice')).toBe('mds:v1:usage-op:2026-11-25:mcp:mcp:tools/list:requests:user:alice');
    // A caller's own keys and its keys by operation never meet, whatever its name holds.
    expect(keys.usage('2026-11-25', 'user', 'rest:getQuote', 'requests').startsWith('mds:v1:usage-op:')).toBe(false);
  });

  it('when channels are named, then each keeps its shape', () => {
    expect(channels.invalidate).toBe('mds:v1:bus:invalidate');
    expect(channels.identityChanged).toBe('mds:v1:bus:identity-changed');
    expect(channels.quoteEvents('yahoo')).toBe('mds:v2:quote-events:yahoo');
    expect(channels.live('yahoo')).toBe('mds:v2:live:yahoo');
    // The release before's names of the shared channels, bridged for one release.
    expect([...legacyChannels]).toEqual([
      ['mds:v1:bus:invalidate', 'mds:v1:invalidate'],
      ['mds:v1:bus:identity-changed', 'mds:v1:auth:identity-changed'],
    ]);
  });

  it('when a versioned family is named, then its keys start with its format version: a bump moves that family alone', () => {
    expect(keys.representation('quote', 'yahoo', 'AAPL').startsWith(`mds:v${FORMATS.representation}:`)).toBe(true);
    expect(keys.fillLock(keys.representation('quote', 'yahoo', 'AAPL')).startsWith(`mds:v${FORMATS.representation}:lock:`)).toBe(true);
    expect(keys.unknownSymbols('yahoo', 1).startsWith(`mds:v${FORMATS.unknownSymbols}:`)).toBe(true);
    expect(keys.quoteVersion('yahoo', 'AAPL').startsWith(`mds:v${FORMATS.quoteChanges}:`)).toBe(true);
    expect(channels.quoteEvents('yahoo').startsWith(`mds:v${FORMATS.quoteChanges}:`)).toBe(true);
    expect(channels.live('yahoo').startsWith(`mds:v${FORMATS.liveAnnouncements}:`)).toBe(true);
  });

  it('when a versioned family is flushed after a bump, then the format before is emptied too (the release before still fills it), and no older one', () => {
    expect(thisFormatAndTheOneBefore(1)).toEqual(['mds:v1:']);
    expect(thisFormatAndTheOneBefore(3)).toEqual(['mds:v3:', 'mds:v2:']);
  });

  it('when a key shared across releases is named, then it starts with the shared prefix, whatever the formats of the versioned families', () => {
    for (const key of [
      keys.quota('user:admin'),
      keys.throttle.pair('alice', '192.0.2.1'),
      keys.upstream.background('yahoo', 'd2026-11-25'),
      keys.usage('2026-11-25', 'user', 'alice', 'points'),
      keys.usageOperation('2026-11-25', 'rest', 'getQuote', 'requests', 'user', 'alice'),
      keys.jobLock('yahoo', 'refresh-indices'),
      keys.liveLease('yahoo', 'polygon'),
      channels.invalidate,
      channels.identityChanged,
    ]) {
      expect(key.startsWith(SHARED_PREFIX)).toBe(true);
    }
  });

  it('when any key is built, then it carries no hash tag: every command names one key, so any cluster slot may hold it', () => {
    const all = [
      keys.representation('quote', 'yahoo', 'AAPL'),
      keys.fillLock('mds:v2:quote:yahoo:AAPL'),
      keys.jobLock('yahoo', 'refresh-indices'),
      keys.quoteVersion('yahoo', 'AAPL'),
      keys.unknownSymbols('yahoo', 0),
      keys.quota('user:admin'),
      keys.throttle.user('alice'),
      keys.throttle.ip('192.0.2.1'),
      keys.upstream.rps('yahoo', 1),
      keys.upstream.pauseUntil('yahoo'),
      keys.upstream.daily('fmp', 'abcd', '2026-11-25'),
      keys.usage('2026-11-25', 'user', 'alice', 'points'),
      keys.usageOperation('2026-11-25', 'ws', 'ws:subscribe', 'limited', 'user', 'alice'),
    ];
    for (const key of all) expect(key).not.toMatch(/[{}]/);
  });
});
