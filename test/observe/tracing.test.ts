import t from 'tap';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAuthorizationServer } from '../../src/demo/authorization-server.js';
import { startUpstream } from '../../src/demo/upstream.js';
import { closeServer, listen } from '../../src/demo/listen.js';
import { CLIENT_ID, freePort, pseudonymOf } from '../helpers/harness.js';
import { watchTokenEndpoint } from '../helpers/authorization-server-watch.js';
import { approveAtAuthorizationServer, startLogin } from '../helpers/sign-in.js';
import { CookieJar } from '../helpers/cookie-jar.js';
import { ensureBuilt, spawnCli } from '../helpers/cli-process.js';

/**
 * README, "Tracing": the gateway started as in production (the CLI) with the
 * standard OTEL_* variables exports its spans with the real OTLP/HTTP
 * exporter (http/json) to a receiver this test runs. Checked: one server
 * span per request, parented by an incoming traceparent; the upstream call
 * and each AS call (discovery, token, refresh, revocation) as child spans;
 * the traceparent the upstream receives names the gateway's upstream span;
 * the route, status, user pseudonym and refresh outcome as attributes; and
 * no exported byte holds a token, cookie, session id, code, state, query
 * string or the user's name.
 */

t.setTimeout(120_000);

const SIGN_IN_TOKEN_SECONDS = 20;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: OtlpValue }>;
}
interface OtlpExport {
  resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: OtlpValue }> }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
}

const SERVER = 2;
const CLIENT = 3;

function attribute(span: OtlpSpan, key: string): string | number | boolean | undefined {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (value === undefined) return undefined;
  return value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue));
}

t.test('spans, their links, traceparent at the upstream, and no secret in any exported byte', async (t) => {
  // The OTLP receiver: every request body, byte for byte.
  const bodies: Buffer[] = [];
  const contentTypes: string[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.method === 'POST') {
        bodies.push(Buffer.concat(chunks));
        contentTypes.push(req.headers['content-type'] ?? '');
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const receiverUrl = await listen(receiver, '127.0.0.1', 0);
  t.teardown(() => closeServer(receiver));

  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const clientSecret = randomBytes(16).toString('base64url');
  // Sign-in tokens live 20 s, so the gateway refreshes them 10 s after the token request (the
  // skew is at most half the lifetime); refreshed ones 10 minutes. Generous: the machine may be slow.
  const as = await startAuthorizationServer({
    clients: [{ clientId: CLIENT_ID, clientSecret, authMethod: 'client_secret_post', redirectUris: [`${publicUrl}/callback`] }],
    accessTokenTtl: (ctx: KoaContextWithOIDC) => (ctx.oidc.params?.grant_type === 'refresh_token' ? 600 : SIGN_IN_TOKEN_SECONDS),
  });
  t.teardown(() => as.close());
  const watch = watchTokenEndpoint(as);
  const upstream = await startUpstream({
    introspectionEndpoint: `${as.listenUrl}/token/introspection`,
    clientId: as.introspection.clientId,
    clientSecret: as.introspection.clientSecret,
  });
  t.teardown(() => upstream.close());

  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-tracing-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sessionKey = randomBytes(32).toString('base64');
  writeFileSync(
    join(dir, 'gatehouse.yaml'),
    `server: {host: 127.0.0.1, port: ${port}, publicUrl: '${publicUrl}', shutdownGrace: 2s}
admin: {host: 127.0.0.1, port: 0}
provider: {issuer: '${as.url}', clientId: ${CLIENT_ID}, clientSecret: '\${GATEHOUSE_CLIENT_SECRET}'}
upstream: '${upstream.url}'
session: {store: 'memory://', encryptionKeys: ['\${GATEHOUSE_SESSION_KEY}']}
`,
  );
  ensureBuilt();
  const gateway = spawnCli(['--config', join(dir, 'gatehouse.yaml')], {
    GATEHOUSE_CLIENT_SECRET: clientSecret,
    GATEHOUSE_SESSION_KEY: sessionKey,
    LOG_LEVEL: 'debug',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'gatehouse-under-test',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  t.teardown(() => gateway.stop());
  // Generous: five developers share two cores.
  await gateway.waitForLog((line) => line.msg === 'listening', 60_000);
  t.ok(gateway.logs.some((line) => line.msg === 'tracing on: exporting spans over OTLP' && line.protocol === 'http/json'), 'start-up says tracing is on');

  // Sign in step by step, keeping the code and state the browser carried.
  const jar = new CookieJar();
  const { loginCookies, authorizationUrl } = await startLogin(publicUrl);
  jar.store(publicUrl, loginCookies);
  const callbackUrl = await approveAtAuthorizationServer(authorizationUrl, 'alice-the-user');
  const code = callbackUrl.searchParams.get('code')!;
  const state = callbackUrl.searchParams.get('state')!;
  const callback = await jar.fetch(callbackUrl);
  await callback.arrayBuffer();
  // After the token request: the refresh point is at most this plus half the lifetime.
  const signedInAt = Date.now();
  const sessionId = jar.get(publicUrl, 'session_id')!;
  t.ok(sessionId, 'signed in');
  const cookie = `session_id=${sessionId}`;

  // A proxied request carrying the caller's trace context and a query string with a secret.
  const callerTrace = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');
  const querySecret = randomBytes(12).toString('hex');
  const first = await fetch(`${publicUrl}/api/me?apikey=${querySecret}`, {
    headers: { cookie, traceparent: `00-${callerTrace}-${callerSpan}-01`, tracestate: 'caller=1' },
  });
  t.equal(first.status, 200);
  await first.arrayBuffer();
  const firstAtUpstream = upstream.received.find((r) => r.url.startsWith('/api/me?apikey='))!;

  // Past the refresh point: this request refreshes the access token first.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, signedInAt + (SIGN_IN_TOKEN_SECONDS / 2) * 1000 + 300 - Date.now())));
  const refreshed = await fetch(`${publicUrl}/api/me?n=2`, { headers: { cookie } });
  t.equal(refreshed.status, 200);
  await refreshed.arrayBuffer();
  t.equal(as.grants.refreshToken, 1, 'one refresh at the AS');
  const secondAtUpstream = upstream.received.find((r) => r.url === '/api/me?n=2')!;

  const logout = await fetch(`${publicUrl}/logout`, { headers: { cookie }, redirect: 'manual' });
  t.equal(logout.status, 302);
  await logout.arrayBuffer();

  t.strictSame(await gateway.stop(), { code: 0, signal: null }, 'SIGTERM exports what is buffered, then exits 0');
  t.ok(bodies.length > 0, 'the receiver got exports');
  t.ok(contentTypes.every((type) => type.startsWith('application/json')), 'http/json');

  const spans: OtlpSpan[] = [];
  for (const body of bodies) {
    const parsed = JSON.parse(body.toString('utf8')) as OtlpExport;
    for (const resourceSpans of parsed.resourceSpans) {
      const service = resourceSpans.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
      t.equal(service, 'gatehouse-under-test', 'OTEL_SERVICE_NAME names the service');
      for (const scope of resourceSpans.scopeSpans) spans.push(...scope.spans);
    }
  }
  const byId = new Map(spans.map((span) => [span.spanId, span]));
  const childrenOf = (parent: OtlpSpan) => spans.filter((span) => span.parentSpanId === parent.spanId && span.traceId === parent.traceId);
  const serverSpans = spans.filter((span) => span.kind === SERVER);

  t.test('discovery: an AS span with the HTTP call under it', async (t) => {
    const discovery = spans.find((span) => span.name === 'AS discovery');
    t.ok(discovery, 'AS discovery span');
    t.equal(attribute(discovery!, 'gatehouse.as.operation'), 'discovery');
    const http = childrenOf(discovery!).filter((span) => span.kind === CLIENT);
    t.ok(http.some((span) => String(attribute(span, 'url.full')).endsWith('/.well-known/openid-configuration')), 'GET of the metadata, a child');
  });

  t.test('the callback: one server span, the token call its child', async (t) => {
    const server = serverSpans.filter((span) => attribute(span, 'gatehouse.route') === 'callback');
    t.equal(server.length, 1, 'one server span for the one callback request');
    t.equal(attribute(server[0]!, 'url.path'), '/callback', 'path without code and state');
    t.equal(attribute(server[0]!, 'http.route'), '/callback');
    const token = childrenOf(server[0]!).find((span) => span.name === 'AS token');
    t.ok(token, 'AS token span under the callback span');
    t.ok(childrenOf(token!).some((span) => span.kind === CLIENT && attribute(span, 'http.request.method') === 'POST'), 'the POST to the token endpoint under it');
  });

  t.test('a proxied request: the caller parents the server span; the upstream span is its child and the upstream got its traceparent', async (t) => {
    const server = serverSpans.find((span) => span.traceId === callerTrace);
    t.ok(server, 'a server span in the caller trace');
    t.equal(server!.parentSpanId, callerSpan, 'its parent is the caller span');
    t.equal(attribute(server!, 'url.path'), '/api/me', 'no query string');
    t.equal(attribute(server!, 'gatehouse.route'), 'proxy');
    t.equal(attribute(server!, 'http.response.status_code'), 200);
    t.equal(attribute(server!, 'gatehouse.user'), pseudonymOf({ document: { session: { encryptionKeys: [sessionKey] } } }, 'alice-the-user'), 'the user pseudonym of the logs');
    t.equal(attribute(server!, 'gatehouse.refresh.outcome'), undefined, 'no refresh happened');
    const upstreamSpans = childrenOf(server!).filter((span) => span.kind === CLIENT);
    t.equal(upstreamSpans.length, 1, 'one upstream call');
    const upstreamSpan = upstreamSpans[0]!;
    t.equal(attribute(upstreamSpan, 'url.full'), `${upstream.url}/api/me`, 'its URL without the query');
    t.equal(attribute(upstreamSpan, 'http.response.status_code'), 200);
    // W3C Trace Context §3.3: tracestate travels on unchanged with the new traceparent.
    t.strictSame(
      traceHeaders(firstAtUpstream.headers),
      { traceparent: `00-${callerTrace}-${upstreamSpan.spanId}-01`, tracestate: 'caller=1' },
      'one traceparent, naming the upstream span, and the caller tracestate once',
    );
  });

  t.test('a refreshing request: the refresh is a child of its server span, with the outcome recorded', async (t) => {
    const server = serverSpans.find((span) => attribute(span, 'url.path') === '/api/me' && span.traceId !== callerTrace);
    t.ok(server, 'server span');
    t.equal(server!.parentSpanId ?? '', '', 'no incoming traceparent: a root span');
    t.equal(attribute(server!, 'gatehouse.refresh.outcome'), 'ok');
    const refresh = childrenOf(server!).find((span) => span.name === 'AS refresh');
    t.ok(refresh, 'AS refresh span under it');
    t.ok(childrenOf(refresh!).some((span) => span.kind === CLIENT && attribute(span, 'http.request.method') === 'POST'), 'the POST to the token endpoint under it');
    const upstreamSpan = childrenOf(server!).find((span) => span.kind === CLIENT)!;
    t.ok(upstreamSpan, 'the upstream call');
    t.strictSame(traceHeaders(secondAtUpstream.headers), { traceparent: `00-${server!.traceId}-${upstreamSpan.spanId}-01` });
  });

  t.test('logout: the revocation is a child of its server span', async (t) => {
    const server = serverSpans.find((span) => attribute(span, 'gatehouse.route') === 'logout');
    t.ok(server, 'server span');
    const revocation = childrenOf(server!).find((span) => span.name === 'AS revocation');
    t.ok(revocation, 'AS revocation span under it');
  });

  t.test('every span but the roots has its parent in the export', async (t) => {
    const orphans = spans.filter((span) => span.parentSpanId && !byId.has(span.parentSpanId) && span.parentSpanId !== callerSpan);
    t.strictSame(orphans.map((span) => span.name), []);
  });

  t.test('no secret in any exported byte', async (t) => {
    const exported = Buffer.concat(bodies).toString('utf8');
    const accessTokens = upstream.received.map((r) => r.headers.authorization?.replace(/^Bearer /, '')).filter((v): v is string => Boolean(v));
    t.ok(accessTokens.length >= 2, 'two access tokens seen upstream (before and after the refresh)');
    const secrets: Record<string, string> = {
      'session id': sessionId,
      code,
      state,
      'query value': querySecret,
      'client secret': clientSecret,
      'session key': sessionKey,
      'user id': 'alice-the-user',
      'cookie name=value': cookie,
    };
    for (const [index, token] of accessTokens.entries()) secrets[`access token ${index}`] = token;
    // What the AS issued and the gateway kept to itself: every refresh token, ID token and the PKCE verifier.
    const signIn = watch.issued.find((issued) => issued.grantType === 'authorization_code');
    t.ok(signIn?.refreshToken && signIn.idToken && signIn.codeVerifier, 'the sign-in issued a refresh token and an ID token for a PKCE verifier');
    t.ok(watch.issued.some((issued) => issued.grantType === 'refresh_token'), 'and a refresh happened');
    for (const [index, issued] of watch.issued.entries()) {
      if (issued.refreshToken) secrets[`refresh token ${index}`] = issued.refreshToken;
      if (issued.idToken) secrets[`ID token ${index}`] = issued.idToken;
      if (issued.accessToken) secrets[`issued access token ${index}`] = issued.accessToken;
      if (issued.codeVerifier) secrets[`PKCE verifier ${index}`] = issued.codeVerifier;
    }
    for (const [name, value] of Object.entries(secrets)) {
      t.notOk(exported.includes(value), `no ${name}`);
      t.notOk(exported.includes(encodeURIComponent(value)), `no ${name}, percent-encoded`);
    }
    for (const word of ['authorization', 'cookie', 'apikey', 'bearer', 'url.query', 'refresh_token', 'access_token']) {
      t.notOk(exported.toLowerCase().includes(word), `no "${word}"`);
    }
  });
});

function traceHeaders(headers: IncomingHttpHeaders): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => name === 'traceparent' || name === 'tracestate'));
}
