import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { RECIPES } from './front-proxy.js';

/** README "Behind nginx, Caddy, Traefik or Envoy" shows the recipes the tests run, byte for byte. */
t.test('the README quotes the tested recipes as they are', async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  for (const [file, fence] of [
    ['nginx.conf', 'nginx'],
    ['Caddyfile', 'caddy'],
    ['gatehouse.yaml', 'yaml'],
  ]) {
    const text = readFileSync(join(RECIPES, file), 'utf8');
    t.ok(readme.includes(`\`\`\`${fence}\n${text}\`\`\``), `docs/forward-auth/${file}`);
  }
});
