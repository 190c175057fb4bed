import t from 'tap';
import { randomBytes } from 'node:crypto';
import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { httpSend } from '../helpers/http-request.js';
import { startDecodingUpstream, type DecodingUpstream } from '../helpers/decoding-upstream.js';

/**
 * The one gate (README "Routes", the path rule; "WebSockets"; "Behind nginx,
 * Caddy, Traefik or Envoy"): the same cases through the three ways in, a
 * proxied request, a WebSocket upgrade and a forward-auth question. The
 * upstreams read paths as a WSGI application does (`%61dmin` is `admin`,
 * `%2F` is `/`), and the `/` route's honours X-Original-URL as Symfony and
 * IIS do, so a path the gateway and the upstream read differently shows as
 * a request that reached the admin application past `allow`.
 */

type Way = 'proxy' | 'upgrade' | 'forward-auth';
const WAYS: Way[] = ['proxy', 'upgrade', 'forward-auth'];

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

t.test('one gate: every way in decides on the path the upstream reads', async (t) => {
  const admin = await startDecodingUpstream();
  const web = await startDecodingUpstream({ honourOriginalUrl: true });
  const h = await startHarness({
    extraClaims: { alice: { groups: ['admins'] }, bob: { groups: ['staff'] } },
    config: {
      forwardAuth: { trustedProxies: ['127.0.0.1/32'] },
      routes: [
        { path: '/admin', upstream: admin.url, allow: { claims: { groups: ['admins'] } }, websocket: true, headers: { 'X-Forwarded-User': 'sub' } },
        { path: '/', upstream: web.url, auth: 'optional', websocket: true, headers: { 'X-Forwarded-User': 'sub' } },
      ],
    },
  });
  t.teardown(async () => {
    await h.close();
    await admin.close();
    await web.close();
  });
  const alice = (await signIn(h.url, { user: 'alice' })).cookie;
  const bob = (await signIn(h.url, { user: 'bob' })).cookie;

  /** Sends `target` (raw, as written) the given way; an accepted upgrade is 101, then closed. */
  async function send(way: Way, target: string, cookie: string, headers: OutgoingHttpHeaders = {}): Promise<Answer> {
    if (way === 'forward-auth') {
      const answer = await httpSend(h.url, { path: '/forward-auth', headers: { 'x-forwarded-method': 'GET', 'x-forwarded-uri': target, cookie, ...headers } });
      return { status: answer.status, headers: answer.headers, body: answer.body.toString('utf8') };
    }
    if (way === 'proxy') {
      const answer = await httpSend(h.url, { path: target, headers: { cookie, ...headers } });
      return { status: answer.status, headers: answer.headers, body: answer.body.toString('utf8') };
    }
    return upgrade(target, { cookie, ...headers });
  }

  function upgrade(target: string, headers: OutgoingHttpHeaders): Promise<Answer> {
    const { hostname, port } = new URL(h.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest({
        host: hostname,
        port,
        path: target,
        agent: false,
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-key': randomBytes(16).toString('base64'),
          'sec-websocket-version': '13',
          origin: h.url,
          ...headers,
        },
      });
      req.on('upgrade', (res, socket) => {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  function forget(...upstreams: DecodingUpstream[]): void {
    for (const upstream of upstreams) upstream.read.length = 0;
  }

  const refusedForBob: Array<[string, number, string]> = [
    ['/%61dmin/panel', 403, 'an encoded unreserved character is decoded before matching'],
    ['/%61%64%6D%69%6E/panel', 403, 'every letter encoded'],
    ['/admin;x=1/panel', 403, 'a ";" parameter is ignored for matching'],
    ['/;x/admin/panel', 403, 'a segment that is only a parameter'],
    ['//admin/panel', 403, 'an empty segment'],
    ['/admin%2Fpanel', 400, 'an encoded "/"'],
    ['/admin%2fpanel', 400, 'an encoded "/" in lower case'],
    ['/admin%252Fpanel', 400, 'a doubly encoded "/"'],
    ['/admin%25252Fpanel', 400, 'a triply encoded "/"'],
    ['/x/%2e%2e/admin/panel', 400, 'an encoded ".." segment'],
    ['/x/%2e%2e%2fadmin/panel', 400, 'an encoded ".." and "/"'],
    ['/x/..;/admin/panel', 400, 'a ".." segment with a parameter (Tomcat reads "..")'],
    ['/x/%252e%252e/admin', 400, 'a doubly encoded ".." segment'],
    ['/x/./admin', 400, 'a "." segment'],
    ['/x%5Cadmin', 400, 'an encoded backslash'],
    ['/x%255Cadmin', 400, 'a doubly encoded backslash'],
    ['/x\\admin', 400, 'a raw backslash'],
    ['/x%C0%AFadmin', 400, 'bytes that are not UTF-8 (an overlong "/")'],
    ['/x%zzadmin', 400, 'invalid percent-encoding'],
    ['/x%2', 400, 'a truncated percent-encoding'],
  ];

  for (const way of WAYS) {
    t.test(`${way}: paths the upstream would read as /admin, or that cannot be read one way`, async (t) => {
      for (const [target, status, what] of refusedForBob) {
        forget(admin, web);
        const answer = await send(way, target, bob);
        t.equal(answer.status, status, `${target}: ${what}`);
        t.notOk('authorization' in answer.headers, `${target}: no token in the answer`);
        t.equal(admin.read.length + web.read.length, 0, `${target}: nothing reached an upstream`);
        if (status === 400 && way !== 'upgrade') {
          t.equal(answer.headers['cache-control'], 'no-store', `${target}: the gateway's error answer`);
          t.equal(answer.headers['x-content-type-options'], 'nosniff');
          t.notOk(answer.body.includes('admin'), `${target}: the path is not echoed`);
        }
      }
    });

    t.test(`${way}: an admin reaches the admin upstream, which receives exactly the normalised path`, async (t) => {
      const cases: Array<[string, string]> = [
        ['/%61dmin/panel', '/admin/panel'],
        ['/admin;v=1/panel', '/admin;v=1/panel'],
        ['/admin/%7Euser/a%20b', '/admin/~user/a%20b'],
      ];
      for (const [target, normal] of cases) {
        forget(admin, web);
        const answer = await send(way, target, alice);
        t.equal(answer.status, way === 'upgrade' ? 101 : 200, target);
        t.equal(web.read.length, 0, `${target}: the optional route's upstream saw nothing`);
        if (way === 'forward-auth') {
          t.match(answer.headers.authorization, /^Bearer /, `${target}: the admin route's answer carries the token`);
          t.equal(answer.headers['x-forwarded-user'], 'alice');
          continue;
        }
        t.equal(admin.read.length, 1, `${target}: the admin upstream got it`);
        t.equal(admin.read[0]?.target, normal, `${target}: the upstream received ${normal}`);
        t.equal(admin.read[0]?.headers['x-forwarded-user'], 'alice');
      }
    });
  }

  for (const way of ['proxy', 'upgrade'] as const) {
    t.test(`${way}: override headers and identity-header spellings never reach the upstream`, async (t) => {
      forget(admin, web);
      const spoofed = {
        'X-Original-URL': '/admin/panel',
        'X-Rewrite-URL': '/admin/panel',
        'X-Original-Method': 'DELETE',
        'X-HTTP-Method-Override': 'DELETE',
        'X-HTTP-Method': 'DELETE',
        'X-Method-Override': 'DELETE',
        'X_Forwarded_User': 'alice',
        'x_forwarded_USER': 'alice',
        'X-FORWARDED-USER': 'alice',
        'X_Original_URL': '/admin/panel',
        'X_Request_Id': 'chosen-by-the-client',
      };
      const answer = await send(way, '/public', bob, spoofed);
      t.equal(answer.status, way === 'upgrade' ? 101 : 200);
      t.equal(web.read.length, 1);
      const seen = web.read[0]!;
      t.equal(seen.path, '/public', 'the upstream acts on the path the gateway decided on');
      for (const name of Object.keys(seen.headers)) {
        t.notOk(/^x[-_](original[-_](url|method)|rewrite[-_]url|http[-_]method([-_]override)?|method[-_]override)$/i.test(name), `${name} removed`);
        t.notOk(/^x_/i.test(name), `${name}: no underscore spelling of a gateway header passes`);
      }
      t.equal(seen.headers['x-forwarded-user'], 'bob', 'the identity header is the gateway\'s own');
      t.not(seen.headers['x-request-id'], undefined, 'the upstream gets the request id');
      t.equal(admin.read.length, 0);
    });
  }

  t.test('forward-auth: both forms of the original request, or one repeated, are refused unless they agree', async (t) => {
    const disagree = await send('forward-auth', '/public', bob, { 'x-original-url': '/admin/panel' });
    t.equal(disagree.status, 400, 'X-Forwarded-Uri and the browser\'s X-Original-URL disagree');
    t.notOk('authorization' in disagree.headers);
    const methods = await send('forward-auth', '/admin/panel', alice, { 'x-original-method': 'DELETE' });
    t.equal(methods.status, 400, 'X-Forwarded-Method and X-Original-Method disagree');
    const agree = await send('forward-auth', '/admin/panel', alice, { 'x-original-url': '/admin/panel', 'x-original-method': 'get' });
    t.equal(agree.status, 200, 'both forms naming the same request pass');
    const repeated = await httpSend(h.url, {
      path: '/forward-auth',
      // node:http sends a flat [name, value, ...] list as it is, the header twice.
      headers: ['x-forwarded-uri', '/public', 'x-forwarded-uri', '/admin/panel', 'cookie', bob] as unknown as OutgoingHttpHeaders,
    });
    t.equal(repeated.status, 400, 'X-Forwarded-Uri twice');
    const original = await httpSend(h.url, { path: '/forward-auth', headers: { 'x-original-url': '/%61dmin/panel', 'x-original-method': 'GET', cookie: bob } });
    t.equal(original.status, 403, 'nginx\'s form goes through the same path rule');
    const envoy = await httpSend(h.url, { path: '/forward-auth/%61dmin/panel', headers: { cookie: bob } });
    t.equal(envoy.status, 403, 'Envoy\'s form (the original path after the endpoint\'s) too');
    const envoyAndHeader = await httpSend(h.url, { path: '/forward-auth/admin/panel', headers: { cookie: bob, 'x-forwarded-uri': '/public' } });
    t.equal(envoyAndHeader.status, 400, 'Envoy\'s path and a header that names another request');
  });
});
