import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './listen.js';
import { escapeHtml } from '../http/page-template.js';

/** Options of {@link startUpstream}. */
export interface UpstreamOptions {
  /** Default `127.0.0.1`. */
  host?: string;
  /** Default 0 (ephemeral). */
  port?: number;
  /** The authorization server's RFC 7662 introspection endpoint. */
  introspectionEndpoint: string;
  /** Introspection client, authenticated with `client_secret_basic`. */
  clientId: string;
  clientSecret: string;
  /**
   * Set by `gatehouse demo`: the home page then keeps itself up to date. It
   * names the user (from the gateway's `/session`), shows the access token's
   * refresh count, and asks `/api/me` again when the gateway is due to
   * refresh, so a newcomer sees the refresh happen. Without it the page asks
   * `/api/me` once, as tests that count upstream requests expect.
   */
  live?: {
    /** How many times the gateway refreshed this user's access token (the authorization server counts). */
    refreshes(sub: string): number;
    /** The gateway's `tokens.refreshSkew`, in seconds. */
    refreshSkew: number;
  };
}

/** One request as the upstream received it, rejected ones included. */
export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  /** The body as text; only its first 64 KiB, except on `/api/echo`. */
  body: string;
  /** Whether introspection said the bearer token is active. */
  active: boolean;
  sub?: string;
}

/** A running demo upstream. */
export interface Upstream {
  url: string;
  /** Every request so far, in arrival order; filled in as each is handled. */
  received: ReceivedRequest[];
  /** Closes the listener and every open connection. */
  close(): Promise<void>;
}

interface Introspection {
  active: boolean;
  sub?: string;
  scope?: string;
  client_id?: string;
  exp?: number;
  iat?: number;
}

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  record: ReceivedRequest;
  token: Introspection;
  live: UpstreamOptions['live'];
}

type Route = (exchange: Exchange) => Promise<void>;

const RECORDED_BODY_LIMIT = 64 * 1024;
const CHUNK_SIZE = 64 * 1024;
const LARGE_BODY_LIMIT = 1024 ** 3;
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const DIGITS = /^[0-9]{1,10}$/;
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

const routes = new Map<string, Route>([
  ['GET /', homePage],
  // A second page, so a sign-in can be seen to return to the page first asked for.
  ['GET /orders', homePage],
  ['GET /api/me', me],
  ['GET /api/headers', headers],
  ['GET /api/set-cookie', setCookie],
  ['GET /api/large', large],
  ['GET /api/status', status],
  ['POST /api/upload', upload],
  ...['POST', 'PUT', 'PATCH', 'DELETE'].map((method): [string, Route] => [`${method} /api/echo`, echo]),
]);

/** Routes that stream the request body in themselves. */
const bodyRoutes = new Set<Route>([echo, upload]);

/**
 * Starts the demo resource server: it accepts a request only with a bearer
 * token that the authorization server's introspection endpoint calls active
 * (asked on every request, no cache), and records every request it receives.
 *
 * @example
 * const upstream = await startUpstream({
 *   introspectionEndpoint: `${as.listenUrl}/token/introspection`,
 *   ...as.introspection,
 * });
 * // ... requests through the gateway ...
 * assert.equal(upstream.received.at(-1)?.sub, 'alice');
 * await upstream.close();
 */
export async function startUpstream(opts: UpstreamOptions): Promise<Upstream> {
  const received: ReceivedRequest[] = [];
  const introspect = introspector(opts);
  const server = createServer((req, res) => {
    handle(req, res, received, introspect, opts.live).catch((err: unknown) => failed(res, err));
  });
  const url = await listen(server, opts.host ?? '127.0.0.1', opts.port ?? 0);
  return { url, received, close: () => closeServer(server) };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  received: ReceivedRequest[],
  introspect: (token: string) => Promise<Introspection>,
  live: UpstreamOptions['live'],
): Promise<void> {
  const record: ReceivedRequest = {
    method: req.method ?? '',
    url: req.url ?? '',
    headers: req.headers,
    rawHeaders: req.rawHeaders,
    body: '',
    active: false,
  };
  received.push(record);
  const bearer = BEARER.exec(req.headers.authorization ?? '')?.[1];
  const token = bearer === undefined ? { active: false } : await introspect(bearer);
  record.active = token.active;
  record.sub = token.sub;
  const { pathname, searchParams } = new URL(record.url, 'http://upstream.invalid');
  const route = routes.get(`${record.method} ${pathname}`);
  if (!token.active || route === undefined || !bodyRoutes.has(route)) {
    record.body = (await readBody(req, RECORDED_BODY_LIMIT)).text;
  }
  if (!token.active) return invalidToken(res);
  const exchange = { req, res, query: searchParams, record, token, live };
  // A deep link the demo has no page for still went through the gateway: say
  // what arrived rather than answer a 404 that reads like a failure.
  await (route ?? echoRequest)(exchange);
}

function introspector(opts: UpstreamOptions): (token: string) => Promise<Introspection> {
  // RFC 6749 §2.3.1: the credentials are form-encoded before Basic encoding.
  const credentials = Buffer.from(`${formEncode(opts.clientId)}:${formEncode(opts.clientSecret)}`).toString('base64');
  return async (token) => {
    const response = await fetch(opts.introspectionEndpoint, {
      method: 'POST',
      headers: { authorization: `Basic ${credentials}`, accept: 'application/json' },
      body: new URLSearchParams({ token }),
    });
    if (!response.ok) throw new Error(`introspection answered ${response.status}`);
    const result = (await response.json()) as Introspection;
    return result.active === true ? result : { active: false };
  };
}

function formEncode(value: string): string {
  return encodeURIComponent(value).replace(/%20/g, '+');
}

/**
 * The signed-in page explains what just happened: who signed in, the access
 * token's remaining lifetime and refreshes, and what this request carried
 * (never the token itself: only its length). Its empty icon spares a favicon
 * request that would race a test's count of upstream requests.
 */
async function homePage({ req, res, token, live }: Exchange): Promise<void> {
  const user = escapeHtml(token.sub ?? '');
  const arrived = describeRequest(req);
  // In a script element only `<` can end it early (`</script>`).
  const state = JSON.stringify(tokenState(token, live)).replace(/</g, '\\u003c');
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>gatehouse demo: signed in as ${user}</title>
<style>${PAGE_STYLE}</style></head>
<body>
<main>
<h1>Signed in as ${user}</h1>
<p class="lead">This page comes from the <strong>demo upstream</strong>, the application behind the gateway. You signed in at the demo
authorization server; gatehouse kept the tokens on the server and added the access token to this request on its way here.</p>

<section aria-labelledby="who"><h2 id="who">Who you are</h2>
<dl><dt>User (sub)</dt><dd id="sub">${user}</dd>
<dt>Name</dt><dd id="name">${live ? 'loading&hellip;' : 'see <a href="/session">/session</a>'}</dd>
<dt>Email</dt><dd id="email">${live ? 'loading&hellip;' : 'see <a href="/session">/session</a>'}</dd>
<dt>Session ends</dt><dd id="session-ends">${live ? 'loading&hellip;' : 'see <a href="/session">/session</a>'}</dd></dl>
</section>

<section aria-labelledby="token"><h2 id="token">The access token</h2>
<p>Expires in <strong id="remaining" aria-live="off">${token.exp === undefined ? 'unknown' : `${Math.max(0, token.exp - Math.floor(Date.now() / 1000))} s`}</strong>.
Refreshed by the gateway <strong id="refreshes">${live ? String(live.refreshes(token.sub ?? '')) : 'n/a'}</strong> time(s) so far.</p>
<p id="refresh-note" role="status">${live ? `Shortly before it expires, the gateway trades its refresh token for a new access token on the next request, without a new sign-in. This page asks the API then, so you can watch it happen.` : 'The gateway refreshes it shortly before it expires, on the next request.'}</p>
</section>

<section aria-labelledby="received"><h2 id="received">What the upstream received</h2>
<table><tbody>
<tr><th scope="row">Authorization</th><td><code>${escapeHtml(arrived.authorization)}</code></td></tr>
<tr><th scope="row">Cookies</th><td><code>${escapeHtml(arrived.cookies.join(', ') || 'none')}</code> (the gateway's own session cookie is removed)</td></tr>
${Object.entries(arrived.forwarded)
  .map(([name, value]) => `<tr><th scope="row">${escapeHtml(name)}</th><td><code>${escapeHtml(value)}</code></td></tr>`)
  .join('\n')}
</tbody></table>
</section>

<section aria-labelledby="api"><h2 id="api">Call the API</h2>
<p>These buttons call the upstream's API with <code>fetch()</code>. The browser sends only its session cookie; the gateway adds the token.</p>
<p><button id="call" type="button">Call GET /api/me</button> <button id="echo" type="button">Send JSON to POST /api/echo</button></p>
<h3>GET /api/me</h3>
<pre id="me">loading...</pre>
<h3>POST /api/echo</h3>
<pre id="echoed"></pre>
</section>

<p class="note" role="note"><strong>Your browser never saw a token.</strong> It holds only an HttpOnly cookie with a random session id;
<code>document.cookie</code> on this page is <code id="document-cookie"></code>.</p>
<p><a href="/session">See your session (/session)</a> &middot; <a href="/logout">Sign out</a></p>
</main>
<script>
const live = ${live ? 'true' : 'false'};
let state = ${state};
let timer;
let stopped = false;
document.getElementById('document-cookie').textContent = JSON.stringify(document.cookie);
async function show(id, response) {
  const text = await response.text();
  document.getElementById(id).textContent = response.status + '\\n' + text;
  return { status: response.status, text };
}
function remaining() {
  return state.exp === undefined ? undefined : Math.max(0, Math.round(state.exp - state.now - (performance.now() - state.seenAt) / 1000));
}
function tick() {
  const left = remaining();
  document.getElementById('remaining').textContent = left === undefined ? 'unknown' : left + ' s';
  if (live && !stopped && left !== undefined && left <= state.refreshAt && !timer) {
    timer = setTimeout(() => { timer = undefined; callMe(); }, 1000);
  }
}
async function callMe() {
  const { status, text } = await show('me', await fetch('/api/me'));
  // Signed out or the session ended: stop asking; the reply is on the page.
  if (status !== 200) return void (stopped = true);
  const body = JSON.parse(text);
  const before = state.refreshes;
  state = { ...body, seenAt: performance.now() };
  if (live) {
    document.getElementById('refreshes').textContent = String(body.refreshes);
    if (body.refreshes > before) document.getElementById('refresh-note').textContent = 'The gateway just refreshed the access token (refresh ' + body.refreshes + '): a new token, a new lifetime, no sign-in.';
  }
  tick();
}
document.getElementById('call').addEventListener('click', () => callMe());
document.getElementById('echo').addEventListener('click', () => {
  fetch('/api/echo', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ hello: 'upstream', at: new Date().toISOString() }),
  }).then((response) => show('echoed', response));
});
state.seenAt = performance.now();
callMe();
setInterval(tick, 1000);
if (live) {
  fetch('/session').then((response) => response.ok ? response.json() : undefined).then((session) => {
    if (!session) return;
    document.getElementById('name').textContent = session.user.name ?? '(none)';
    document.getElementById('email').textContent = session.user.email ?? '(none)';
    document.getElementById('session-ends').textContent = new Date(session.expiresAt).toLocaleString();
  });
}
</script>
</body>
</html>
`);
}

/** Inline, so the page needs nothing but itself. */
const PAGE_STYLE = `body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}
main{max-width:46rem;margin:2rem auto;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.25rem}.lead{color:#333}
section{background:#fff;border:1px solid #d8dce1;border-radius:8px;padding:.5rem 1.25rem;margin:1rem 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse}th{text-align:left;padding:.2rem 1rem .2rem 0;vertical-align:top}
pre{background:#f0f2f5;padding:.5rem;border-radius:4px;white-space:pre-wrap;word-break:break-all}
button{font:inherit;padding:.4rem .9rem;border-radius:6px;border:1px solid #0b57d0;background:#0b57d0;color:#fff;cursor:pointer}
button:focus-visible,a:focus-visible{outline:3px solid #f4b400;outline-offset:2px}
.note{background:#e8f4ea;border:1px solid #9ccaa5;border-radius:8px;padding:.75rem 1rem}
a{color:#0b57d0}`;

/** What the page needs to count down and to know when the gateway will refresh. */
function tokenState(token: Introspection, live: UpstreamOptions['live']): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  // The gateway refreshes within refreshSkew of expiry, at most half the token's lifetime (README "Tokens").
  const lifetime = token.exp !== undefined && token.iat !== undefined ? token.exp - token.iat : undefined;
  const skew = live === undefined ? 0 : Math.min(live.refreshSkew, lifetime === undefined ? live.refreshSkew : lifetime / 2);
  return {
    now,
    exp: token.exp,
    refreshAt: Math.max(0, Math.floor(skew) - 1),
    refreshes: live === undefined ? undefined : live.refreshes(token.sub ?? ''),
  };
}

/**
 * The headers that show the gateway at work, without the token: the bearer
 * by its length only, cookies by name only, and the X-Forwarded-* headers.
 */
function describeRequest(req: IncomingMessage): { authorization: string; cookies: string[]; forwarded: Record<string, string> } {
  const cookies = (req.headers.cookie ?? '')
    .split(';')
    .map((pair) => pair.split('=')[0]!.trim())
    .filter((name) => name !== '');
  const forwarded: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith('x-forwarded-') && value !== undefined) forwarded[name] = String(value);
  }
  return {
    authorization: req.headers.authorization === undefined ? 'none' : describeAuthorization(req.headers.authorization),
    cookies,
    forwarded,
  };
}

const AUTHORIZATION = /^([A-Za-z]+) +(\S+) *$/;

/** `Bearer …(43 characters, never shown)`: the scheme and the credential's length, never the credential. */
function describeAuthorization(value: string): string {
  const match = AUTHORIZATION.exec(value);
  return match === null ? `…(${value.length} characters, never shown)` : `${match[1]} …(${match[2]!.length} characters, never shown)`;
}

async function me({ req, res, token, live }: Exchange): Promise<void> {
  sendJson(res, 200, {
    sub: token.sub,
    scope: token.scope,
    client_id: token.client_id,
    ...tokenState(token, live),
    received: describeRequest(req),
  });
}

/** Answers with the status asked for, so a test can see any upstream status pass through the gateway. */
async function status({ res, query }: Exchange): Promise<void> {
  const raw = query.get('code') ?? '';
  const code = Number(raw);
  if (!/^[2-5][0-9]{2}$/.test(raw)) return sendJson(res, 400, { error: 'invalid_code' });
  sendJson(res, code, { status: code });
}

/**
 * Any path the demo has no route for: what the request looked like on
 * arrival (method, path, the headers that show the gateway at work), as a
 * page for a browser and as JSON for anything else.
 */
async function echoRequest({ req, res, record, token }: Exchange): Promise<void> {
  const arrived = { method: record.method, path: record.url, sub: token.sub, ...describeRequest(req) };
  if (!(req.headers.accept ?? '').includes('text/html')) return sendJson(res, 200, { note: 'the demo upstream has no route here; this is what it received', ...arrived });
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>gatehouse demo: ${escapeHtml(record.url)}</title><style>${PAGE_STYLE}</style></head>
<body><main>
<h1>The demo upstream received ${escapeHtml(record.method)} ${escapeHtml(record.url)}</h1>
<p class="lead">The gateway let this request through for <strong>${escapeHtml(token.sub ?? '')}</strong>. The demo upstream has no page here, so it shows what arrived.</p>
<section><pre>${escapeHtml(JSON.stringify(arrived, null, 2))}</pre></section>
<p><a href="/">Back to the demo's home page</a></p>
</main></body></html>
`);
}

/** The request's headers as received, but the token by its length only: the demo never shows a token to the browser. */
async function headers({ req, res }: Exchange): Promise<void> {
  sendJson(res, 200, { ...req.headers, ...(req.headers.authorization === undefined ? {} : { authorization: describeAuthorization(req.headers.authorization) }) });
}

async function setCookie({ res, query }: Exchange): Promise<void> {
  const name = query.get('name') ?? '';
  if (!COOKIE_NAME.test(name)) return sendJson(res, 400, { error: 'invalid_cookie_name' });
  res.setHeader('set-cookie', [`${name}=from-upstream; Path=/`, 'upstream_pref=1; Path=/']);
  sendJson(res, 200, { set: [name, 'upstream_pref'] });
}

async function large({ res, query }: Exchange): Promise<void> {
  const raw = query.get('bytes') ?? '';
  const bytes = Number(raw);
  if (!DIGITS.test(raw) || bytes > LARGE_BODY_LIMIT) {
    return sendJson(res, 400, { error: 'invalid_bytes' });
  }
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': bytes });
  const chunk = Buffer.alloc(CHUNK_SIZE, 'x');
  for (let left = bytes; left > 0; left -= CHUNK_SIZE) {
    if (!res.write(left >= CHUNK_SIZE ? chunk : chunk.subarray(0, left))) await drained(res);
  }
  res.end();
}

async function upload({ req, res, record }: Exchange): Promise<void> {
  const { text, bytes } = await readBody(req, RECORDED_BODY_LIMIT);
  record.body = text;
  sendJson(res, 200, { bytes });
}

async function echo({ req, res, record }: Exchange): Promise<void> {
  record.body = (await readBody(req, Infinity)).text;
  sendJson(res, 200, { method: record.method, body: record.body });
}

/** Streams the body in, counting every byte and keeping the first `keep` as text. */
async function readBody(req: IncomingMessage, keep: number): Promise<{ text: string; bytes: number }> {
  const kept: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    if (bytes < keep) kept.push(chunk.subarray(0, keep - bytes));
    bytes += chunk.length;
  }
  return { text: Buffer.concat(kept).toString('utf8'), bytes };
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    const onClose = () => reject(new Error('response closed before the body was sent'));
    res.once('close', onClose);
    res.once('drain', () => {
      res.off('close', onClose);
      resolve();
    });
  });
}

function invalidToken(res: ServerResponse): void {
  // RFC 6750 §3.1
  res.setHeader('www-authenticate', 'Bearer error="invalid_token"');
  sendJson(res, 401, { error: 'invalid_token' });
}

function failed(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy(err instanceof Error ? err : undefined);
    return;
  }
  sendJson(res, 503, { error: 'temporarily_unavailable' });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}
