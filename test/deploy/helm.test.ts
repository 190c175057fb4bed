import t from 'tap';
import { parse } from 'yaml';
import { ensureBuilt } from '../helpers/cli-process.js';
import { CHART, VALUES, checkRenderedConfig, extractHelm, gatewayContainer, podEnvironment, renderedConfig, type Helm, type K8sObject } from './chart.js';
import { join } from 'node:path';

/**
 * Issue 7 parts 4 and 5: the chart, linted and rendered by a real Helm 4
 * (from a devDependency, never downloaded); the config it renders is
 * validated by the real `gatehouse check` with the environment the pod
 * would have. Scaling and refused renderings: helm-scaling.test.ts.
 */

const VALUES_FILES = ['minimal.yaml', 'redis-3-replicas-hpa.yaml', 'existing-secret.yaml', 'everything-on.yaml', 'routes.yaml'];
let helm: Helm;

t.before(async () => {
  ensureBuilt();
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

t.test('helm 4 lints the chart with its defaults and, strictly, with every values file', async (t) => {
  t.match((await helm.run(['version', '--short'])).stdout, /^v4\./);
  const defaults = await helm.run(['lint', CHART]);
  t.equal(defaults.code, 0, defaults.stdout + defaults.stderr);
  for (const file of VALUES_FILES) {
    const lint = await helm.run(['lint', CHART, '--strict', '-f', join(VALUES, file)]);
    t.equal(lint.code, 0, `${file}: ${lint.stdout}${lint.stderr}`);
    t.match(lint.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  }
});

t.test('minimal values: one hardened replica, probes on the admin port, SQLite on a PVC, and a config gatehouse check accepts', async (t) => {
  const r = await helm.template(['minimal.yaml']);
  t.equal(r.code, 0, r.stderr);
  t.strictSame(r.kinds(), ['ConfigMap', 'Deployment', 'NetworkPolicy', 'PersistentVolumeClaim', 'Secret', 'Service', 'ServiceAccount']);
  const deployment = r.one('Deployment');
  const pod = deployment.spec.template.spec;
  const container = gatewayContainer(r);
  t.equal(deployment.spec.replicas, 1);
  t.equal(deployment.spec.strategy.type, 'Recreate', 'the old pod releases the ReadWriteOnce volume first');

  t.strictSame(container.ports, [
    { name: 'http', containerPort: 8080, protocol: 'TCP' },
    { name: 'admin', containerPort: 9091, protocol: 'TCP' },
  ]);
  t.strictSame(container.livenessProbe.httpGet, { path: '/healthz', port: 'admin' });
  t.strictSame(container.readinessProbe.httpGet, { path: '/readyz', port: 'admin' });
  t.strictSame(container.args, ['--config', '/etc/gatehouse/gatehouse.yaml']);
  t.match(container.resources, { requests: { cpu: String, memory: String }, limits: { memory: String } });

  t.match(container.securityContext, {
    runAsNonRoot: true,
    runAsUser: 10001,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  });
  t.match(pod.securityContext, { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } });
  t.equal(pod.automountServiceAccountToken, false);

  // The only writable places of a read-only root: /data and /tmp.
  const mounts = Object.fromEntries((container.volumeMounts as K8sObject[]).map((m) => [m.mountPath, m]));
  t.strictSame(Object.keys(mounts).sort(), ['/data', '/etc/gatehouse', '/tmp']);
  t.equal(mounts['/etc/gatehouse']!.readOnly, true);
  const volumes = Object.fromEntries((pod.volumes as K8sObject[]).map((v) => [v.name, v]));
  t.equal(volumes[mounts['/data']!.name]!.persistentVolumeClaim.claimName, r.one('PersistentVolumeClaim').metadata.name);
  t.ok(volumes[mounts['/tmp']!.name]!.emptyDir);
  t.equal(volumes[mounts['/etc/gatehouse']!.name]!.configMap.name, r.one('ConfigMap').metadata.name);

  t.strictSame(r.one('Service').spec.ports, [{ name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' }], 'the admin port is not in the Service');
  const annotations = deployment.spec.template.metadata.annotations;
  t.match(annotations['checksum/config'], /^[0-9a-f]{64}$/);
  t.match(annotations['checksum/secret'], /^[0-9a-f]{64}$/);

  const env = podEnvironment(r);
  t.equal(env.GATEHOUSE_CLIENT_SECRET, 'test-client-secret', 'the client secret reaches the pod from the Secret');
  t.notOk(Object.keys(env).some((name) => name.startsWith('OTEL_')), 'tracing off by default: no OTEL_* variable');
  t.notMatch(renderedConfig(r), /test-client-secret|MDEyMzQ1/, 'no secret value in the ConfigMap');
  const check = await checkRenderedConfig(r, env);
  t.equal(check.code, 0, check.stderr);
  t.equal(check.stderr, '');
  const effective = parse(check.stdout);
  t.match(effective.server, { host: '0.0.0.0', port: 8080, publicUrl: 'https://app.example.com' });
  t.strictSame(effective.admin, { host: '0.0.0.0', port: 9091 }, 'where the probes knock');
  t.equal(effective.session.store, 'sqlite:///data/gatehouse.sqlite', 'on the /data volume');
  t.strictSame(effective.session.encryptionKeys, ['[redacted]']);
  t.equal(effective.provider.clientSecret, '[redacted]');
  t.equal(effective.upstream, 'http://my-app.default.svc:8080');
});

t.test('the checksum annotations change with the config or the Secret, so such a change rolls the pods, and with nothing else', async (t) => {
  const checksums = async (set: string[]) => {
    const r = await helm.template(['minimal.yaml'], set);
    t.equal(r.code, 0, r.stderr);
    return r.one('Deployment').spec.template.metadata.annotations as Record<string, string>;
  };
  const base = await checksums([]);
  const config = await checksums(['config.session.ttl=12h']);
  const secret = await checksums(['secret.clientSecret=another-secret']);
  const unrelated = await checksums(['resources.requests.cpu=250m']);
  t.not(config['checksum/config'], base['checksum/config']);
  t.equal(config['checksum/secret'], base['checksum/secret']);
  t.not(secret['checksum/secret'], base['checksum/secret']);
  t.equal(secret['checksum/config'], base['checksum/config']);
  t.strictSame(unrelated, base);
});

t.test('existingSecret: no Secret rendered, the named keys of the operator Secret feed the env, and check accepts the config', async (t) => {
  const r = await helm.template(['existing-secret.yaml']);
  t.equal(r.code, 0, r.stderr);
  t.notOk(r.kinds().includes('Secret'), 'the chart renders no Secret');
  const references = (gatewayContainer(r).env as K8sObject[])
    .filter((variable) => variable.valueFrom?.secretKeyRef)
    .map((variable) => [variable.name, variable.valueFrom.secretKeyRef.name, variable.valueFrom.secretKeyRef.key]);
  t.strictSame(references, [
    ['GATEHOUSE_CLIENT_SECRET', 'gatehouse-credentials', 'oauth-client-secret'],
    ['GATEHOUSE_SESSION_KEY', 'gatehouse-credentials', 'key-2025'],
    ['GATEHOUSE_SESSION_KEY_1', 'gatehouse-credentials', 'key-2024'],
  ]);
  const annotations = r.one('Deployment').spec.template.metadata.annotations;
  t.match(annotations['checksum/config'], /^[0-9a-f]{64}$/);
  t.notOk('checksum/secret' in annotations, 'no checksum of a Secret the chart does not render');

  const check = await checkRenderedConfig(r, podEnvironment(r, { 'oauth-client-secret': 'from-the-operator' }));
  t.equal(check.code, 0, check.stderr);
  const effective = parse(check.stdout);
  t.equal(effective.provider.clientAuthMethod, 'client_secret_basic');
  t.strictSame(effective.session.encryptionKeys, ['[redacted]', '[redacted]'], 'both keys of a rotation');
});

t.test('routes pass through the chart values into a config gatehouse check accepts', async (t) => {
  const r = await helm.template(['routes.yaml']);
  t.equal(r.code, 0, r.stderr);
  const check = await checkRenderedConfig(r, podEnvironment(r));
  t.equal(check.code, 0, check.stderr);
  const effective = parse(check.stdout) as { routes: Array<Record<string, unknown>> };
  t.strictSame(
    effective.routes.map((route) => [route.path, route.upstream, route.auth]),
    [
      ['/api', 'http://api.default.svc:8080/v1', 'required'],
      ['/assets/', 'http://web.default.svc:3000', 'public'],
      ['/', 'http://web.default.svc:3000', 'optional'],
    ],
  );
});
