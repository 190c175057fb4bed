import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { startScriptedUpstream } from '../helpers/scripted-upstream.js';

/**
 * README "What the browser sees" "the response (status, headers, body) is streamed back unchanged"
 * and README "How it works" "hop-by-hop headers are never forwarded, in either direction",
 * against an upstream scripted to answer with odd statuses and hop-by-hop
 * headers; then README "What the browser sees" "upstream unreachable: 502".
 */
t.test('what the browser receives from the upstream', async (t) => {
  const upstream = await startScriptedUpstream();
  t.teardown(() => upstream.close());
  const h = await startHarness({ config: { upstream: upstream.url } });
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'alice' });

  t.test('status, headers and body come back unchanged', async (t) => {
    upstream.answer = (_req, res) => {
      res.writeHead(418, {
        'content-type': 'application/problem+json',
        'cache-control': 'private, max-age=7',
        etag: '"v1"',
        'x-upstream': 'one',
        'www-authenticate': 'Bearer realm="api"',
        'set-cookie': ['a=1; Path=/', 'b=2; HttpOnly'],
      });
      res.end('{"title":"teapot"}');
    };
    const response = await httpSend(h.url, { path: '/teapot', headers: { cookie } });
    t.equal(response.status, 418);
    t.equal(response.headers['content-type'], 'application/problem+json');
    t.equal(response.headers['cache-control'], 'private, max-age=7');
    t.equal(response.headers.etag, '"v1"');
    t.equal(response.headers['x-upstream'], 'one');
    t.equal(response.headers['www-authenticate'], 'Bearer realm="api"');
    t.strictSame(response.headers['set-cookie'], ['a=1; Path=/', 'b=2; HttpOnly']);
    t.equal(response.body.toString(), '{"title":"teapot"}');
    t.equal(upstream.seen.at(-1)?.headers.authorization?.startsWith('Bearer '), true, 'the request carried a bearer token');
  });

  t.test('hop-by-hop response headers, and those Connection names, are not forwarded', async (t) => {
    upstream.answer = (_req, res) => {
      res.setHeader('connection', 'keep-alive, X-Upstream-Hop');
      res.setHeader('x-upstream-hop', 'secret');
      res.setHeader('keep-alive', 'timeout=99, max=7');
      res.setHeader('proxy-connection', 'keep-alive');
      res.setHeader('upgrade', 'h2c');
      res.setHeader('trailer', 'x-checksum');
      res.setHeader('x-end-to-end', 'kept');
      res.setHeader('content-type', 'text/plain');
      res.addTrailers({ 'x-checksum': 'abc' });
      res.end('body');
    };
    const response = await httpSend(h.url, { path: '/hop', headers: { cookie } });
    t.equal(response.status, 200);
    t.equal(response.body.toString(), 'body');
    t.equal(response.headers['x-end-to-end'], 'kept');
    for (const name of ['x-upstream-hop', 'proxy-connection', 'upgrade', 'trailer']) {
      t.notOk(response.headerNames.includes(name), `${name} is not forwarded`);
    }
    t.not(response.headers['keep-alive'], 'timeout=99, max=7', "the upstream's Keep-Alive is not forwarded");
    t.notMatch(response.headers.connection ?? '', /hop/i, "Connection does not carry the upstream's list");
  });

  t.test('an unreachable upstream gives 502, and the session lives on', async (t) => {
    await upstream.close();
    const api = await fetch(`${h.url}/api/me`, { headers: { cookie } });
    t.equal(api.status, 502);
    t.match(await api.json(), { error: 'bad_gateway' });
    t.notOk(api.headers.getSetCookie().some((value) => value.startsWith('session_id=')), 'the session cookie is left alone');
    const page = await httpSend(h.url, { path: '/', headers: { cookie, accept: 'text/html' } });
    t.equal(page.status, 502);
    t.match(page.headers['content-type'], /^text\/html/);
    t.equal((await fetch(`${h.url}/session`, { headers: { cookie } })).status, 200, 'still signed in');
  });
});
