import t from 'tap';
import { parse } from 'yaml';
import { checkRenderedConfig, extractHelm, podEnvironment, type Helm, type K8sObject } from './chart.js';

/**
 * README "Several sites" in the chart: config.sites passes the values schema
 * and `gatehouse check`, the Ingress gets one rule per site host (lower
 * case, without a port or trailing dot), forward-auth mode sends each site's
 * hand-off path to the gateway, and the NetworkPolicy lets the gateway reach
 * every site's upstreams. Rendered by a real Helm 4.
 */
let helm: Helm;
t.before(async () => {
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

type Rule = { host: string; http: { paths: Array<{ path: string; pathType: string }> } };

t.test('one Ingress rule per site host, beside ingress.hosts', async (t) => {
  const r = await helm.template(['sites.yaml']);
  t.equal(r.code, 0, r.stderr);
  const rules = (r.one('Ingress') as K8sObject).spec.rules as Rule[];
  t.strictSame(
    rules.map((rule) => [rule.host, rule.http.paths.map((path) => `${path.pathType} ${path.path}`)]),
    [
      ['auth.example.com', ['Prefix /']],
      ['app.example.com', ['Prefix /']],
      ['grafana.example.com', ['Prefix /']],
    ],
  );
  const egress = ((r.one('NetworkPolicy') as K8sObject).spec.egress as Array<{ ports: Array<{ port: number }> }>).flatMap((rule) => rule.ports.map((port) => port.port));
  t.ok(egress.includes(8081) && egress.includes(3001), `the sites' upstream ports are reachable (${egress.join(', ')})`);
});

t.test('the rendered config passes gatehouse check', async (t) => {
  const r = await helm.template(['sites.yaml']);
  const configMap = r.one('ConfigMap') as K8sObject;
  const config = parse(Object.values(configMap.data as Record<string, string>)[0]!) as { sites: unknown[] };
  t.equal(config.sites.length, 2);
  const check = await checkRenderedConfig(r, podEnvironment(r));
  t.equal(check.code, 0, check.stderr);
});

t.test('forward-auth mode: each site host gets the gateway\'s own paths, the hand-off path among them', async (t) => {
  const r = await helm.template(['sites.yaml'], ['forwardAuth.enabled=true', 'config.forwardAuth.trustedProxies[0]=10.0.0.0/8', 'networkPolicy.httpFrom[0].ipBlock.cidr=10.0.0.0/8']);
  t.equal(r.code, 0, r.stderr);
  const rules = (r.one('Ingress') as K8sObject).spec.rules as Rule[];
  const app = rules.find((rule) => rule.host === 'app.example.com');
  t.ok(app?.http.paths.some((path) => path.path === '/.gatehouse/handoff' && path.pathType === 'Exact'), 'the hand-off path');
});

t.test('a site host that is not a host name is refused by the values schema', async (t) => {
  const r = await helm.template(['sites.yaml'], ['config.sites[0].host=https://app.example.com/x']);
  t.not(r.code, 0);
  t.match(r.stderr, /sites/);
});
