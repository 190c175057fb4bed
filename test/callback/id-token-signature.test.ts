import t from 'tap';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

type Forgery = 'none' | 'payload' | 'signature' | 'alg-none';

/**
 * A loopback proxy in front of the real AS that forges the ID token of every
 * token response: another `sub` under the AS's own signature, a flipped
 * signature, or `alg: none` without one. Everything else passes unchanged.
 */
async function startForgingProxy(target: string) {
  const state = { forgery: 'none' as Forgery, forged: 0 };
  const server = createServer((req, res) => {
    const upstream = httpRequest(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers }, (answer) => {
      const isToken = req.method === 'POST' && (req.url ?? '').startsWith('/token') && !(req.url ?? '').includes('introspection');
      if (!isToken || state.forgery === 'none') {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id_token?: string };
        if (body.id_token !== undefined) {
          body.id_token = forge(body.id_token, state.forgery);
          state.forged += 1;
        }
        const text = JSON.stringify(body);
        const headers = { ...answer.headers, 'content-length': String(Buffer.byteLength(text)) };
        delete headers['transfer-encoding'];
        res.writeHead(answer.statusCode ?? 502, headers).end(text);
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function forge(idToken: string, forgery: Forgery): string {
  const [header, payload, signature] = idToken.split('.') as [string, string, string];
  const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  switch (forgery) {
    case 'payload':
      return `${header}.${encode({ ...decode(payload), sub: 'mallory', name: 'Mallory', email: 'mallory@example.com' })}.${signature}`;
    case 'signature': {
      const bytes = Buffer.from(signature, 'base64url');
      bytes[0] = bytes[0]! ^ 0xff;
      return `${header}.${payload}.${bytes.toString('base64url')}`;
    }
    case 'alg-none':
      return `${encode({ ...decode(header), alg: 'none' })}.${encode({ ...decode(payload), sub: 'mallory' })}.`;
    default:
      return idToken;
  }
}

/**
 * OpenID Connect Core §3.1.3.7: the ID token's signature is verified
 * against the AS's keys; a token whose payload or signature was altered
 * after the AS signed it creates no session, whatever else checks out.
 */
t.test('an ID token with a forged signature creates no session', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const forging = await startForgingProxy(h.asProxy.target);
  t.teardown(() => forging.close());
  h.asProxy.target = forging.url;

  const honest = await signIn(h.url, { user: 'alice' });
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: honest.cookie } })).status, 200, 'a genuine ID token signs in');

  for (const forgery of ['payload', 'signature', 'alg-none'] as const) {
    forging.state.forgery = forgery;
    const before = forging.state.forged;
    const attempt = await signIn(h.url, { user: 'alice' }).catch((err: Error) => err);
    t.ok(attempt instanceof Error, `${forgery}: no session cookie`);
    t.match((attempt as Error).message, /callback answered 4\d\d|callback answered 502/, `${forgery}: a clear refusal, not a 500 (${(attempt as Error).message})`);
    t.equal(forging.state.forged, before + 1, `${forgery}: the forged token was served`);
  }
  t.notOk(h.logs.some((line) => line.msg === 'session created' && line.userId !== h.logs.find((l) => l.msg === 'session created')?.userId), 'mallory never signed in');
});
