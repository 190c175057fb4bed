import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';
import { SitesBrowser } from '../helpers/sites-browser.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { signOutAtAuthorizationServer } from '../lifecycle/logout-token.js';

/**
 * README "Several sites": a back-channel logout (the user signs out at the
 * AS, which POSTs its signed logout token to publicUrl's
 * /backchannel-logout) ends the browser's sessions on every site, not only
 * the sign-in host's: a site's session carries the sign-in's `sid`. The
 * sign-in host is 127.0.0.1 here, which the AS (a Node process) can reach
 * by name; the sites are *.localhost names reached with a Host header.
 */
t.test('a back-channel logout ends the sessions of every site', async (t) => {
  const app = await startScriptedUpstream();
  const grafana = await startScriptedUpstream();
  const h = await startHarness({
    backchannelLogout: true,
    config: {
      sites: [
        { host: 'app.localhost', routes: [{ path: '/', upstream: app.url }] },
        { host: 'grafana.localhost', routes: [{ path: '/', upstream: grafana.url }] },
      ],
    },
  });
  t.teardown(async () => {
    await h.close();
    await Promise.all([app.close(), grafana.close()]);
  });
  const port = new URL(h.url).port;
  const site = (name: string, path = '/') => `http://${name}.localhost:${port}${path}`;
  const deliveries: string[] = [];
  h.as.provider.on('backchannel.success', () => deliveries.push('ok'));
  h.as.provider.on('backchannel.error', (_ctx: unknown, err: Error) => deliveries.push(`error: ${err.message}`));

  const atAs = new CookieJar();
  const browser = new SitesBrowser(port);
  const handoff = await browser.signInThrough(t, h.url, site('app', '/a'), 'carol', atAs);
  t.equal((await browser.get(handoff.href)).status, 302);
  const toGrafana = await browser.get((await browser.get(site('grafana', '/g'))).headers.location!);
  t.equal((await browser.get(toGrafana.headers.location!)).status, 302);
  const api = { accept: 'application/json', 'sec-fetch-mode': 'cors' };
  t.equal((await browser.get(site('app', '/a'), api)).status, 200);
  t.equal((await browser.get(site('grafana', '/g'), api)).status, 200);

  await signOutAtAuthorizationServer(h.as, atAs);
  t.strictSame(deliveries, ['ok'], 'the AS delivered one logout token and the gateway answered 200');
  t.equal((await browser.get(site('app', '/a'), api)).status, 401, 'app signed out');
  t.equal((await browser.get(site('grafana', '/g'), api)).status, 401, 'grafana signed out');
  t.equal((await browser.get(`${h.url}/session`, api)).status, 401, 'the sign-in host signed out');
});
