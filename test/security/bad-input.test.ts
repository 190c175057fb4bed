import t from 'tap';
import { connect } from 'node:net';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/**
 * SECURITY.md: bad input of any kind gets a clear 4xx, never a 5xx or a crash,
 * and never loses another user's session. Hundreds of generated malformed
 * requests, sent raw over TCP so nothing in a client library cleans them up.
 */

/** Deterministic generator, so a failure can be replayed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const random = prng(20261122);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const bytes = (length: number, low = 0x21, high = 0x7e): string =>
  Array.from({ length }, () => String.fromCharCode(low + Math.floor(random() * (high - low + 1)))).join('');

interface RawAnswer {
  /** `closed`: the server closed the connection without a status line; `hung`: nothing for 5 s. */
  status: number | 'closed' | 'hung';
  head: string;
}

/** Sends bytes as they are and reads the status line (or notes that the connection closed without one). */
function sendRaw(port: number, payload: Buffer | string): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const finish = (hung = false) => {
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(received);
      resolve({ status: match ? Number(match[1]) : hung ? 'hung' : 'closed', head: received.slice(0, received.indexOf('\r\n\r\n') + 1 || 200) });
      socket.destroy();
    };
    socket.setTimeout(5000, () => finish(true));
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (received.includes('\r\n\r\n')) finish();
    });
    socket.on('error', () => finish());
    socket.on('close', () => finish());
    socket.write(payload);
  });
}

const get = (target: string, headers: string[] = []) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map((h) => `${h}\r\n`).join('')}Connection: close\r\n\r\n`;

/**
 * `refused`: bad input the gateway must answer with a 4xx or by closing the
 * connection. The others are odd but valid requests (a sign-in with a strange
 * returnTo, a page with Unicode in its query): any answer but a 5xx or a hang.
 */
interface Case {
  name: string;
  payload: string | Buffer;
  refused: boolean;
}

function cases(validCookie: string): Case[] {
  const list: Case[] = [];
  /** Where no valid session means 401, or a bad callback 400. */
  const refusing = new Set(['/', '/api/me', '/callback', '/session']);
  const paths = ['/', '/api/me', '/login', '/callback', '/logout', '/session'];
  // A well-formed /logout with the user's cookie is a real sign-out, not bad input.
  const pathsWithCookie = paths.filter((path) => path !== '/logout');
  for (let i = 0; i < 60; i += 1) {
    const path = pick(paths);
    list.push({ name: `garbage cookie ${i} on ${path}`, refused: refusing.has(path), payload: get(path, [`Cookie: ${pick(['session_id=', 'session_id_login=', '', 'x='])}${bytes(1 + Math.floor(random() * 300), 0x20, 0x7e).replace(/[\r\n]/g, '')}`]) });
  }
  for (let i = 0; i < 30; i += 1) {
    list.push({ name: `binary cookie ${i}`, refused: true, payload: Buffer.concat([Buffer.from(`GET /api/me HTTP/1.1\r\nHost: x\r\nCookie: session_id=`), Buffer.from(bytes(40, 0x80, 0xff), 'latin1'), Buffer.from('\r\nConnection: close\r\n\r\n')]) });
  }
  // Each broken whatever follows it: the suffix starts with a character that is no hex digit.
  const encodings = ['%', '%zz', '%E0%A4%A', '%C0%AF', '%ff%fe', '%2e%2e%2f', '..%2f..%2f', '%u002e', '%%32%65'];
  for (let i = 0; i < 40; i += 1) {
    const broken = `/${pick(['', 'api/', 'login', 'callback'])}${pick(encodings)}${pick(['g', 'x', '_', '~'])}${bytes(2)}`.replace(/ /g, '');
    list.push({ name: `bad percent-encoding in path ${i}: ${broken}`, refused: true, payload: get(broken, [`Cookie: ${validCookie}`]) });
    const path = pick(paths);
    list.push({ name: `bad percent-encoding in query ${i} on ${path}`, refused: refusing.has(path), payload: get(`${path}?${pick(['returnTo', 'state', 'code', 'a'])}=${pick(encodings)}`) });
  }
  for (let i = 0; i < 30; i += 1) {
    const name = pick(['returnTo', 'state', 'code', 'error', 'iss']);
    const repeated = Array.from({ length: 2 + Math.floor(random() * 200) }, () => `${name}=${encodeURIComponent(bytes(8))}`).join('&');
    const path = pick(['/login', '/callback']);
    list.push({ name: `repeated ${name} ${i} on ${path}`, refused: path === '/callback', payload: get(`${path}?${repeated}`) });
  }
  for (let i = 0; i < 40; i += 1) {
    const code = encodeURIComponent(bytes(1 + Math.floor(random() * 500), 0x20, 0x7e));
    const state = encodeURIComponent(bytes(1 + Math.floor(random() * 100), 0x20, 0x7e));
    list.push({ name: `random code and state ${i}`, refused: true, payload: get(`/callback?code=${code}&state=${state}`, [`Cookie: session_id_login=${bytes(60)}`]) });
  }
  for (let i = 0; i < 20; i += 1) {
    const text = encodeURIComponent(pick(['ß', '😀', 'ﬁ', 'İ', '\u202e', '\u0000', '日本語']).repeat(1 + Math.floor(random() * 50)));
    list.push({ name: `unicode ${i}`, refused: false, payload: get(`${pick(pathsWithCookie)}?returnTo=/${text}&x=${text}`, [`Cookie: ${validCookie}`]) });
  }
  for (let i = 0; i < 15; i += 1) {
    list.push({ name: `oversized header ${i}`, refused: true, payload: get('/api/me', [`X-Big: ${'a'.repeat(17000 + Math.floor(random() * 20000))}`]) });
    list.push({ name: `oversized cookie ${i}`, refused: true, payload: get('/api/me', [`Cookie: ${validCookie}; pad=${'b'.repeat(17000)}`]) });
  }
  for (let i = 0; i < 25; i += 1) {
    list.push({ name: `unparseable bytes ${i}`, refused: true, payload: Buffer.from(bytes(10 + Math.floor(random() * 400), 0x00, 0xff), 'latin1') });
  }
  // DELETE /login, PUT /callback and PATCH /session: the gateway's own paths come before every route, so 405, never proxied.
  for (const method of ['CONNECT 127.0.0.1:22', 'PROPFIND /', 'TRACE /', 'BREW /', 'DELETE /login', 'PUT /callback', 'PATCH /session']) {
    list.push({ name: `method ${method}`, refused: true, payload: `${method} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${validCookie}\r\nConnection: close\r\n\r\n` });
  }
  for (let i = 0; i < 10; i += 1) {
    list.push({ name: `missing pieces ${i}`, refused: true, payload: pick(['GET\r\n\r\n', 'GET / HTTP/1.1\r\n\r\n', 'GET / HTTP/9.9\r\nHost: x\r\n\r\n', 'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n', 'POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc', 'GET /api/me HTTP/1.1\r\nHost: x\r\nCookie\r\n\r\n']) });
  }
  return list;
}

t.test('hundreds of malformed requests get 4xx or a closed connection, and the signed-in user keeps working', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const { cookie } = await signIn(h.url, { user: 'carol' });
  const port = Number(new URL(h.url).port);
  const all = cases(cookie);
  t.ok(all.length >= 300, `${all.length} malformed requests`);

  t.ok(all.filter((one) => one.refused).length >= 250, 'most of them bad input to refuse');

  const wrong: string[] = [];
  for (const { name, payload, refused } of all) {
    const { status } = await sendRaw(port, payload);
    // A hang, a 5xx, or for bad input anything but a 4xx or a closed connection (a 2xx or 3xx) fails.
    const fine = refused ? status === 'closed' || (typeof status === 'number' && status >= 400 && status < 500) : typeof status === 'number' && status < 500;
    if (!fine) wrong.push(`${name}: ${status}`);
  }
  t.same(wrong, [], 'bad input: 4xx or a closed connection; the odd but valid requests: answered; none a 5xx or a hang');

  const after = await fetch(`${h.url}/api/me`, { headers: { cookie } });
  t.equal(after.status, 200, 'the signed-in user still reaches the upstream');
  t.match(await after.json(), { sub: 'carol' });
});

t.test('each kind of bad input gets the 4xx that says what is wrong', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const port = Number(new URL(h.url).port);
  t.equal((await sendRaw(port, get('/api/me', [`X-Big: ${'a'.repeat(20000)}`]))).status, 431, 'request head over 16 KiB: 431');
  const connectAnswer = await sendRaw(port, 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n');
  t.ok(connectAnswer.status === 405 || connectAnswer.status === 'closed', 'CONNECT refused');
  const garbage = await sendRaw(port, Buffer.from([0x16, 0x03, 0x01, 0x00, 0xff, 0x01, 0x00]));
  t.ok(garbage.status === 400 || garbage.status === 'closed', 'TLS bytes on the plain port: 400 or closed');
  t.equal((await sendRaw(port, get('/callback?state=a&state=b&code=c'))).status, 400, 'repeated state: 400');
  t.equal((await sendRaw(port, get('/%zz'))).status, 400, 'a path with broken percent-encoding: 400');
});

t.test("Fastify's and Node's own 400s are the gateway's error answer: no-store, nosniff, the registry's body, no path echoed", async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const port = Number(new URL(h.url).port);
  // /login%zz fails in Fastify's router (FST_ERR_BAD_URL), before any route; a header line without a colon fails in Node's parser.
  for (const [what, payload, status] of [
    ['a URL Fastify cannot decode', get('/login%zz-secret-path'), 400],
    ['a header line Node cannot parse', `GET /api/me HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n`, 400],
    ['a head over the limit', get('/api/me', [`X-Big: ${'a'.repeat(20000)}`]), 431],
  ] as const) {
    const answer = await sendRaw(port, payload);
    t.equal(answer.status, status, what);
    t.match(answer.head, /\r\ncache-control: no-store\r\n/i, `${what}: no-store`);
    t.match(answer.head, /\r\nx-content-type-options: nosniff\r\n/i, `${what}: nosniff`);
    t.notMatch(answer.head, /secret-path|FST_ERR/, `${what}: neither the path nor Fastify's code`);
  }
  const body = await fetch(`${h.url}/login%zz`).then(async (response) => ({ status: response.status, json: await response.json() }));
  t.strictSame(body, { status: 400, json: { error: 'bad_request', message: 'The request is malformed: invalid percent-encoding in the URL.' } }, "the registry's JSON body");
});
