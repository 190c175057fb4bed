import t from 'tap';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { ROOT } from '../helpers/cli-process.js';

/**
 * The supported Node.js majors (README, "Supported Node.js versions") are
 * named in four places that must agree: package.json "engines", the majors
 * .ci/run runs the suite on, the Dockerfile's base image (the newest one)
 * and the README. Every dependency in the lockfile must admit the oldest
 * release of each supported major, or `npm ci` warns EBADENGINE there.
 */

/**
 * npm's own range semantics, from the `semver` package that production
 * dependencies already pull in (not declared here: a dev dependency is
 * kept out of the image, test/deploy/image.test.ts, and this one is in it).
 */
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string, options?: { includePrerelease?: boolean }): boolean };

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean }>;
};
const ciRun = readFileSync(join(ROOT, '.ci/run'), 'utf8');
const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

const majors = (/^NODE_MAJORS="([\d ]+)"$/m.exec(ciRun)?.[1] ?? '').split(' ').filter(Boolean).map(Number);
const engines = pkg.engines.node;

/** The oldest release of `major` that "engines" admits (patch releases ignored: x.y.0). */
function oldestAdmitted(major: number): string | undefined {
  for (let minor = 0; minor < 100; minor++) {
    const version = `${major}.${minor}.0`;
    if (semver.satisfies(version, engines)) return version;
  }
  return undefined;
}

t.test('.ci/run names the supported majors, and "engines" admits each of them and nothing older', async (t) => {
  t.strictSame(majors, [22, 24], 'Node.js 22 and 24 LTS; 20 reached end of life in April 2026');
  for (const major of majors) t.ok(oldestAdmitted(major), `engines ${engines} admits Node.js ${major}`);
  t.notOk(semver.satisfies('20.19.0', engines), 'Node.js 20 is not admitted');
  t.notOk(semver.satisfies('23.11.0', engines), 'the odd, short-lived 23 is not admitted');
  // .ci/run names the major it runs the suite on; a newcomer's `npm test` runs on whatever node the machine has.
  const ciMajor = process.env.GATEHOUSE_CI_NODE_MAJOR;
  if (ciMajor !== undefined) t.equal(process.versions.node.split('.')[0], ciMajor, `.ci/run's Node.js ${ciMajor} run really runs on it (${process.version})`);
});

t.test('the image is built FROM the newest supported major', async (t) => {
  const image = /^ARG NODE_IMAGE=node:(\d+)-bookworm-slim$/m.exec(dockerfile);
  t.ok(image, 'ARG NODE_IMAGE=node:<major>-bookworm-slim');
  t.equal(Number(image?.[1]), majors.at(-1), 'Node.js 24 LTS');
  t.match(dockerfile, /^FROM \$\{NODE_IMAGE\}$/m, 'the final stage uses it');
});

t.test('every dependency in the lockfile admits the oldest release of each supported major (no EBADENGINE)', async (t) => {
  let checked = 0;
  for (const major of majors) {
    const version = oldestAdmitted(major)!;
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (path === '' || range === undefined) continue;
      checked++;
      if (!semver.satisfies(version, range, { includePrerelease: true })) refusing.push(`${path} (${range})`);
    }
    t.strictSame(refusing, [], `every "engines" admits ${version}`);
  }
  t.ok(checked > 20, `${checked} ranges checked`);
});

t.test("the chart's appVersion, the image tag it deploys by default, is the package version: a new runtime is a new tag", async (t) => {
  const chart = readFileSync(join(ROOT, 'helm/gatehouse/Chart.yaml'), 'utf8');
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  t.equal(/^appVersion: "([^"]+)"$/m.exec(chart)?.[1], version);
  t.ok(semver.satisfies(version, '>=0.2.0'), `${version}: past 0.1.0, the last image on Node.js 20`);
});

t.test('the README names every supported major', async (t) => {
  const section = /## Supported Node\.js versions\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
  t.not(section, '', 'README has a "Supported Node.js versions" section');
  for (const major of majors) t.match(section, new RegExp(`\\b${major}\\b`), `names Node.js ${major}`);
});
