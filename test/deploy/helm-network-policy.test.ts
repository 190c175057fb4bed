import t from 'tap';
import { parse } from 'yaml';
import { checkRenderedConfig, extractHelm, podEnvironment, type Helm, type K8sObject } from './chart.js';

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

t.test('with routes: egress to every distinct route upstream port, none in forward-auth mode', async (t) => {
  // routes.yaml: /api on :8080, /assets/ and / on :3000; a fourth route on
  // https without a port adds 443, the scheme's default.
  const r = await helm.template(['routes.yaml'], ['config.routes[3].path=/docs', 'config.routes[3].upstream=https://docs.example.com', 'config.routes[3].auth=public']);
  t.equal(r.code, 0, r.stderr);
  const egress = (r.one('NetworkPolicy') as K8sObject).spec.egress as Rule[];
  t.strictSame(egress.map(ports), [['53/UDP', '53/TCP'], ['443/TCP'], ['8080/TCP', '3000/TCP', '443/TCP']], 'DNS, the AS, each route upstream port once');
  const check = await checkRenderedConfig(r, podEnvironment(r));
  t.equal(check.code, 0, check.stderr);
  t.strictSame(
    parse(check.stdout).routes.map((route: { upstream: string }) => route.upstream),
    ['http://api.default.svc:8080/v1', 'http://web.default.svc:3000', 'http://web.default.svc:3000', 'https://docs.example.com'],
    'the routes the policy was derived from are the ones the gateway runs',
  );

  const narrowed = await helm.template(['routes.yaml'], ['networkPolicy.egress.upstreamTo[0].namespaceSelector.matchLabels.team=web']);
  const upstreams = ((narrowed.one('NetworkPolicy') as K8sObject).spec.egress as Rule[])[2]!;
  t.strictSame(ports(upstreams), ['8080/TCP', '3000/TCP']);
  t.strictSame(upstreams.to, [{ namespaceSelector: { matchLabels: { team: 'web' } } }], 'the upstream rule narrowed to its peers');

  const forwardAuth = await helm.template(
    ['routes.yaml'],
    ['forwardAuth.enabled=true', 'config.forwardAuth.trustedProxies[0]=10.42.0.0/16', 'networkPolicy.httpFrom[0].podSelector.matchLabels.app=ingress'],
  );
  t.equal(forwardAuth.code, 0, forwardAuth.stderr);
  t.strictSame(
    ((forwardAuth.one('NetworkPolicy') as K8sObject).spec.egress as Rule[]).map(ports),
    [['53/UDP', '53/TCP'], ['443/TCP']],
    'forward-auth mode proxies nothing: no route upstream reachable',
  );
});

t.test('turned off on request', async (t) => {
  const unrestricted = await helm.template(['minimal.yaml'], ['networkPolicy.egress.restrict=false']);
  t.strictSame((unrestricted.one('NetworkPolicy') as K8sObject).spec.policyTypes, ['Ingress'], 'egress unrestricted');
  t.equal((unrestricted.one('NetworkPolicy') as K8sObject).spec.egress, undefined);
  const off = await helm.template(['minimal.yaml'], ['networkPolicy.enabled=false']);
  t.notOk(off.kinds().includes('NetworkPolicy'));
});

t.test('forward-auth mode: only the Ingress controller reaches the gateway, no upstream, the Ingress carries the gateway paths only', async (t) => {
  const r = await helm.template(['forward-auth.yaml']);
  t.equal(r.code, 0, r.stderr);
  const policy = r.one('NetworkPolicy') as K8sObject;
  const [http] = policy.spec.ingress as [Rule];
  t.strictSame(ports(http), ['http/TCP']);
  t.strictSame(http.from, [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }], 'the public port, /forward-auth with it: the controller only');
  t.strictSame((policy.spec.egress as Rule[]).map(ports), [['53/UDP', '53/TCP'], ['443/TCP']], 'DNS and the AS; no upstream');
  const paths = (r.one('Ingress') as K8sObject).spec.rules[0].http.paths as K8sObject[];
  t.strictSame(
    paths.map((path) => `${path.pathType} ${path.path}`),
    ['Exact /backchannel-logout', 'Exact /callback', 'Exact /login', 'Exact /logout', 'Exact /session', 'Exact /signed-out'],
    "the gateway's own paths, nothing else",
  );
  const check = await checkRenderedConfig(r, podEnvironment(r));
  t.equal(check.code, 0, check.stderr);
  const effective = parse(check.stdout);
  t.strictSame(effective.forwardAuth, { trustedProxies: ['10.42.0.0/16'], redirect: false, only: true }, 'the gateway proxies nothing in forward-auth mode');
  t.strictSame(effective.server.trustProxy, ['10.42.0.0/16']);
});

t.test('forward-auth mode refuses to render without trusted proxies or without httpFrom', async (t) => {
  const noProxies = await helm.template(['minimal.yaml'], ['forwardAuth.enabled=true', 'networkPolicy.httpFrom[0].podSelector.matchLabels.app=ingress']);
  t.not(noProxies.code, 0);
  t.match(noProxies.stderr, /config\.forwardAuth\.trustedProxies is required with forwardAuth\.enabled/);
  const open = await helm.template(['forward-auth.yaml'], ['networkPolicy.httpFrom=null']);
  t.not(open.code, 0);
  t.match(open.stderr, /networkPolicy\.httpFrom is required with forwardAuth\.enabled/);
  const withoutUpstream = await helm.template(['minimal.yaml'], ['config.upstream=']);
  t.match(withoutUpstream.stderr, /config\.upstream is required.*or set forwardAuth\.enabled/, 'outside forward-auth mode the upstream is still required');
});
