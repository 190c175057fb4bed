import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/** README "Configuration": durations are seconds (a number) or a string with a unit: 90s, 30m, 24h, 7d. */

const DURATION_KEYS = [
  ['server', 'shutdownGrace'],
  ['session', 'cookieMaxAge'],
  ['session', 'ttl'],
  ['tokens', 'refreshSkew'],
  ['tokens', 'defaultLifetime'],
  ['provider', 'timeout'],
] as const;

const MESSAGE = 'must be a duration: seconds, or a number with a unit such as 90s, 30m, 24h, 7d';

t.test('a number is seconds; s, m, h and d are units; every duration key reads them', async (t) => {
  const cases: Array<[number | string, number]> = [
    [45, 45],
    ['45', 45],
    ['90s', 90],
    ['30m', 1800],
    ['24h', 86400],
    ['7d', 604800],
  ];
  for (const [section, key] of DURATION_KEYS) {
    for (const [written, seconds] of cases) {
      const config = loadConfig(withKeys({ [section]: { [key]: written } }), {});
      t.equal((config[section] as Record<string, unknown>)[key], seconds, `${section}.${key}: ${JSON.stringify(written)}`);
    }
  }
});

t.test('0 is allowed where it means something (refreshSkew, cookieMaxAge = browser-session cookie)', async (t) => {
  const config = loadConfig(withKeys({ tokens: { refreshSkew: 0 }, session: { cookieMaxAge: '0s' } }), {});
  t.equal(config.tokens.refreshSkew, 0);
  t.equal(config.session.cookieMaxAge, 0);
});

t.test('a duration from an environment variable is read like one written in the file', async (t) => {
  const config = loadConfig(withKeys({ session: { ttl: '${SESSION_TTL}' } }), { SESSION_TTL: '12h' });
  t.equal(config.session.ttl, 43200);
});

t.test('a malformed duration is refused, naming the key', async (t) => {
  for (const bad of ['10x', '1w', '1.5s', 1.5, -5, '-5s', 's', '', '10 s', '1h30m', true]) {
    t.strictSame(problemsOf(withKeys({ server: { shutdownGrace: bad } })), [`server.shutdownGrace: ${MESSAGE}; got ${JSON.stringify(bad)}`], JSON.stringify(bad));
  }
});

t.test('a zero session lifetime or default token lifetime is refused', async (t) => {
  t.strictSame(problemsOf(withKeys({ session: { ttl: 0 }, tokens: { defaultLifetime: '0m' } })), [
    'session.ttl: must be greater than 0',
    'tokens.defaultLifetime: must be greater than 0',
  ]);
});
