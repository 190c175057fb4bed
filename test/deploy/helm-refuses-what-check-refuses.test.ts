import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseDocument } from 'yaml';
import { ensureBuilt } from '../helpers/cli-process.js';
import { CHART, VALUES, checkContainer, extractHelm, gatewayContainer, runCheckContainer, type Helm } from './chart.js';

/**
 * README "Run in Kubernetes": the chart refuses what `gatehouse check`
 * refuses wherever values.schema.json can say it, so `helm install`/`helm
 * lint` fail naming the key instead of a pod that crash-loops; and what
 * only check can see is caught by the `check` init container, which runs
 * check's own command line on the rendered config with the pod's
 * environment. Every refusal below is shown on both sides: the schema
 * refuses the values (a message naming the key), and the same values
 * rendered past the schema (--skip-schema-validation) are refused by the
 * init container's real `gatehouse check` with check's message. Values check
 * accepts, the schema accepts too.
 */

let helm: Helm;
t.before(async () => {
  ensureBuilt();
  helm = await extractHelm();
});
t.teardown(() => helm?.close());

interface Refusal {
  name: string;
  values: string;
  /** --set-json pairs. */
  set: string[];
  /** Where Helm's message points (a JSON pointer into the values), or a text it shows. */
  schema: string;
  /** check's message for the same config. */
  check: RegExp;
}

const REFUSALS: Refusal[] = [
  {
    name: 'an http publicUrl on a public host',
    values: 'minimal.yaml',
    set: ['config.server.publicUrl="http://app.example.com"'],
    schema: "at '/config/server/publicUrl'",
    check: /^server\.publicUrl: must use https on app\.example\.com/m,
  },
  {
    name: 'a publicUrl with a query',
    values: 'minimal.yaml',
    set: ['config.server.publicUrl="https://app.example.com/?a=1"'],
    schema: "at '/config/server/publicUrl'",
    check: /^server\.publicUrl: must not contain a query, fragment or credentials/m,
  },
  {
    name: 'an ftp upstream',
    values: 'minimal.yaml',
    set: ['config.upstream="ftp://files.example.com"'],
    schema: "at '/config/upstream'",
    check: /^upstream: must be an absolute http\(s\) URL/m,
  },
  {
    name: "an ftp route upstream",
    values: 'routes.yaml',
    set: ['config.routes[0].upstream="ftp://files.example.com"'],
    schema: "at '/config/routes/0/upstream'",
    check: /^routes\[0\]\.upstream: must be an absolute http\(s\) URL/m,
  },
  {
    name: 'a route upstream with credentials',
    values: 'routes.yaml',
    set: ['config.routes[0].upstream="http://user:pw@api.default.svc:8080"'],
    schema: "at '/config/routes/0/upstream'",
    check: /^routes\[0\]\.upstream: must not contain a query, fragment or credentials/m,
  },
  {
    name: 'allow on a public route',
    values: 'routes.yaml',
    set: ['config.routes[1].allow={"emailDomains":["example.com"]}'],
    schema: "at '/config/routes/1/allow'",
    check: /^routes\[1\]\.allow: only on a route with auth: required \(it has auth: public\)/m,
  },
  {
    name: 'allow on an optional route',
    values: 'routes.yaml',
    set: ['config.routes[2].allow={"claims":{"groups":["staff"]}}'],
    schema: "at '/config/routes/2/allow'",
    check: /^routes\[2\]\.allow: only on a route with auth: required \(it has auth: optional\)/m,
  },
  {
    name: "an email domain written as '@corp.test'",
    values: 'routes.yaml',
    set: ['config.routes[0].allow.emailDomains=["@corp.test"]'],
    schema: "at '/config/routes/0/allow/emailDomains/0'",
    check: /^routes\[0\]\.allow\.emailDomains\[0\]: must be a domain such as example\.com/m,
  },
  {
    name: 'a header the gateway sets itself',
    values: 'routes.yaml',
    set: ['config.routes[0].headers={"Authorization":"email"}'],
    schema: "invalid propertyName 'Authorization'",
    check: /^routes\[0\]\.headers\.Authorization: the gateway sets this header itself/m,
  },
  {
    name: 'token: access on a public route',
    values: 'routes.yaml',
    set: ['config.routes[1].token="access"'],
    schema: "at '/config/routes/1/token'",
    check: /^routes\[1\]\.token: access is not allowed on a public route/m,
  },
  {
    name: 'bearer on a public route',
    values: 'routes.yaml',
    set: ['config.routes[1].accept=["session","bearer"]', 'config.machineClients={"introspection":true}'],
    schema: "at '/config/routes/1/accept'",
    check: /^routes\[1\]\.accept: bearer on a public route admits nothing/m,
  },
  {
    name: 'stepUp on an optional route',
    values: 'routes.yaml',
    set: ['config.routes[2].stepUp={"maxAge":"10m"}'],
    schema: "at '/config/routes/2/stepUp'",
    check: /^routes\[2\]\.stepUp: only on a route with auth: required/m,
  },
  {
    name: 'stepUp maxAge 0',
    values: 'routes.yaml',
    set: ['config.routes[0].stepUp={"maxAge":0}'],
    schema: "at '/config/routes/0/stepUp/maxAge'",
    check: /^routes\[0\]\.stepUp\.maxAge: must be greater than 0/m,
  },
  {
    name: 'a route path with a .. segment',
    values: 'routes.yaml',
    set: ['config.routes[0].path="/api/../admin"'],
    schema: "at '/config/routes/0/path'",
    check: /^routes\[0\]\.path: must be an absolute path such as \/api\/orders/m,
  },
  {
    name: 'an http issuer on a public host',
    values: 'minimal.yaml',
    set: ['config.provider.issuer="http://idp.example.com"'],
    schema: "at '/config/provider/issuer'",
    check: /^provider\.issuer: must use https/m,
  },
  {
    name: 'session.ttl 0',
    values: 'minimal.yaml',
    set: ['config.session.ttl="0h"'],
    schema: "at '/config/session/ttl'",
    check: /^session\.ttl: must be greater than 0/m,
  },
  {
    name: 'paths.login /',
    values: 'minimal.yaml',
    set: ['config.paths={"login":"/"}'],
    schema: "at '/config/paths/login'",
    check: /^paths\.login: must be an absolute path such as \/login, not \/ itself/m,
  },
  {
    name: 'cookieSameSite none with cookieSecure false',
    values: 'minimal.yaml',
    set: ['config.session.cookieSameSite="none"', 'config.session.cookieSecure=false'],
    schema: "at '/config/session/cookieSecure'",
    check: /^session\.cookieSameSite: none requires a Secure cookie/m,
  },
  {
    name: 'a csrf origin with a path',
    values: 'minimal.yaml',
    set: ['config.csrf={"allowedOrigins":["https://spa.example.com/"]}'],
    schema: "at '/config/csrf/allowedOrigins/0'",
    check: /^csrf\.allowedOrigins\[0\]: must be an origin/m,
  },
  {
    name: 'forward-auth with DPoP',
    values: 'forward-auth.yaml',
    set: ['config.provider.dpop=true'],
    schema: "at '/config/forwardAuth/trustedProxies'",
    check: /^forwardAuth\.trustedProxies: forward-auth cannot go with provider\.dpop/m,
  },
  {
    name: 'an admin token shorter than 32 characters',
    values: 'minimal.yaml',
    set: ['secret.adminToken="too-short"'],
    schema: "at '/secret/adminToken'",
    check: /^admin\.token: must be at least 32 characters/m,
  },
  {
    name: 'a token target on a public route',
    values: 'routes.yaml',
    set: ['config.routes[1].token={"scopes":["orders.read"]}'],
    schema: "at '/config/routes/1/token'",
    check: /^routes\[1\]\.token: a token target is not allowed on a public route/m,
  },
  {
    name: 'an identity assertion on a public route',
    values: 'routes.yaml',
    set: ['config.routes[1].assertion={}'],
    schema: "at '/config/routes/1/assertion'",
    check: /^routes\[1\]\.assertion: a public route has no user to assert/m,
  },
  {
    name: 'stepUp without acr or maxAge',
    values: 'routes.yaml',
    set: ['config.routes[0].stepUp={}'],
    schema: "at '/config/routes/0/stepUp'",
    check: /^routes\[0\]\.stepUp: give acr \(acceptable acr values\) and\/or maxAge/m,
  },
  {
    name: 'stepUp with accept: bearer',
    values: 'routes.yaml',
    set: ['config.routes[0].stepUp={"maxAge":"10m"}', 'config.routes[0].accept=["session","bearer"]', 'config.machineClients={"introspection":true}'],
    schema: "at '/config/routes/0/stepUp'",
    check: /^routes\[0\]\.stepUp: cannot go with accept: bearer/m,
  },
  {
    name: 'an assertion lifetime over an hour',
    values: 'minimal.yaml',
    set: ['config.assertion={"lifetime":7200}'],
    schema: "at '/config/assertion/lifetime'",
    check: /^assertion\.lifetime: must be at most 1h/m,
  },
  {
    name: 'a __Host- cookie that is not Secure',
    values: 'minimal.yaml',
    set: ['config.session.cookieName="__Host-session"', 'config.session.cookieSecure=false'],
    schema: "at '/config/session/cookieSecure'",
    check: /^session\.cookieName: a __Host- cookie must be Secure/m,
  },
  {
    name: 'pushedAuthorization: required without an issuer',
    values: 'minimal.yaml',
    set: [
      'config.provider.issuer=""',
      'config.provider.authorizationEndpoint="https://idp.example.com/authorize"',
      'config.provider.tokenEndpoint="https://idp.example.com/token"',
      'config.provider.userinfoEndpoint="https://idp.example.com/userinfo"',
      'config.provider.pushedAuthorization="required"',
    ],
    schema: "at '/config/provider/issuer'",
    check: /^provider\.pushedAuthorization: required needs provider\.issuer/m,
  },
  {
    name: 'a machine-client issuer over http off loopback',
    values: 'minimal.yaml',
    set: ['config.machineClients={"issuers":[{"issuer":"http://k8s.example.com","audiences":["gatehouse"]}]}'],
    schema: "at '/config/machineClients/issuers/0/issuer'",
    check: /^machineClients\.issuers\[0\]\.issuer: /m,
  },
  {
    name: 'securityEvents without its audience and jwksUri',
    values: 'minimal.yaml',
    set: ['config.securityEvents={"issuer":"https://idp.example.com"}'],
    schema: "at '/config/securityEvents'",
    check: /^securityEvents\.audience: required with securityEvents\.issuer/m,
  },
];

t.test('helm template and helm lint refuse, naming the key, what gatehouse check refuses; the check init container refuses it with check\'s message', async (t) => {
  for (const refusal of REFUSALS) {
    const setJson = refusal.set.flatMap((pair) => ['--set-json', pair]);
    const rendered = await helm.template([refusal.values], [], setJson);
    t.not(rendered.code, 0, `${refusal.name}: helm template refuses it`);
    t.match(rendered.stderr, "values don't meet the specifications of the schema", `${refusal.name}: the schema refuses it`);
    t.ok(rendered.stderr.includes(refusal.schema), `${refusal.name}: the message names the key (${refusal.schema}): ${rendered.stderr}`);
    const lint = await helm.run(['lint', CHART, '-f', join(VALUES, refusal.values), ...setJson]);
    t.not(lint.code, 0, `${refusal.name}: helm lint refuses it`);
    t.ok(lint.stdout.includes(refusal.schema) || lint.stderr.includes(refusal.schema), `${refusal.name}: lint names the key`);

    // Past the schema, the pod's own check stops the same values before the gateway starts.
    const unchecked = await helm.template([refusal.values], [], [...setJson, '--skip-schema-validation']);
    t.equal(unchecked.code, 0, `${refusal.name}: renders without the schema: ${unchecked.stderr}`);
    const check = await runCheckContainer(unchecked);
    t.equal(check.code, 1, `${refusal.name}: the check init container exits 1`);
    t.match(check.stderr, refusal.check, `${refusal.name}: with check's message`);
  }
});

t.test('values check accepts pass the schema, and the check init container accepts their rendered config', async (t) => {
  const accepted: Array<{ name: string; values: string; set: string[] }> = [
    { name: 'http publicUrl on localhost', values: 'minimal.yaml', set: ['config.server.publicUrl="http://localhost:8080"'] },
    { name: 'http publicUrl on a *.localhost name', values: 'minimal.yaml', set: ['config.server.publicUrl="http://gatehouse.localhost"'] },
    { name: 'http publicUrl on 127.0.0.0/8', values: 'minimal.yaml', set: ['config.server.publicUrl="http://127.0.0.2:8080"'] },
    { name: 'http publicUrl on [::1]', values: 'minimal.yaml', set: ['config.server.publicUrl="http://[::1]:8080"'] },
    { name: 'https publicUrl with a path', values: 'minimal.yaml', set: ['config.server.publicUrl="https://example.com/app"'] },
    { name: 'http issuer on localhost', values: 'minimal.yaml', set: ['config.provider.issuer="http://localhost:8090"'] },
    { name: 'https upstream with a path', values: 'minimal.yaml', set: ['config.upstream="https://my-app.default.svc:8443/base"'] },
    { name: 'allow on a required route, identity headers on an optional one', values: 'routes.yaml', set: ['config.routes[2].headers={"X-Forwarded-Email":"email"}'] },
    { name: 'token none on a public route', values: 'routes.yaml', set: ['config.routes[1].token="none"'] },
    { name: 'stepUp on a required route', values: 'routes.yaml', set: ['config.routes[0].stepUp={"acr":["urn:example:mfa"],"maxAge":"10m"}'] },
    { name: 'cookieSameSite none with a Secure cookie', values: 'minimal.yaml', set: ['config.session.cookieSameSite="none"', 'config.session.cookieSecure=true'] },
    { name: 'a csrf origin', values: 'minimal.yaml', set: ['config.csrf={"allowedOrigins":["https://spa.example.com"]}'] },
    { name: 'an admin token of 32 characters', values: 'minimal.yaml', set: [`secret.adminToken="${'a'.repeat(32)}"`] },
  ];
  for (const { name, values, set } of accepted) {
    const rendered = await helm.template([values], [], set.flatMap((pair) => ['--set-json', pair]));
    t.equal(rendered.code, 0, `${name}: helm template renders it: ${rendered.stderr}`);
    if (rendered.code !== 0) continue;
    const check = await runCheckContainer(rendered);
    t.equal(check.code, 0, `${name}: the check init container accepts it: ${check.stderr}`);
  }
});

t.test('the check init container runs gatehouse check with the gateway container\'s image, environment and volumes', async (t) => {
  for (const values of ['minimal.yaml', 'existing-secret.yaml', 'everything-on.yaml', 'routes.yaml', 'forward-auth.yaml']) {
    const rendered = await helm.template([values], [], ['--set-json', 'extraEnv=[{"name":"REDIS_PASSWORD","value":"x"}]']);
    t.equal(rendered.code, 0, `${values}: ${rendered.stderr}`);
    const init = checkContainer(rendered)!;
    const gateway = gatewayContainer(rendered);
    t.ok(init, `${values}: a check init container`);
    t.equal(init.image, gateway.image, `${values}: the gateway's image`);
    t.strictSame(init.args, ['check', '--config', '/etc/gatehouse/gatehouse.yaml'], `${values}: gatehouse check on the mounted config`);
    t.strictSame(gateway.args, ['--config', '/etc/gatehouse/gatehouse.yaml'], `${values}: the file the gateway reads`);
    t.equal(init.workingDir, gateway.workingDir, `${values}: the same working directory`);
    t.strictSame(init.env, gateway.env, `${values}: the same environment (secrets included)`);
    t.strictSame(init.volumeMounts, gateway.volumeMounts, `${values}: the same volumes`);
    t.strictSame(init.securityContext, gateway.securityContext, `${values}: the same hardened security context`);
    t.equal(init.terminationMessagePolicy, 'FallbackToLogsOnError', `${values}: check's message becomes the termination message (kubectl describe pod)`);
    const external: Record<string, string> = values === 'existing-secret.yaml' ? { 'oauth-client-secret': 'from-the-operator' } : {};
    const check = await runCheckContainer(rendered, external);
    t.equal(check.code, 0, `${values}: the check init container accepts the chart's config: ${check.stderr}`);
  }
  const off = await helm.template(['minimal.yaml'], ['configCheck.enabled=false']);
  t.equal(off.code, 0, off.stderr);
  t.equal(checkContainer(off), undefined, 'configCheck.enabled: false renders no init container');
});

t.test('the chart\'s JSON files hold no duplicate key (one of the two would silently win)', async (t) => {
  const duplicate = parseDocument('{"routes": {"type": "array"}, "routes": {"type": "object"}}');
  t.match(duplicate.errors.map((error) => error.message).join('\n'), /Map keys must be unique/, 'the parser refuses a duplicate key');
  const files = readdirSync(CHART, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.json'));
  t.ok(files.includes('values.schema.json'));
  for (const file of files) {
    const document = parseDocument(readFileSync(join(CHART, file), 'utf8'), { uniqueKeys: true });
    t.strictSame(
      document.errors.map((error) => error.message),
      [],
      `${file}: no duplicate key`,
    );
  }
});
