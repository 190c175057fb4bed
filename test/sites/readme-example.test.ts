import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { Sites } from '../../src/access/sites.js';
import { KEY } from '../config/config-helpers.js';

/** README "Two sites on one machine": the example is a config `check` accepts, with the sites it says. */
t.test('the README two-site example loads, with auth.localhost as the sign-in host', async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('### Two sites on one machine'));
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  if (!t.ok(yaml, 'the section has a YAML example')) return;
  // `gatehouse demo` puts its own provider in; a fresh key stands for the one it makes.
  const example = parse(yaml!) as { session: Record<string, unknown> } & Record<string, unknown>;
  const document = { ...example, session: { ...example.session, encryptionKeys: [KEY] }, provider: { issuer: 'http://127.0.0.1:9000', clientId: 'demo', clientSecret: 'demo-secret' } };
  const config = loadConfig(document, {});
  const sites = new Sites(config, false);
  t.strictSame(
    sites.all.map((site) => [site.name, site.origin]),
    [
      ['auth.localhost:8080', 'http://auth.localhost:8080'],
      ['app.localhost', 'http://app.localhost:8080'],
      ['grafana.localhost', 'http://grafana.localhost:8080'],
    ],
  );
  t.equal(sites.of({ host: 'app.localhost:8080' }, '127.0.0.1')?.name, 'app.localhost');
  t.equal(sites.of({ host: 'other.localhost:8080' }, '127.0.0.1'), undefined);
});
