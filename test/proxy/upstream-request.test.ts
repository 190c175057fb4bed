import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';

/**
 * README "How it works", what the upstream receives from a valid session with a fresh
 * token, and README "What the browser sees", the response streamed back unchanged: bearer injection,
 * cookie stripping, X-Forwarded-*, hop-by-hop headers, method/path/query/body,
 * Set-Cookie filtering, large bodies both ways.
 */
t.test('requests of a signed-in user as the upstream sees them', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const watch = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  const accessToken = watch.issued.at(-1)!.accessToken!;
  const publicHost = new URL(h.url).host;
  const lastReceived = () => h.upstream.received.at(-1)!;

  t.test("the browser's Authorization is replaced by the user's bearer token", async (t) => {
    for (const authorization of [undefined, 'Basic dXNlcjpwYXNz', 'Bearer forged-token', `Bearer ${accessToken}x`]) {
      const response = await fetch(`${h.url}/api/headers`, { headers: { cookie, ...(authorization ? { authorization } : {}) } });
      t.equal(response.status, 200, `with Authorization ${authorization}`);
      const text = await response.text();
      t.notOk(text.includes(accessToken), 'the demo upstream never shows the token to the browser');
      t.equal((JSON.parse(text) as Record<string, string>).authorization, `Bearer …(${accessToken.length} characters, never shown)`, 'only its length');
      t.equal(lastReceived().headers.authorization, `Bearer ${accessToken}`, 'the stored access token, nothing else');
      t.match(lastReceived(), { active: true, sub: 'alice' });
      t.equal(lastReceived().rawHeaders.filter((name) => name.toLowerCase() === 'authorization').length, 1, 'one Authorization header');
    }
  });

  t.test("the gateway's cookies are stripped, the others kept in order", async (t) => {
    const cases: Array<[string, string | undefined]> = [
      [`theme=dark; ${cookie}; session_id_login=sealed; lang=en`, 'theme=dark; lang=en'],
      [`${cookie};session_id_login=x;a=1;b=2`, 'a=1; b=2'],
      [`${cookie}; session_id_login=x`, undefined],
      [cookie, undefined],
    ];
    for (const [sent, expected] of cases) {
      const response = await fetch(`${h.url}/api/headers`, { headers: { cookie: sent } });
      t.equal(response.status, 200);
      const seen = (await response.json()) as Record<string, string>;
      t.equal(seen.cookie, expected, `Cookie: ${sent.replace(cookie, 'session_id=…')}`);
      t.notOk(JSON.stringify(lastReceived().headers).includes(cookie.split('=')[1]!), 'the session id never reaches the upstream');
    }
  });

  t.test('X-Forwarded-* come from publicUrl; incoming ones are replaced (trustProxy false)', async (t) => {
    const response = await fetch(`${h.url}/api/headers`, {
      headers: {
        cookie,
        'x-forwarded-for': '203.0.113.9',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-proto': 'https',
        'x-forwarded-port': '443',
        'x-forwarded-prefix': '/admin',
        forwarded: 'for=203.0.113.9;host=evil.example;proto=https',
      },
    });
    const seen = (await response.json()) as Record<string, string>;
    t.equal(seen['x-forwarded-for'], '127.0.0.1', 'the client address the gateway saw, alone');
    t.equal(seen['x-forwarded-proto'], 'http', "publicUrl's scheme");
    t.equal(seen['x-forwarded-host'], publicHost, "publicUrl's host");
    t.notOk('x-forwarded-port' in seen, 'other incoming X-Forwarded-* are dropped');
    t.notOk('x-forwarded-prefix' in seen);
    t.notOk('forwarded' in seen, 'so is Forwarded');
    const names = lastReceived().rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
    t.equal(names.filter((name) => name === 'x-forwarded-for').length, 1, 'one X-Forwarded-For');
  });

  t.test('hop-by-hop request headers, and those Connection names, are not forwarded', async (t) => {
    const response = await httpSend(h.url, {
      path: '/api/headers',
      headers: {
        cookie,
        connection: 'keep-alive, X-Hop-Secret, x-other-hop',
        'x-hop-secret': 'must-not-pass',
        'x-other-hop': 'nor-this',
        'keep-alive': 'timeout=5, max=100',
        'proxy-connection': 'keep-alive',
        te: 'trailers',
        trailer: 'x-checksum',
        upgrade: 'h2c',
        // node:http sends a Trailer header only with a chunked body.
        'transfer-encoding': 'chunked',
        'x-end-to-end': 'kept',
      },
    });
    t.equal(response.status, 200);
    const seen = JSON.parse(response.body.toString('utf8')) as Record<string, string>;
    for (const name of ['x-hop-secret', 'x-other-hop', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']) {
      t.notOk(name in seen, `${name} is not forwarded`);
    }
    t.notMatch(seen.connection ?? '', /hop/i, 'Connection does not carry the browser’s list');
    t.equal(seen['x-end-to-end'], 'kept', 'end-to-end headers pass');
  });

  t.test('method, path, query, headers and body pass unchanged', async (t) => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const body = JSON.stringify({ method, text: 'grüße ✓', n: 42 });
      const path = `/api/echo?a=1&b=%20two&b=3&c=%C3%A9&empty=&flag`;
      const response = await fetch(`${h.url}${path}`, {
        method,
        headers: { cookie, 'content-type': 'application/json; charset=utf-8', 'x-custom': 'kept', accept: 'application/json' },
        body,
      });
      t.equal(response.status, 200, method);
      t.strictSame(await response.json(), { method, body });
      const received = lastReceived();
      t.equal(received.method, method);
      t.equal(received.url, path, 'path and query byte for byte');
      t.equal(received.headers['content-type'], 'application/json; charset=utf-8');
      t.equal(received.headers['x-custom'], 'kept');
    }
    const get = await fetch(`${h.url}/api/me?x=%2F..%2Fy`, { headers: { cookie } });
    t.equal(get.status, 200);
    t.equal(lastReceived().url, '/api/me?x=%2F..%2Fy');
    const missing = await fetch(`${h.url}/api/status?code=404`, { headers: { cookie } });
    t.equal(missing.status, 404, "the upstream's own status comes back");
    t.strictSame(await missing.json(), { status: 404 }, "with the upstream's body");
  });

  t.test("an upstream Set-Cookie with a gateway cookie name is dropped, the others pass", async (t) => {
    for (const name of ['session_id', 'session_id_login']) {
      const response = await fetch(`${h.url}/api/set-cookie?name=${name}`, { headers: { cookie } });
      t.equal(response.status, 200);
      t.strictSame(response.headers.getSetCookie(), ['upstream_pref=1; Path=/'], `${name} dropped`);
    }
    const other = await fetch(`${h.url}/api/set-cookie?name=cart`, { headers: { cookie } });
    t.strictSame(other.headers.getSetCookie(), ['cart=from-upstream; Path=/', 'upstream_pref=1; Path=/']);
    t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie } })).status, 200, 'the session is untouched');
  });

  t.test('large bodies are streamed both ways intact', async (t) => {
    const uploadBytes = 24 * 1024 * 1024;
    const chunk = randomBytes(1024 * 1024);
    const upload = await fetch(`${h.url}/api/upload`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/octet-stream' },
      body: Readable.toWeb(Readable.from((function* () {
        for (let sent = 0; sent < uploadBytes; sent += chunk.length) yield chunk;
      })())) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    t.equal(upload.status, 200);
    t.strictSame(await upload.json(), { bytes: uploadBytes }, 'every byte of a chunked 24 MiB upload arrived');

    // text/plain: Fastify's own parser for it would buffer the body and refuse it over 1 MiB.
    const text = randomBytes(3 * 1024 * 1024).toString('base64');
    const echoed = await fetch(`${h.url}/api/echo`, { method: 'POST', headers: { cookie, 'content-type': 'text/plain' }, body: text });
    t.equal(echoed.status, 200);
    const { body } = (await echoed.json()) as { body: string };
    t.equal(sha256(body), sha256(text), 'a 4 MiB body comes back with the same hash');

    const downloadBytes = 32 * 1024 * 1024 + 7;
    const download = await fetch(`${h.url}/api/large?bytes=${downloadBytes}`, { headers: { cookie } });
    t.equal(download.status, 200);
    t.equal(download.headers.get('content-length'), String(downloadBytes), "the upstream's Content-Length");
    const hash = createHash('sha256');
    let length = 0;
    for await (const piece of download.body as unknown as AsyncIterable<Uint8Array>) {
      hash.update(piece);
      length += piece.length;
    }
    t.equal(length, downloadBytes);
    t.equal(hash.digest('hex'), sha256('x'.repeat(downloadBytes)), 'a 32 MiB download has the same hash');
  });
});

function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
