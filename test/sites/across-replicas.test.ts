import t from 'tap';
import { redisMissing } from '../helpers/redis.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';
import { SitesBrowser } from '../helpers/sites-browser.js';
import { startReplicas } from '../redis/replicas.js';

/**
 * README "Several sites" with two replicas on one real redis-server: a
 * hand-off code is single use on every replica (the store's claim, not a
 * replica's memory), and one logout on one replica ends the browser's
 * sessions on every site as every replica sees them.
 */
t.test('hand-off and logout across two replicas', { skip: redisMissing }, async (t) => {
  const app = await startScriptedUpstream();
  const grafana = await startScriptedUpstream();
  t.teardown(() => Promise.all([app.close(), grafana.close()]));
  const { h, gateways } = await startReplicas(t, 2, {
    publicHost: 'auth.localhost',
    config: {
      sites: [
        { host: 'app.localhost', routes: [{ path: '/', upstream: app.url }] },
        { host: 'grafana.localhost', routes: [{ path: '/', upstream: grafana.url }] },
      ],
    },
  });
  const port = new URL(h.url).port;
  const ports = [port, new URL(gateways[1]!.address).port];
  // Every URL names publicUrl's port, as the browser sees it; `browser.port` is the replica a load balancer picked.
  const site = (name: string, path = '/') => `http://${name}.localhost:${port}${path}`;

  const browser = new SitesBrowser(ports[0]!);
  const handoff = await browser.signInThrough(t, h.url, site('app', '/a'));

  // The same code on both replicas at once: exactly one session.
  const racer = new SitesBrowser(ports[1]!);
  const [first, second] = await Promise.all([browser.get(handoff.href), racer.get(handoff.href)]);
  t.strictSame([first.status, second.status].sort(), [302, 400], `one use wins (${first.status}, ${second.status})`);
  const winner = first.status === 302 ? browser : racer;
  const loser = first.status === 302 ? racer : browser;
  t.notOk(loser.session('app.localhost'), 'the other gets no session');
  t.ok(winner.session('app.localhost'));
  for (const replica of ports) {
    browser.port = replica;
    t.equal((await browser.get(handoff.href)).status, 400, `used, on replica ${replica}`);
  }

  // The browser (which holds the sign-in host's cookie) gets grafana's session on replica 1.
  if (winner !== browser) browser.cookies.set('app.localhost', new Map(winner.cookies.get('app.localhost')));
  browser.port = ports[1]!;
  const toGrafana = await browser.get((await browser.get(site('grafana', '/g'))).headers.location!);
  t.equal((await browser.get(toGrafana.headers.location!)).status, 302);
  for (const replica of ports) {
    browser.port = replica;
    t.equal((await browser.get(site('app', '/a'))).status, 200, `app on replica ${replica}`);
    t.equal((await browser.get(site('grafana', '/g'))).status, 200, `grafana on replica ${replica}`);
  }

  // Logout on app through replica 0: both sites and the sign-in host are signed out on both replicas.
  browser.port = ports[0]!;
  t.equal((await browser.get(site('app', '/logout'), { 'sec-fetch-site': 'same-origin' })).status, 302);
  const kept = new SitesBrowser(ports[1]!);
  for (const [host, jar] of browser.cookies) kept.cookies.set(host, new Map(jar));
  // The cookies as they were before the logout cleared them in this browser: a stolen copy must not work either.
  kept.cookies.get('grafana.localhost')!.set('session_id', browser.session('grafana.localhost')!);
  for (const replica of ports) {
    kept.port = replica;
    t.equal((await kept.get(site('grafana', '/g'), { accept: 'application/json', 'sec-fetch-mode': 'cors' })).status, 401, `grafana signed out on replica ${replica}`);
    t.equal((await kept.get(`${h.url}/session`, { accept: 'application/json' })).status, 401, `the sign-in host signed out on replica ${replica}`);
  }
});
