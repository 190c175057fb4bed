import t from 'tap';
import { configWarnings } from '../../src/config/checks.js';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/**
 * Mistakes that `check` used to accept and that failed later, in
 * production (README "Configuration"): each is refused with what to do, or
 * warned about, at once.
 */

t.test('an http publicUrl on a host other than loopback is refused: the session cookie would not be Secure', async (t) => {
  for (const host of ['app.example.com', '10.0.0.7', 'gateway']) {
    t.strictSame(problemsOf(withKeys({ server: { publicUrl: `http://${host}:8080` } })), [
      `server.publicUrl: must use https on ${host} (http is allowed only on localhost, *.localhost, 127.0.0.0/8 and [::1]); terminate TLS in front of gatehouse and give the https URL browsers use`,
    ]);
  }
  for (const url of ['http://localhost:8080', 'http://127.0.0.1:8080', 'http://[::1]:8080', 'https://app.example.com']) {
    t.equal(loadConfig(withKeys({ server: { publicUrl: url } }), {}).server.publicUrl, url, `${url} is accepted`);
  }
});

t.test('idleTimeout or cookieMaxAge longer than ttl: accepted, with a warning that says why it does not work', async (t) => {
  const config = loadConfig(withKeys({ session: { ttl: '8h', idleTimeout: '12h', cookieMaxAge: '7d' } }), {});
  t.strictSame(configWarnings(config), [
    'session.idleTimeout: 12h is longer than session.ttl (8h): a session always ends at ttl, so the idle limit never applies',
    'session.cookieMaxAge: 7d is longer than session.ttl (8h): the cookie outlives its session; set it to ttl or less',
  ]);
  t.strictSame(configWarnings(loadConfig(withKeys({ session: { ttl: '8h', idleTimeout: '8h', cookieMaxAge: '8h' } }), {})), [], 'equal: no warning');
  t.strictSame(configWarnings(loadConfig(withKeys({}), {})), [], 'the defaults: no warning');
  t.strictSame(configWarnings(loadConfig(withKeys({ session: { cookieMaxAge: 0 } }), {})), [], 'a browser-session cookie: no warning');
});

t.test('scopes as a space-separated string are read as a list (RFC 6749 §3.3)', async (t) => {
  t.strictSame(loadConfig(withKeys({ provider: { scopes: 'openid profile  email offline_access' } }), {}).provider.scopes, [
    'openid',
    'profile',
    'email',
    'offline_access',
  ]);
  t.strictSame(loadConfig(withKeys({ provider: { scopes: '${SCOPES}' } }), { SCOPES: 'openid email' }).provider.scopes, ['openid', 'email'], 'from the environment too');
  t.strictSame(loadConfig(withKeys({ provider: { scopes: 'openid' } }), {}).provider.scopes, ['openid'], 'one scope');
});

t.test('an unknown key gets the nearest known key, or the section it belongs in', async (t) => {
  t.strictSame(problemsOf(withKeys({ sesion: { ttl: '1h' } })), ['sesion: unknown key; did you mean session?']);
  t.strictSame(problemsOf(withKeys({ session: { cookiMaxAge: '1h' } })), ['session.cookiMaxAge: unknown key; did you mean session.cookieMaxAge?']);
  t.strictSame(problemsOf(withKeys({ provider: { scope: ['openid'] } })), ['provider.scope: unknown key; did you mean provider.scopes?']);
  t.strictSame(problemsOf(withKeys({ provider: { IssuerUrl: 'x' } })), ['provider.IssuerUrl: unknown key (check its spelling and section)']);
  t.strictSame(problemsOf(withKeys({ server: { store: 'memory://' } })), ['server.store: unknown key; it belongs in session (session.store)']);
});

t.test('a duration that cannot be read is echoed back', async (t) => {
  t.strictSame(problemsOf(withKeys({ session: { ttl: '1 week' } })), [
    'session.ttl: must be a duration: seconds, or a number with a unit such as 90s, 30m, 24h, 7d; got "1 week"',
  ]);
});

t.test('identity headers on a public route, and websocket: true with forwardAuth.only: accepted, with a warning that says why they do nothing', async (t) => {
  const routes = [
    { path: '/assets', upstream: 'http://web:3000', auth: 'public', headers: { 'X-Forwarded-User': 'sub' } },
    { path: '/chat', upstream: 'http://chat:3000', websocket: true },
  ];
  t.strictSame(configWarnings(loadConfig({ ...withKeys({ forwardAuth: { trustedProxies: ['127.0.0.1'], only: true } }), routes }, {})), [
    'routes[0].headers: a public route reads no session, so its identity headers are never sent (only removed from requests); use auth: optional to send them to signed-in users',
    'routes[1].websocket: with forwardAuth.only the proxy in front carries WebSockets; gatehouse only decides the handshake and cannot close a socket when its session ends (README "Behind nginx, Caddy, Traefik or Envoy")',
  ]);
  t.strictSame(configWarnings(loadConfig({ ...withKeys({}), routes: [{ ...routes[0], auth: 'optional' }, routes[1]] }, {})), [], 'optional headers, and a proxied WebSocket: no warning');
});
