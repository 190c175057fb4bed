import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from '../config/config-helpers.js';

/** `withKeys` with a `sites` list beside the sections. */
function keys(extra: { server?: Record<string, unknown>; sites?: unknown }): Record<string, unknown> {
  const { sites, ...sections } = extra;
  return { ...withKeys(sections as Record<string, Record<string, unknown>>), ...(sites === undefined ? {} : { sites }) };
}

/** README "Several sites": what `check` refuses in `sites`, and what it accepts. */

const route = { path: '/', upstream: 'http://127.0.0.1:3000' };

t.test('two sites with one host are refused, whatever the case or a trailing dot', async (t) => {
  t.strictSame(
    problemsOf(keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host: 'app.example.com', routes: [route] }, { host: 'App.Example.com.', routes: [route] }] })),
    ['sites[1].host: App.Example.com. is also sites[0].host; one host serves one site'],
  );
  t.equal(
    loadConfig(keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host: 'app.example.com', routes: [route] }, { host: 'app.example.com:8443', routes: [route] }] }), {}).sites?.length,
    2,
    'another port is another host',
  );
});

t.test('a site on publicUrl\'s host is refused: the sign-in host serves the top-level routes', async (t) => {
  t.strictSame(problemsOf(keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host: 'auth.example.com', routes: [route] }] })), [
    "sites[0].host: auth.example.com is publicUrl's host, the sign-in host, whose routes are the top-level routes; give the site another host name, or move its routes to the top-level routes",
  ]);
});

t.test('http is accepted only on loopback names, for publicUrl and for sites', async (t) => {
  t.strictSame(problemsOf(keys({ server: { publicUrl: 'http://auth.localhost:8080' }, sites: [{ host: 'app.example.com', routes: [route] }] })), [
    "sites[0].host: app.example.com would be served over http (publicUrl's scheme), which is allowed only on localhost, *.localhost, 127.0.0.0/8 and [::1]; use an https publicUrl",
  ]);
  for (const host of ['app.localhost', 'localhost:8081', '127.0.0.2', '[::1]:8082']) {
    t.equal(loadConfig(keys({ server: { publicUrl: 'http://auth.localhost:8080' }, sites: [{ host, routes: [route] }] }), {}).sites?.[0]?.host, host, `${host} over http`);
  }
  t.equal(loadConfig(withKeys({ server: { publicUrl: 'http://auth.localhost:8080' } }), {}).server.publicUrl, 'http://auth.localhost:8080', 'an http publicUrl on *.localhost');
});

t.test('a site\'s routes obey the rules of routes', async (t) => {
  t.strictSame(
    problemsOf(
      keys({
        server: { publicUrl: 'https://auth.example.com' },
        sites: [{ host: 'app.example.com', routes: [route, { path: '/', upstream: 'ftp://x' }, { path: '/login', upstream: 'http://127.0.0.1:1' }] }],
      }),
    ).filter((problem) => problem.startsWith('sites[0].routes[')).length >= 3,
    true,
  );
});

t.test('a host that is not a host name is refused by the schema', async (t) => {
  for (const host of ['https://app.example.com', 'app.example.com/x', 'app example.com', '', 'app.example.com:port']) {
    const problems = problemsOf(keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host, routes: [route] }] }));
    t.match(problems, [/^sites\[0\]\.host: must be a host name/], JSON.stringify(host));
  }
  t.match(problemsOf(keys({ sites: [{ host: 'app.example.com' }] })), [/^sites\[0\]/], 'routes are required');
  t.match(problemsOf(keys({ sites: [] })), [/^sites: must be a list of sites/]);
});

t.test('a site naming a provider that is not configured is refused; default and a configured name are accepted', async (t) => {
  t.strictSame(problemsOf(keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host: 'app.example.com', provider: 'partners', routes: [route] }] })), [
    'sites[0].provider: partners is not a provider; name an entry of providers, or leave it out for provider',
  ]);
  t.equal(loadConfig(keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host: 'app.example.com', provider: 'default', routes: [route] }] }), {}).sites?.[0]?.provider, 'default');
  const document = { ...keys({ server: { publicUrl: 'https://auth.example.com' }, sites: [{ host: 'app.example.com', provider: 'partners', routes: [route] }] }), providers: { partners: { issuer: 'https://partners.example.com', clientId: 'gh', clientSecret: 'partners-secret' } } };
  t.equal(loadConfig(document, {}).sites?.[0]?.provider, 'partners');
});
