import t from 'tap';
import { parse } from 'yaml';
import { ensureBuilt } from '../helpers/cli-process.js';
import { checkRenderedConfig, extractHelm, gatewayContainer, podEnvironment, type Helm, type K8sObject } from './chart.js';

/**
 * Issue 7 parts 4 and 5, continued (helm.test.ts has lint and the single
 * replica): several replicas share Redis or the rendering fails; every
 * optional object of the chart; the renderings the chart refuses.
 */

let helm: Helm;

t.before(async () => {
  ensureBuilt();
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

/** Whether every label of `selector` is among `labels`. */
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([name, value]) => labels[name] === value);

t.test('Redis, 3 replicas and an HPA: no PVC, the HPA owns the replica count, and check accepts the redis:// config', async (t) => {
  const r = await helm.template(['redis-3-replicas-hpa.yaml']);
  t.equal(r.code, 0, r.stderr);
  t.strictSame(r.kinds(), ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'Secret', 'Service', 'ServiceAccount']);
  const deployment = r.one('Deployment');
  t.notOk('replicas' in deployment.spec, 'no replicas field for the HPA to fight with');
  t.notOk(deployment.spec.strategy, 'a rolling update: the replicas share no volume');
  const data = (deployment.spec.template.spec.volumes as K8sObject[]).find((volume) => volume.name === 'data')!;
  t.strictSame(data.emptyDir, {});
  const hpa = r.one('HorizontalPodAutoscaler');
  t.strictSame(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name });
  t.match(hpa.spec, { minReplicas: 3, maxReplicas: 6, metrics: [{ resource: { name: 'cpu', target: { averageUtilization: 70 } } }] });
  t.ok(
    (gatewayContainer(r).env as K8sObject[]).some((v) => v.name === 'REDIS_PASSWORD' && v.valueFrom.secretKeyRef.key === 'redis-password'),
    'extraEnv reaches the container',
  );

  // `check` validates only: it accepts a redis:// store (the running gateway
  // of this build still refuses to open one; see docs/deploy.md).
  const check = await checkRenderedConfig(r, podEnvironment(r, { 'redis-password': 'redis-pw-123' }));
  t.equal(check.code, 0, check.stderr);
  t.equal(check.stderr, '');
  const effective = parse(check.stdout);
  t.equal(effective.session.store, 'redis://:[redacted]@redis-master.default.svc:6379/0', 'the password from the environment, redacted');
  t.notMatch(check.stdout, /redis-pw-123/);
  t.equal(effective.server.trustProxy, 1, 'one hop: the Ingress controller');
});

t.test('everything on: Ingress, HPA, PDB, metrics Service with ServiceMonitor, NetworkPolicy, key rotation; check accepts the config', async (t) => {
  const r = await helm.template(['everything-on.yaml']);
  t.equal(r.code, 0, r.stderr);
  t.strictSame(r.kinds(), [
    'ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Ingress', 'NetworkPolicy', 'PodDisruptionBudget',
    'Secret', 'Service', 'Service', 'ServiceAccount', 'ServiceMonitor',
  ]);
  const podLabels = r.one('Deployment').spec.template.metadata.labels as Record<string, string>;
  const main = r.one('Service', 'gh-gatehouse');
  const metrics = r.one('Service', 'gh-gatehouse-metrics');
  t.strictSame(main.spec.ports.map((port: K8sObject) => port.name), ['http'], 'the admin port stays off the public Service');
  t.strictSame(metrics.spec.ports, [{ name: 'admin', port: 9091, targetPort: 'admin', protocol: 'TCP' }]);
  t.equal(metrics.spec.type, 'ClusterIP');

  const ingress = r.one('Ingress');
  t.strictSame(ingress.spec.rules[0].http.paths[0].backend, { service: { name: main.metadata.name, port: { name: 'http' } } });
  t.strictSame(ingress.spec.tls, [{ hosts: ['app.example.com'], secretName: 'app-example-com-tls' }]);
  t.equal(ingress.spec.ingressClassName, 'nginx');

  const monitor = r.one('ServiceMonitor');
  t.ok(selects(monitor.spec.selector.matchLabels, metrics.metadata.labels), 'the ServiceMonitor selects the metrics Service');
  t.notOk(selects(monitor.spec.selector.matchLabels, main.metadata.labels), '... and not the public one');
  t.match(monitor.spec.endpoints, [{ port: 'admin', path: '/metrics' }]);
  t.equal(monitor.metadata.labels.release, 'prometheus');

  const pdb = r.one('PodDisruptionBudget');
  t.ok(selects(pdb.spec.selector.matchLabels, podLabels));
  t.equal(pdb.spec.minAvailable, 1);
  t.match(r.one('HorizontalPodAutoscaler').spec.metrics, [{ resource: { name: 'cpu' } }, { resource: { name: 'memory' } }]);

  const policy = r.one('NetworkPolicy');
  t.ok(selects(policy.spec.podSelector.matchLabels, podLabels));
  t.match(policy.spec.ingress, [
    { ports: [{ port: 'http' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }] },
    { ports: [{ port: 'admin' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }] },
  ]);
  t.equal(policy.spec.ingress.length, 2);

  t.strictSame(Object.keys(r.one('Secret').data).sort(), ['client-secret', 'session-key', 'session-key-1']);
  const env = podEnvironment(r);
  t.equal(env.LOG_LEVEL, 'debug');
  t.match(
    env,
    { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability.svc:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'gatehouse-prod' },
    'tracing.* becomes the standard OTEL_* variables (README, "Tracing")',
  );
  const check = await checkRenderedConfig(r, env);
  t.equal(check.code, 0, check.stderr);
  const effective = parse(check.stdout);
  t.match(effective.session, { store: 'rediss://redis.default.svc:6380/1', cookieName: '__Host-session_id', cookieSameSite: 'strict', ttl: '12h' });
  t.strictSame(effective.session.encryptionKeys, ['[redacted]', '[redacted]']);
  t.equal(effective.csrf.requiredHeader, 'X-Requested-With');
  t.equal(effective.server.shutdownGrace, '15s');
});

t.test('several replicas without Redis fail to render, with a message naming the value to set', async (t) => {
  const replicas = await helm.template(['minimal.yaml'], ['replicaCount=3']);
  t.not(replicas.code, 0);
  t.strictSame(replicas.objects, []);
  t.match(
    replicas.stderr,
    'replicaCount is 3 but config.session.store is sqlite:///data/gatehouse.sqlite: several replicas must share one session store, so set config.session.store to a redis://HOST:PORT/DB or rediss://HOST:PORT/DB URL, or a redis+sentinel:// or redis+cluster:// one',
  );
  const autoscaled = await helm.template(['minimal.yaml'], ['autoscaling.enabled=true', 'autoscaling.maxReplicas=4']);
  t.not(autoscaled.code, 0);
  t.match(autoscaled.stderr, 'autoscaling.maxReplicas is 4 but config.session.store is sqlite:///data/gatehouse.sqlite');
  const memory = await helm.template(['minimal.yaml'], ['replicaCount=2', 'config.session.store=memory://']);
  t.not(memory.code, 0);
  t.match(memory.stderr, 'replicaCount is 2 but config.session.store is memory://');
  const redis = await helm.template(['minimal.yaml'], ['replicaCount=3', 'config.session.store=redis://redis:6379/0']);
  t.equal(redis.code, 0, `the same with Redis renders: ${redis.stderr}`);
  t.equal(redis.one('Deployment').spec.replicas, 3);
  t.notOk(redis.kinds().includes('PersistentVolumeClaim'));
});

t.test('Redis Sentinel and Cluster stores are shared stores: several replicas render, and check accepts them with the password redacted', async (t) => {
  const stores: Array<[string, string]> = [
    [
      'redis+sentinel://:${REDIS_PASSWORD}@sentinel-0.redis:26379,sentinel-1.redis:26379,sentinel-2.redis:26379/mymaster/0',
      'redis+sentinel://:[redacted]@sentinel-0.redis:26379,sentinel-1.redis:26379,sentinel-2.redis:26379/mymaster/0',
    ],
    ['rediss+cluster://:${REDIS_PASSWORD}@cluster-0.redis:6379,cluster-1.redis:6379', 'rediss+cluster://:[redacted]@cluster-0.redis:6379,cluster-1.redis:6379'],
  ];
  for (const [store, printed] of stores) {
    const r = await helm.template(['redis-3-replicas-hpa.yaml'], [`config.session.store=${store.replaceAll(',', '\\,')}`]);
    t.equal(r.code, 0, r.stderr);
    t.ok(r.kinds().includes('HorizontalPodAutoscaler'));
    t.notOk(r.kinds().includes('PersistentVolumeClaim'));
    const check = await checkRenderedConfig(r, podEnvironment(r, { 'redis-password': 'redis-pw-123' }));
    t.equal(check.code, 0, check.stderr);
    t.equal(parse(check.stdout).session.store, printed);
    t.notMatch(check.stdout, /redis-pw-123/);
  }
});

t.test('renderings the chart refuses: SQLite off the volume, keys the chart sets, missing required values', async (t) => {
  const refusals: Array<[string[], string[], string]> = [
    [['minimal.yaml'], ['config.session.store=sqlite:///var/lib/gatehouse.sqlite'], 'a SQLite file must be under /data'],
    [['minimal.yaml'], ['config.server.port=9000'], 'config.server.port is set by the chart'],
    [['minimal.yaml'], ['config.session.encryptionKeys={abc}'], 'config.session.encryptionKeys is set by the chart'],
    [[], [], 'config.server.publicUrl is required'],
    [['minimal.yaml'], ['config.provider.clientId='], 'config.provider.clientId is required'],
    [['minimal.yaml'], ['config.upstream='], 'config.upstream is required'],
    [['minimal.yaml'], ['secret.sessionKeys=null'], 'secret.sessionKeys needs at least one key'],
  ];
  for (const [files, set, message] of refusals) {
    const r = await helm.template(files, set);
    t.not(r.code, 0, `${set.join(' ')} is refused`);
    t.match(r.stderr, message);
  }
});

t.test('one replica without persistence: an emptyDir for /data, no PVC, a rolling update', async (t) => {
  const r = await helm.template(['minimal.yaml'], ['persistence.enabled=false']);
  t.equal(r.code, 0, r.stderr);
  t.notOk(r.kinds().includes('PersistentVolumeClaim'));
  const deployment = r.one('Deployment');
  t.notOk(deployment.spec.strategy);
  t.strictSame((deployment.spec.template.spec.volumes as K8sObject[]).find((volume) => volume.name === 'data')!.emptyDir, {});
});
