import t from 'tap';
import { extractHelm, type Helm, type K8sObject } from './chart.js';

/**
 * SECURITY.md: the chart's NetworkPolicy is on by default. The admin port
 * (/metrics, /readyz) is reachable only from the release's namespace, or
 * from the Prometheus peers given in networkPolicy.adminFrom; egress is
 * limited to DNS, the authorization server, the upstream and a Redis store,
 * on the ports of their URLs. Rendered by a real Helm 4.
 */
let helm: Helm;
t.before(async () => {
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

type Rule = { ports: Array<{ port: string | number; protocol: string }>; from?: unknown[]; to?: unknown[] };
const ports = (rule: Rule) => rule.ports.map((port) => `${port.port}/${port.protocol}`);

t.test('by default: the admin port from the namespace only, egress to DNS, the AS, the upstream', async (t) => {
  const r = await helm.template(['minimal.yaml']);
  t.equal(r.code, 0, r.stderr);
  const policy = r.one('NetworkPolicy') as K8sObject;
  t.strictSame(policy.spec.policyTypes, ['Ingress', 'Egress']);
  const [http, admin] = policy.spec.ingress as [Rule, Rule];
  t.strictSame(ports(http), ['http/TCP']);
  t.equal(http.from, undefined, 'the public port is open to any peer');
  t.strictSame(ports(admin), ['admin/TCP']);
  t.strictSame(admin.from, [{ podSelector: {} }], 'the admin port: pods of this namespace only');
  const egress = (policy.spec.egress as Rule[]).map(ports);
  t.strictSame(egress, [['53/UDP', '53/TCP'], ['443/TCP'], ['8080/TCP']], 'DNS, the AS (https), the upstream (its URL port)');
});

t.test('a configured Prometheus selector, a Redis store and narrowed peers', async (t) => {
  const prometheus = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { app: 'prometheus' } } };
  const r = await helm.template(
    ['redis-3-replicas-hpa.yaml'],
    [
      'networkPolicy.adminFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring',
      'networkPolicy.adminFrom[0].podSelector.matchLabels.app=prometheus',
      'networkPolicy.egress.authorizationServerTo[0].ipBlock.cidr=203.0.113.0/24',
      'config.provider.issuer=https://idp.example.com:8443/realms/x',
    ],
  );
  t.equal(r.code, 0, r.stderr);
  const policy = r.one('NetworkPolicy') as K8sObject;
  t.strictSame((policy.spec.ingress as Rule[])[1]!.from, [prometheus], 'the admin port from the Prometheus peers only');
  const egress = policy.spec.egress as Rule[];
  t.strictSame(egress.map(ports), [['53/UDP', '53/TCP'], ['8443/TCP'], ['8080/TCP'], ['6379/TCP']], 'the Redis port from the store URL (a ${VARIABLE} in it is fine)');
  t.strictSame(egress[1]!.to, [{ ipBlock: { cidr: '203.0.113.0/24' } }], 'the AS rule narrowed to its peers');
});

t.test('turned off on request', async (t) => {
  const unrestricted = await helm.template(['minimal.yaml'], ['networkPolicy.egress.restrict=false']);
  t.strictSame((unrestricted.one('NetworkPolicy') as K8sObject).spec.policyTypes, ['Ingress'], 'egress unrestricted');
  t.equal((unrestricted.one('NetworkPolicy') as K8sObject).spec.egress, undefined);
  const off = await helm.template(['minimal.yaml'], ['networkPolicy.enabled=false']);
  t.notOk(off.kinds().includes('NetworkPolicy'));
});
