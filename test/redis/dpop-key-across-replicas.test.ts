import t from 'tap';
import { redisMissing } from '../helpers/redis.js';
import { signIn } from '../helpers/sign-in.js';
import { startDpopUpstream } from '../helpers/dpop-upstream.js';
import { get, startReplicas } from './replicas.js';
import { storedTokens } from '../helpers/refresh.js';

/**
 * README "Client authentication and sender-constrained tokens": with
 * `provider.dpop`, a user's DPoP key lives in the sealed token record, so
 * replicas sharing Redis sign the user's proofs with the same key, and
 * Redis never holds it in clear.
 */
t.test('two replicas on Redis sign one user\'s proofs with the same key, kept sealed', { skip: redisMissing }, async (t) => {
  const upstream = await startDpopUpstream();
  t.teardown(() => upstream.close());
  const { h, urls, inspect } = await startReplicas(t, 2, {
    dpopBound: true,
    config: (as) => {
      upstream.introspection = { endpoint: `${as.listenUrl}/token/introspection`, ...as.introspection };
      return { upstream: upstream.url, provider: { dpop: true } };
    },
  });
  const [a, b] = urls as [string, string];
  const { cookie } = await signIn(a, { user: 'alice' });

  const onA = await get(a, '/api/me', cookie);
  const onB = await get(b, '/api/me', cookie);
  t.equal(onA.status, 200, 'replica A presents the bound token with a valid proof');
  t.equal(onB.status, 200, 'so does replica B, which did not create the key');
  const jktA = (JSON.parse(onA.body) as { jkt: string }).jkt;
  const jktB = (JSON.parse(onB.body) as { jkt: string }).jkt;
  t.equal(jktB, jktA, 'both proofs were made with the same key');
  t.equal(upstream.checks.filter((check) => check.verdict === 'ok').length, 2);

  const record = await storedTokens(h, 'alice');
  t.ok(record?.dpopKey?.d);
  const keys = await inspect.keys('*');
  const values = (await Promise.all(keys.filter((key) => !key.endsWith(':sessions')).map((key) => inspect.get(key)))).join('\n');
  t.ok(values.length > 0, 'Redis holds the records');
  t.notOk(values.includes(record!.dpopKey!.d), 'but never the private key in clear');
  t.notOk(values.includes(record!.dpopKey!.x), 'nor its public half');
});
