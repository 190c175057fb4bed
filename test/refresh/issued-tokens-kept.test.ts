import t from 'tap';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startHarness, type Harness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';
import { redisMissing, startRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait-for.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { shortLoginTokens, storedTokens, waitUntilExpired } from '../helpers/refresh.js';

/**
 * A loopback proxy between the gateway and the real AS that, for refresh
 * grants only, runs `onRefreshAnswer` once the AS has answered (so the AS
 * has already rotated the refresh token) and may rewrite the answer.
 */
async function startRefreshWatch(h: Harness) {
  const watch = {
    onRefreshAnswer: undefined as undefined | ((body: Record<string, unknown>) => Promise<Record<string, unknown>>),
    close: async () => {},
  };
  const target = h.asProxy.target;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const requestBody = Buffer.concat(chunks);
      const isRefresh = (req.url ?? '').startsWith('/token') && requestBody.toString('latin1').includes('grant_type=refresh_token');
      const upstream = httpRequest(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers }, (answer) => {
        const hook = watch.onRefreshAnswer;
        if (!isRefresh || hook === undefined) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        const body: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => body.push(chunk));
        answer.on('end', () => {
          void hook(JSON.parse(Buffer.concat(body).toString('utf8')) as Record<string, unknown>).then((rewritten) => {
            const text = JSON.stringify(rewritten);
            const headers = { ...answer.headers, 'content-length': String(Buffer.byteLength(text)) };
            delete headers['transfer-encoding'];
            res.writeHead(answer.statusCode ?? 502, headers).end(text);
          });
        });
      });
      upstream.on('error', () => res.destroy());
      upstream.end(requestBody);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h.asProxy.target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  watch.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return watch;
}

/**
 * README "What the browser sees" with refresh-token rotation (RFC 9700 §4.14.2): once the AS has
 * answered a refresh, the old refresh token is spent. When something fails
 * after that, the new tokens are kept (and their write retried), so the next
 * refresh presents the new refresh token: the user stays signed in and the
 * AS never sees the old one again (which would revoke the grant).
 */
t.test('an unusable refresh answer keeps the rotated refresh token', async (t) => {
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2), rotateRefreshTokens: true });
  t.teardown(() => h.close());
  const watch = await startRefreshWatch(h);
  t.teardown(() => watch.close());
  const tokens = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'alice' });
  await waitUntilExpired(h, tokens.issued.at(-1)!.accessToken!);

  watch.onRefreshAnswer = async (body) => ({ ...body, token_type: 'DPoP' });
  const failed = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(failed.status, 503, 'a DPoP-bound answer is an AS error: 503');
  t.equal(h.as.grants.refreshToken, 1, 'the AS rotated the refresh token');
  watch.onRefreshAnswer = undefined;

  const next = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(next.status, 200, 'the next request refreshes with the new refresh token');
  t.match(await next.json(), { sub: 'alice' });
  t.equal(h.as.grants.refreshTokenErrors, 0, 'the AS never saw the spent refresh token again');
});

t.test('a store write that times out after the AS answered is retried, and the user stays signed in', { skip: redisMissing }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.close());
  const h = await startHarness({ accessTokenTtl: shortLoginTokens(2), rotateRefreshTokens: true, store: redis.url });
  t.teardown(() => h.close());
  const watch = await startRefreshWatch(h);
  t.teardown(() => watch.close());
  const tokens = watchTokenEndpoint(h.as);
  const { cookie } = await signIn(h.url, { user: 'bob' });
  await waitUntilExpired(h, tokens.issued.at(-1)!.accessToken!);

  let rotated = '';
  watch.onRefreshAnswer = async (body) => {
    rotated = body.refresh_token as string;
    // Redis stops taking writes for 3 s, longer than the store's 2 s call timeout.
    await redis.command('CLIENT', 'PAUSE', '3000', 'WRITE');
    return body;
  };
  const first = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  watch.onRefreshAnswer = undefined;
  t.equal(first.status, 200, 'the request goes on with the tokens the AS issued');
  t.equal(h.as.grants.refreshToken, 1);

  await waitFor('the refreshed record to reach the store', async () => (await storedTokens(h, 'bob').catch(() => null))?.refreshToken === rotated, 20_000);
  t.pass('the write was retried once Redis took writes again');
  const later = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(later.status, 200, 'the session still works');
  t.equal(h.as.grants.refreshToken, 1, 'without another refresh');
  t.equal(h.as.grants.refreshTokenErrors, 0, 'and the spent refresh token was never presented');
});
