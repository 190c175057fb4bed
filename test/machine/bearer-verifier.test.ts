import t from 'tap';
import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { BearerVerifier, tokenHash, type BearerVerifierOptions } from '../../src/machine/bearer-verifier.js';
import { createLogger } from '../../src/logger.js';
import { isGatehouseError } from '../../src/errors.js';
import { TestClock } from '../helpers/clock.js';
import { JwtIssuer, b64json } from '../helpers/jwt-issuer.js';

// The verifier on its own against a real loopback issuer (discovery, JWKS,
// rotation): every way a JWT is refused, what is cached and for how long.
// Through the gateway: test/machine/bearer-routes.test.ts.

const noProvider = {
  get configuration(): never {
    throw new Error('no provider in this test');
  },
};

function logSink(): { log: FastifyBaseLogger; text(): string } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { log: createLogger('debug', sink) as unknown as FastifyBaseLogger, text: () => lines.join('') };
}

function verifierFor(issuer: JwtIssuer, clock: TestClock, extra: Partial<BearerVerifierOptions> = {}, entry: Record<string, unknown> = {}): BearerVerifier {
  return new BearerVerifier({
    settings: { issuers: [{ issuer: issuer.url, audiences: ['gatehouse', 'orders'], userIdClaim: 'sub', ...entry }], introspection: false, cacheTtl: 60 },
    provider: noProvider,
    providerUserIdClaim: 'sub',
    timeoutMs: 2000,
    cacheSize: 100,
    clock,
    ...extra,
  });
}

async function outcome(verifier: BearerVerifier, token: string, log: FastifyBaseLogger): Promise<string> {
  try {
    const caller = await verifier.verify(token, tokenHash(token), log);
    return `accepted ${caller.user}`;
  } catch (err) {
    if (isGatehouseError(err)) return err.code;
    throw err;
  }
}

t.test('a token of a configured issuer is accepted on its claims, found through discovery, and cached by its hash', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const clock = new TestClock();
  const verifier = verifierFor(issuer, clock);
  const { log, text } = logSink();
  const token = await issuer.sign({ sub: 'system:serviceaccount:jobs:nightly', aud: ['other', 'orders'], groups: ['batch'] });
  const caller = await verifier.verify(token, tokenHash(token), log);
  t.equal(caller.user, 'system:serviceaccount:jobs:nightly');
  t.same(caller.claims.groups, ['batch']);
  t.equal(caller.key, `${issuer.url} system:serviceaccount:jobs:nightly`);
  t.same(issuer.fetches, { discovery: 1, jwks: 1 });
  t.equal(verifier.peek(tokenHash(token), clock.now()), caller, 'the hot path finds it without a promise');
  t.equal(verifier.peek(tokenHash(`${token}x`), clock.now()), undefined);
  await verifier.verify(token, tokenHash(token), log);
  const other = await issuer.sign({ sub: 'another', aud: 'gatehouse' });
  t.match(await outcome(verifier, other, log), 'accepted another');
  t.same(issuer.fetches, { discovery: 1, jwks: 1 }, 'one discovery and one key-set fetch serve every token');
  t.notMatch(text(), token.split('.')[2]!, 'no token in the log');
});

t.test('a verdict is reused for at most cacheTtl and never past the token\'s exp', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const clock = new TestClock();
  const verifier = verifierFor(issuer, clock);
  const { log } = logSink();
  const now = Math.floor(Date.now() / 1000);
  const long = await issuer.sign({ sub: 'long', aud: 'gatehouse', exp: now + 3600 });
  const short = await issuer.sign({ sub: 'short', aud: 'gatehouse', exp: now + 20 });
  await verifier.verify(long, tokenHash(long), log);
  await verifier.verify(short, tokenHash(short), log);
  clock.advance(21_000);
  t.equal(verifier.peek(tokenHash(short), clock.now()), undefined, 'not past exp');
  t.ok(verifier.peek(tokenHash(long), clock.now()), 'still within cacheTtl');
  clock.advance(40_000);
  t.equal(verifier.peek(tokenHash(long), clock.now()), undefined, 'not past cacheTtl');
  t.equal(await outcome(verifier, long, log), 'accepted long', 'verified again after');
  clock.advance(50_000);
  t.equal(await outcome(verifier, short, log), 'GH_ERR_BEARER_INVALID', 'past exp and the 60 s leeway: refused');
});

t.test('cacheTtl 0 caches nothing', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const clock = new TestClock();
  const verifier = new BearerVerifier({
    settings: { issuers: [{ issuer: issuer.url, audiences: ['gatehouse'], userIdClaim: 'sub' }], introspection: false, cacheTtl: 0 },
    provider: noProvider,
    providerUserIdClaim: 'sub',
    timeoutMs: 2000,
    cacheSize: 100,
    clock,
  });
  const token = await issuer.sign({ sub: 'job', aud: 'gatehouse' });
  await verifier.verify(token, tokenHash(token), logSink().log);
  t.equal(verifier.peek(tokenHash(token), clock.now()), undefined);
});

t.test('every refusal: 401, whatever part of the token is wrong', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const stranger = await JwtIssuer.start();
  t.teardown(() => stranger.close());
  const clock = new TestClock();
  const verifier = verifierFor(issuer, clock);
  const { log, text } = logSink();
  const now = Math.floor(Date.now() / 1000);
  const good = await issuer.sign({ sub: 'job', aud: 'gatehouse' });
  t.equal(await outcome(verifier, good, log), 'accepted job');
  const [header, payload] = good.split('.') as [string, string];
  const publicPem = issuer.current.publicKey.export({ format: 'pem', type: 'spki' }) as string;
  const hsHeader = b64json({ alg: 'HS256', kid: issuer.current.kid, typ: 'JWT' });
  const cases: Record<string, string> = {
    'an issuer not configured': await stranger.sign({ sub: 'job', aud: 'gatehouse' }),
    'a signature by another key under the same kid': await issuer.sign({ sub: 'job', aud: 'gatehouse' }, { key: JwtIssuer.newKey('ES256', issuer.current.kid) }),
    'a payload changed after signing': `${header}.${b64json({ iss: issuer.url, sub: 'admin', aud: 'gatehouse', exp: now + 600 })}.${good.split('.')[2]}`,
    'alg none': `${b64json({ alg: 'none', typ: 'JWT' })}.${payload}.`,
    'HS256 with the public key as the secret': `${hsHeader}.${payload}.${createHmac('sha256', publicPem).update(`${hsHeader}.${payload}`).digest('base64url')}`,
    'expired beyond the leeway': await issuer.sign({ sub: 'job', aud: 'gatehouse', exp: now - 61, iat: now - 700 }),
    'not yet valid beyond the leeway': await issuer.sign({ sub: 'job', aud: 'gatehouse', nbf: now + 120 }),
    'another audience': await issuer.sign({ sub: 'job', aud: 'billing' }),
    'no audience': await issuer.sign({ sub: 'job' }),
    'no exp': await new (await import('jose')).SignJWT({ iss: issuer.url, sub: 'job', aud: 'gatehouse' })
      .setProtectedHeader({ alg: 'ES256', kid: issuer.current.kid })
      .sign(issuer.current.privateKey),
    'an unknown kid': await issuer.sign({ sub: 'job', aud: 'gatehouse' }, { key: JwtIssuer.newKey('ES256') }),
    'no sub (userIdClaim)': await issuer.sign({ aud: 'gatehouse' }),
    'not a JWT (introspection off)': 'opaque-token-value',
  };
  for (const [name, token] of Object.entries(cases)) {
    t.equal(await outcome(verifier, token, log), 'GH_ERR_BEARER_INVALID', name);
    t.equal(verifier.peek(tokenHash(token), clock.now()), undefined, `${name}: nothing cached`);
  }
  t.match(text(), /"reason":"ERR_JOSE_ALG_NOT_ALLOWED"/, 'the log says why');
  t.match(text(), /"reason":"ERR_JWT_EXPIRED"/);
  t.match(text(), /"reason":"ERR_JWKS_NO_MATCHING_KEY"/);
  for (const token of Object.values(cases)) t.notOk(text().includes(token), 'no token in the log');
});

t.test('within the leeway: a token 30 s past exp or 30 s before nbf is accepted', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const verifier = verifierFor(issuer, new TestClock());
  const { log } = logSink();
  const now = Math.floor(Date.now() / 1000);
  t.equal(await outcome(verifier, await issuer.sign({ sub: 'late', aud: 'gatehouse', exp: now - 30, iat: now - 600 }), log), 'accepted late');
  t.equal(await outcome(verifier, await issuer.sign({ sub: 'early', aud: 'gatehouse', nbf: now + 30 }), log), 'accepted early');
});

t.test('an unknown kid fetches the key set again at most once a cooldown; a rotated key is found after it', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const { log } = logSink();
  const strict = verifierFor(issuer, new TestClock());
  await strict.verify(await issuer.sign({ sub: 'job', aud: 'gatehouse' }), tokenHash('a'), log);
  t.equal(issuer.fetches.jwks, 1);
  for (let attempt = 0; attempt < 5; attempt += 1) {
    t.equal(await outcome(strict, await issuer.sign({ sub: 'job', aud: 'gatehouse' }, { key: JwtIssuer.newKey() }), log), 'GH_ERR_BEARER_INVALID');
  }
  t.equal(issuer.fetches.jwks, 1, 'five made-up kids within the minute: no fetch (the default cooldown)');

  const rotating = await JwtIssuer.start();
  t.teardown(() => rotating.close());
  const verifier = verifierFor(rotating, new TestClock(), { jwksCooldownMs: 300 });
  const before = await rotating.sign({ sub: 'job', aud: 'gatehouse' });
  t.equal(await outcome(verifier, before, log), 'accepted job');
  rotating.rotate('RS256', true);
  await new Promise((resolve) => setTimeout(resolve, 350));
  const after = await rotating.sign({ sub: 'job2', aud: 'gatehouse' });
  t.equal(await outcome(verifier, after, log), 'accepted job2', 'the new kid: the key set is fetched again');
  t.equal(rotating.fetches.jwks, 2);
  t.equal(await outcome(verifier, before, log), 'accepted job', 'a verdict already cached stays until it expires');
  const retired = await rotating.sign({ sub: 'job3', aud: 'gatehouse' }, { key: rotating.keys[0]! });
  t.equal(await outcome(verifier, retired, log), 'GH_ERR_BEARER_INVALID', 'a new token signed with the retired key is refused');
});

t.test('a key set or discovery document that cannot be had: 503, not 401, and no verdict cached', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const { log, text } = logSink();
  const token = await issuer.sign({ sub: 'job', aud: 'gatehouse' });

  issuer.mode = 'down';
  const viaDiscovery = verifierFor(issuer, new TestClock());
  t.equal(await outcome(viaDiscovery, token, log), 'GH_ERR_BEARER_UNAVAILABLE', 'discovery unreachable');
  const direct = verifierFor(issuer, new TestClock(), {}, { jwksUri: issuer.jwksUrl });
  t.equal(await outcome(direct, token, log), 'GH_ERR_BEARER_UNAVAILABLE', 'jwksUri unreachable');
  issuer.mode = 'error500';
  t.equal(await outcome(viaDiscovery, token, log), 'GH_ERR_BEARER_UNAVAILABLE', 'discovery answers 500');
  t.equal(await outcome(direct, token, log), 'GH_ERR_BEARER_UNAVAILABLE', 'key set answers 500');
  issuer.mode = 'up';
  t.equal(await outcome(viaDiscovery, token, log), 'accepted job', 'back: discovery is tried again');
  t.equal(await outcome(direct, token, log), 'accepted job');
  t.match(text(), /issuer keys unavailable/);
  t.notOk(text().includes(token));

  const impostor = verifierFor(issuer, new TestClock());
  issuer.discoveryIssuer = 'https://elsewhere.example.com';
  t.equal(await outcome(impostor, token, log), 'GH_ERR_BEARER_UNAVAILABLE', 'a discovery document naming another issuer is not used');
});

t.test('with jwksUri, no discovery document is fetched', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const verifier = verifierFor(issuer, new TestClock(), {}, { jwksUri: issuer.jwksUrl });
  t.equal(await outcome(verifier, await issuer.sign({ sub: 'job', aud: 'gatehouse' }), logSink().log), 'accepted job');
  t.same(issuer.fetches, { discovery: 0, jwks: 1 });
});

t.test('userIdClaim names the caller; a number is shown as text', async (t) => {
  const issuer = await JwtIssuer.start();
  t.teardown(() => issuer.close());
  const verifier = verifierFor(issuer, new TestClock(), {}, { userIdClaim: 'repository' });
  const { log } = logSink();
  t.equal(await outcome(verifier, await issuer.sign({ sub: 'repo:acme/app:ref:refs/heads/main', repository: 'acme/app', aud: 'gatehouse' }), log), 'accepted acme/app');
  const numeric = verifierFor(issuer, new TestClock(), {}, { userIdClaim: 'uid' });
  t.equal(await outcome(numeric, await issuer.sign({ uid: 42, aud: 'gatehouse' }), log), 'accepted 42');
});
