import { describe, expect, it } from 'vitest';
import { addressGroup } from '../../src/domain/address-group.js';

describe('addressGroup', () => {
  it('when the address is IPv4, then it is its own group', () => {
    expect(addressGroup('203.0.113.7')).toBe('203.0.113.7');
  });

  it('when two IPv6 addresses share their first 64 bits, then they are one group; another /64 is another', () => {
    const a = addressGroup('2001:db8:1:2::1');
    expect(a).toBe('2001:db8:1:2::/64');
    expect(addressGroup('2001:0db8:0001:0002:ffff:eeee:dddd:cccc')).toBe(a);
    expect(addressGroup('2001:db8:1:3::1')).not.toBe(a);
  });

  it('when an IPv4 peer arrives on a dual-stack socket (::ffff:a.b.c.d), then it counts as the IPv4 address', () => {
    expect(addressGroup('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressGroup('::ffff:203.0.113.8')).not.toBe(addressGroup('::ffff:203.0.113.7'));
  });

  it('when the value is not an address, then it is returned unchanged', () => {
    expect(addressGroup('unknown')).toBe('unknown');
    expect(addressGroup('not:an:address:at:all')).toBe('not:an:address:at:all');
  });
});
