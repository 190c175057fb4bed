import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ConfigSchema } from '../../src/config/schema.js';
import { CHART, VALUES, extractHelm, type Helm } from './chart.js';

/**
 * The chart refuses what would only fail in the pod (README "Run in
 * Kubernetes"): a misspelt config key (values.schema.json has
 * additionalProperties: false under config and each of its sections), and a
 * PodDisruptionBudget that, with one replica, blocks every node drain. It
 * spreads replicas across nodes by default, and its NOTES say where
 * browsers must reach it for sign-in to work.
 */
let helm: Helm;
t.before(async () => {
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

t.test('a config typo fails helm template and helm lint, naming the key', async (t) => {
  for (const pair of ['config.sesion.ttl=1h', 'config.session.tll=1h', 'config.server.pubicUrl=https://x.example']) {
    const rendered = await helm.template(['minimal.yaml'], [pair]);
    t.not(rendered.code, 0, `${pair}: template refused`);
    const key = pair.split('=')[0]!.split('.').at(-1)!;
    const typo = pair.startsWith('config.sesion') ? 'sesion' : key;
    t.match(rendered.stderr, typo, `${pair}: the message names ${typo}`);
    t.match(rendered.stderr, /additional propert/i);
    const lint = await helm.run(['lint', CHART, '-f', join(VALUES, 'minimal.yaml'), '--set', pair]);
    t.not(lint.code, 0, `${pair}: lint refused`);
  }
  const fine = await helm.template(['minimal.yaml'], ['config.session.ttl=1h', 'config.provider.scopes=openid profile']);
  t.equal(fine.code, 0, `correct keys pass: ${fine.stderr}`);
});

t.test("every key of the gateway's config is known to values.schema.json, section by section", async (t) => {
  const chart = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as {
    properties: { config: { additionalProperties: boolean; properties: Record<string, { additionalProperties?: boolean; properties?: Record<string, unknown> }> } };
  };
  const config = chart.properties.config;
  t.equal(config.additionalProperties, false);
  const gateway = ConfigSchema.properties as Record<string, { properties?: Record<string, unknown> }>;
  t.strictSame(Object.keys(config.properties).sort(), Object.keys(gateway).sort(), 'the same sections');
  for (const [section, schema] of Object.entries(gateway)) {
    if (schema.properties === undefined || config.properties[section]?.properties === undefined) continue;
    t.strictSame(Object.keys(config.properties[section].properties!).sort(), Object.keys(schema.properties).sort(), `the same keys in ${section}`);
    t.equal(config.properties[section].additionalProperties, false, `${section}: no other key`);
  }
});

t.test('a PodDisruptionBudget that would block every drain with one replica fails to render', async (t) => {
  const message = /podDisruptionBudget would block every node drain: with 1 replica\(s\)/;
  for (const set of [
    ['podDisruptionBudget.enabled=true'],
    ['podDisruptionBudget.enabled=true', 'podDisruptionBudget.maxUnavailable=0'],
    ['podDisruptionBudget.enabled=true', 'podDisruptionBudget.minAvailable=100%'],
  ]) {
    const rendered = await helm.template(['minimal.yaml'], set);
    t.not(rendered.code, 0, set.join(' '));
    t.match(rendered.stderr, message);
  }
  const allowsOne = await helm.template(['minimal.yaml'], ['podDisruptionBudget.enabled=true', 'podDisruptionBudget.maxUnavailable=1']);
  t.equal(allowsOne.code, 0, `maxUnavailable 1 lets a drain proceed: ${allowsOne.stderr}`);
  const scaled = await helm.template(['redis-3-replicas-hpa.yaml'], ['podDisruptionBudget.enabled=true', 'podDisruptionBudget.minAvailable=1']);
  t.equal(scaled.code, 0, `several replicas with minAvailable 1: ${scaled.stderr}`);
  t.equal(scaled.one('PodDisruptionBudget').spec.minAvailable, 1);
});

t.test('replicas spread across nodes by default; a list replaces the rule, [] turns it off', async (t) => {
  const byDefault = (await helm.template(['minimal.yaml'])).one('Deployment').spec.template.spec;
  t.match(byDefault.topologySpreadConstraints, [
    { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { 'app.kubernetes.io/name': 'gatehouse' } } },
  ]);
  const off = (await helm.template(['minimal.yaml'], ['topologySpreadConstraints=null'])).one('Deployment').spec.template.spec;
  t.match(off.topologySpreadConstraints, [{ topologyKey: 'kubernetes.io/hostname' }], 'null is the default');
  const none = await helm.run(['template', 'gh', CHART, '-f', join(VALUES, 'minimal.yaml'), '--set-json', 'topologySpreadConstraints=[]']);
  t.notMatch(none.stdout, 'topologySpreadConstraints', '[] renders none');
});

t.test('the NOTES say where browsers must reach the gateway for sign-in to work, and what to register', async (t) => {
  const install = await helm.run(['install', 'gh', CHART, '--dry-run=client', '--namespace', 'web', '-f', join(VALUES, 'minimal.yaml')]);
  t.equal(install.code, 0, install.stderr);
  const notes = install.stdout.slice(install.stdout.indexOf('NOTES:'));
  t.match(notes, 'redirect URI:             https://app.example.com/callback');
  t.match(notes, 'post-logout redirect URI: https://app.example.com/');
  t.match(notes, 'Sign-in works only when browsers reach the gateway at exactly https://app.example.com');
  t.match(notes, 'sign-in then returns to https://app.example.com, not to localhost');
});
