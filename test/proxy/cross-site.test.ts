import t, { type Test } from 'tap';
import { startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/**
 * SECURITY.md: an unsafe request (POST, PUT, PATCH, DELETE) to a proxied path is
 * refused with 403 and never reaches the upstream when its Origin is present
 * and not the publicUrl origin (`null` included) or `Sec-Fetch-Site` is
 * `cross-site`; with neither header it passes, unless a required custom
 * header is configured (`csrf.requiredHeader`); `csrf.allowedOrigins` adds
 * origins that may send them.
 */
const UNSAFE = ['POST', 'PUT', 'PATCH', 'DELETE'];

async function send(h: Harness, cookie: string, method: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${h.url}/api/echo`, { method, headers: { cookie, 'content-type': 'application/json', ...headers }, body: '{"transfer":100}' });
}

async function expectRefused(t: Test, h: Harness, cookie: string, headers: Record<string, string>): Promise<void> {
  for (const method of UNSAFE) {
    const before = h.upstream.received.length;
    const response = await send(h, cookie, method, headers);
    t.equal(response.status, 403, `${method} with ${JSON.stringify(headers)} is refused`);
    t.match(await response.json(), { error: 'forbidden' });
    t.equal(h.upstream.received.length, before, 'and never reaches the upstream');
  }
}

async function expectPassed(t: Test, h: Harness, cookie: string, headers: Record<string, string>): Promise<void> {
  for (const method of UNSAFE) {
    const before = h.upstream.received.length;
    const response = await send(h, cookie, method, headers);
    t.equal(response.status, 200, `${method} with ${JSON.stringify(headers)} passes`);
    t.strictSame(await response.json(), { method, body: '{"transfer":100}' });
    t.equal(h.upstream.received.length, before + 1, 'and reaches the upstream once');
  }
}

t.test('default: Origin and Sec-Fetch-Site decide', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const sameOrigin = h.url;

  t.test('cross-site unsafe requests are refused', async (t) => {
    const crossSite: Array<Record<string, string>> = [
      { origin: 'https://evil.example' },
      { origin: 'null' },
      { origin: sameOrigin.replace('127.0.0.1', 'localhost'), 'sec-fetch-site': 'same-site' },
      { origin: sameOrigin.replace('http:', 'https:') },
      { origin: `${sameOrigin}0` },
      { origin: 'https://evil.example', 'sec-fetch-site': 'same-origin' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' },
    ];
    for (const headers of crossSite) await expectRefused(t, h, cookie, headers);
  });

  t.test('without a session a cross-site request is refused all the same', async (t) => {
    const before = h.upstream.received.length;
    const response = await fetch(`${h.url}/api/echo`, { method: 'POST', headers: { origin: 'https://evil.example' }, body: 'x' });
    t.equal(response.status, 403);
    t.equal(h.upstream.received.length, before);
  });

  t.test('same-origin requests and requests with neither header pass', async (t) => {
    await expectPassed(t, h, cookie, { origin: sameOrigin });
    await expectPassed(t, h, cookie, { origin: sameOrigin, 'sec-fetch-site': 'same-origin' });
    await expectPassed(t, h, cookie, { 'sec-fetch-site': 'same-origin' });
    await expectPassed(t, h, cookie, { 'sec-fetch-site': 'none' });
    await expectPassed(t, h, cookie, {});
  });

  t.test('safe methods are never refused for their origin', async (t) => {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) {
      const before = h.upstream.received.length;
      const response = await fetch(`${h.url}/api/me`, { method, headers: { cookie, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' } });
      t.not(response.status, 403, method);
      t.match(h.upstream.received.slice(before), [{ method, active: true }], 'the upstream answers it (404 for a method it has no route for)');
    }
  });
});

t.test('csrf.allowedOrigins and csrf.requiredHeader', async (t) => {
  const spa = 'https://spa.example';
  const h = await startHarness({ config: { csrf: { allowedOrigins: [spa], requiredHeader: 'X-Requested-With' } } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'bob' });

  t.test('without the required header every unsafe request is refused', async (t) => {
    await expectRefused(t, h, cookie, {});
    await expectRefused(t, h, cookie, { origin: h.url });
    await expectRefused(t, h, cookie, { origin: spa });
  });

  t.test('with it, the publicUrl origin, an allowed origin, or no origin pass', async (t) => {
    const header = { 'x-requested-with': 'XMLHttpRequest' };
    await expectPassed(t, h, cookie, header);
    await expectPassed(t, h, cookie, { ...header, origin: h.url });
    await expectPassed(t, h, cookie, { ...header, origin: spa, 'sec-fetch-site': 'cross-site' });
  });

  t.test('with it, an origin not allowed is still refused', async (t) => {
    const header = { 'x-requested-with': 'XMLHttpRequest' };
    await expectRefused(t, h, cookie, { ...header, origin: 'https://evil.example' });
    await expectRefused(t, h, cookie, { ...header, origin: 'null' });
    await expectRefused(t, h, cookie, { ...header, 'sec-fetch-site': 'cross-site' });
  });
});
