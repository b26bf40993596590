/**
 * Address allowlists as typed (src/domain/addresses.ts): addresses and CIDR ranges of both
 * families in their stored form, and a range whose address has bits past its prefix refused
 * with both readings, on every input (keys and SCHOOL_DATA_TRUSTED_PROXIES alike).
 * @store-free
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.js';
import { parseAllowlist, throttledAddress, withoutPort } from '../../src/domain/addresses.js';

describe('address allowlists as typed', () => {
  it('keeps addresses and ranges whose address is the range\'s first, in their stored form', () => {
    assert.deepEqual(parseAllowlist('203.0.113.7, 10.0.0.0/8, 2001:DB8::/32, 1.2.3.4/32, 0.0.0.0/0, ::/0, 10.1.0.0/016'), {
      ok: true,
      entries: ['203.0.113.7', '10.0.0.0/8', '2001:db8::/32', '1.2.3.4/32', '0.0.0.0/0', '::/0', '10.1.0.0/16'],
    });
  });

  it('refuses a range with address bits past its prefix, naming both readings', () => {
    for (const [typed, range] of [['10.0.0.1/8', '10.0.0.0/8'], ['192.168.1.77/24', '192.168.1.0/24'], ['2001:db8::1/32', '2001:db8::/32'], ['1.2.3.4/0', '0.0.0.0/0']] as const) {
      const parsed = parseAllowlist(`127.0.0.1, ${typed}`);
      assert.ok(!parsed.ok, typed);
      const address = typed.slice(0, typed.indexOf('/'));
      assert.equal(parsed.reason, `allow entry "${typed}" has address bits past its /${typed.slice(typed.indexOf('/') + 1)}: write ${range} for the range, or ${address} alone for the one address`);
    }
  });

  it('reads a client address a proxy wrote with its port without it, and leaves any other text as it is', () => {
    for (const [reported, address] of [
      ['203.0.113.7:1234', '203.0.113.7'],
      ['[2001:db8::1]:443', '2001:db8::1'],
      ['[2001:db8::1]', '2001:db8::1'],
      ['203.0.113.7', '203.0.113.7'],
      ['2001:db8::1', '2001:db8::1'],
      ['::ffff:203.0.113.7', '::ffff:203.0.113.7'],
      ['999.0.113.7:80', '999.0.113.7:80'],
      ['203.0.113.7:65535', '203.0.113.7'],
      ['203.0.113.7:65536', '203.0.113.7:65536'],
      ['[2001:db8::1]:99999', '[2001:db8::1]:99999'],
      ['[not-an-address]:80', '[not-an-address]:80'],
      ['garbage', 'garbage'],
      ['', ''],
    ] as const) {
      assert.equal(withoutPort(reported), address, reported);
    }
  });

  it('counts an IPv6 client by its /64 for the sign-in throttle, an IPv4 one by itself', () => {
    for (const [address, counted] of [
      ['2001:db8:1:2:aaaa::1', '2001:db8:1:2::/64'],
      ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
      ['2001:DB8:0001:0002::9', '2001:db8:1:2::/64'],
      ['::1', '0:0:0:0::/64'],
      ['::ffff:203.0.113.7', '203.0.113.7'],
      ['203.0.113.7', '203.0.113.7'],
      ['garbage', 'garbage'],
    ] as const) {
      assert.equal(throttledAddress(address), counted, address);
    }
  });

  it('holds SCHOOL_DATA_TRUSTED_PROXIES to the same rule', () => {
    assert.throws(() => loadConfig({ SCHOOL_DATA_TRUSTED_PROXIES: '10.0.0.1/8' }), /^ConfigError: SCHOOL_DATA_TRUSTED_PROXIES entry "10\.0\.0\.1\/8" has address bits past its \/8: write 10\.0\.0\.0\/8/);
  });
});
