import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './listen.js';
import { escapeHtml } from '../http/pages.js';

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
}

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  record: ReceivedRequest;
  token: Introspection;
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
    handle(req, res, received, introspect).catch((err: unknown) => failed(res, err));
  });
  const url = await listen(server, opts.host ?? '127.0.0.1', opts.port ?? 0);
  return { url, received, close: () => closeServer(server) };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  received: ReceivedRequest[],
  introspect: (token: string) => Promise<Introspection>,
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
  if (route === undefined) return sendJson(res, 404, { error: 'not_found' });
  await route({ req, res, query: searchParams, record, token });
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

/** The signed-in page; its empty icon spares a favicon request that would race a test's count of upstream requests. */
async function homePage({ res, token }: Exchange): Promise<void> {
  const user = escapeHtml(token.sub ?? '');
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><link rel="icon" href="data:,"><title>gatehouse demo upstream</title></head>
<body>
<h1>Signed in as ${user}</h1>
<p>This page comes from the demo upstream, which saw a valid bearer token for <strong>${user}</strong>.</p>
<h2>GET /api/me</h2>
<pre id="me">loading...</pre>
<h2>POST /api/echo</h2>
<button id="echo" type="button">Send JSON</button>
<pre id="echoed"></pre>
<p><a href="/session">/session</a> &middot; <a href="/logout">/logout</a></p>
<script>
async function show(id, response) {
  document.getElementById(id).textContent = response.status + '\\n' + await response.text();
}
fetch('/api/me').then((response) => show('me', response));
document.getElementById('echo').addEventListener('click', () => {
  fetch('/api/echo', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ hello: 'upstream', at: new Date().toISOString() }),
  }).then((response) => show('echoed', response));
});
</script>
</body>
</html>
`);
}

async function me({ res, token }: Exchange): Promise<void> {
  sendJson(res, 200, { sub: token.sub, scope: token.scope, client_id: token.client_id, exp: token.exp });
}

async function headers({ req, res }: Exchange): Promise<void> {
  sendJson(res, 200, req.headers);
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
