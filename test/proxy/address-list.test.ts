import t from 'tap';
import { AddressList } from '../../src/http/address-list.js';
import { invalidAddressEntries } from '../../src/config/addresses.js';

/** The matching behind `server.trustProxy` and `forwardAuth.trustedProxies` (src/http/address-list.ts). */
t.test('addresses and CIDRs of both families; IPv4 seen on a dual-stack socket matches as IPv4', async (t) => {
  const list = new AddressList(['10.0.0.0/8', '192.168.1.5', 'fd00::/8', '::1']);
  for (const address of ['10.1.2.3', '::ffff:10.1.2.3', '192.168.1.5', '::FFFF:192.168.1.5', 'fd12::7', '::1']) t.ok(list.has(address), address);
  for (const address of ['11.0.0.1', '192.168.1.6', 'fe80::1', '::2', '::ffff:11.0.0.1', 'proxy.internal', '', undefined]) t.notOk(list.has(address), String(address));
});

t.test('entries that are neither an address nor a CIDR are named by index', async (t) => {
  t.strictSame(invalidAddressEntries(['10.0.0.0/8', '10.0.0.0/', '10.0.0.0/x', '1.2.3.4/33', 'fd00::/129', 'fd00::/128', 'localhost', '10.0.0.0/08']), [1, 2, 3, 4, 6]);
  t.throws(() => new AddressList(['localhost']), /not an address or CIDR: localhost/);
});
