import { execFile } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Just enough of a Dockerfile interpreter to lay out, without a Docker
 * engine, the file system the final image would have: the final stage's
 * COPY, WORKDIR, ENV, USER, VOLUME and ENTRYPOINT lines are followed as
 * written, so the test breaks when the Dockerfile and the application drift
 * apart (a file the runtime needs that is not copied, a dev-only dependency
 * the runtime imports, a write outside the volume).
 */

export interface Instruction {
  keyword: string;
  args: string;
}

export interface Stage {
  name?: string;
  instructions: Instruction[];
}

/** Stages with their instructions; comments dropped, `\` continuations joined. */
export function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(pending + line);
    pending = '';
  }
  const stages: Stage[] = [];
  for (const line of logical) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    if (keyword.toUpperCase() === 'FROM') {
      const name = /\sAS\s+(\S+)$/i.exec(args)?.[1];
      stages.push(name === undefined ? { instructions: [] } : { name, instructions: [] });
    } else if (stages.length > 0) {
      stages.at(-1)!.instructions.push({ keyword: keyword.toUpperCase(), args });
    }
  }
  return stages;
}

export interface Copy {
  from?: string;
  sources: string[];
  destination: string;
}

/** `COPY [--from=S] [--chown=...] SRC... DEST`, shell or JSON form. */
export function parseCopy(args: string): Copy {
  const words = args.trim().startsWith('[') ? (JSON.parse(args) as string[]) : args.trim().split(/\s+/);
  let from: string | undefined;
  const rest: string[] = [];
  for (const word of words) {
    if (word.startsWith('--from=')) from = word.slice('--from='.length);
    else if (!word.startsWith('--')) rest.push(word);
  }
  return { ...(from === undefined ? {} : { from }), sources: rest.slice(0, -1), destination: rest.at(-1)! };
}

/** The image as laid out under a host directory. */
export interface ImageLayout {
  /** Host directory standing for the image's `/`. */
  root: string;
  /** ENTRYPOINT, image paths mapped under `root`. */
  entrypoint: string[];
  workdir: string;
  env: Record<string, string>;
  /** `USER uid[:gid]` of the final stage, numeric. */
  user?: { uid: number; gid: number };
  /** Host paths of the VOLUME directories. */
  volumes: string[];
  /** Every path of the repository copied from the build context (for the .dockerignore check). */
  contextSources: string[];
}

export interface LayoutOptions {
  /** The repository: the build context, and the build stage once `npm run build` has run. */
  context: string;
  /** Where the deps stage's own root is laid out. */
  depsRoot: string;
  root: string;
}

/**
 * Lays out the final stage under `options.root`. A COPY --from the stage
 * that runs `npm run build` takes from the repository (built by `npm test`);
 * a COPY --from the stage that runs `npm ci --omit=dev` takes from a real
 * run of that stage's COPY and `npm ci` lines under `options.depsRoot`.
 * RUN lines of the final stage (user and directory creation) are stood in
 * for by the VOLUME directories being owned by the final USER.
 */
export async function layOutImage(dockerfile: string, options: LayoutOptions): Promise<ImageLayout> {
  const stages = parseDockerfile(dockerfile);
  const final = stages.at(-1)!;
  const contextSources: string[] = [];
  const byName = new Map(stages.filter((stage) => stage.name !== undefined).map((stage) => [stage.name!, stage]));
  const built = new Map<string, (imagePath: string) => string>();

  const stageSource = async (name: string): Promise<(imagePath: string) => string> => {
    const known = built.get(name);
    if (known) return known;
    const stage = byName.get(name);
    if (!stage) throw new Error(`COPY --from=${name}: no such stage`);
    const runs = stage.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    let resolve: (imagePath: string) => string;
    if (runs.some((run) => /\bnpm run build\b/.test(run))) {
      // The build stage copies parts of the context into its WORKDIR and builds there: the repository after `npm run build`.
      const workdir = stage.instructions.filter((i) => i.keyword === 'WORKDIR').at(-1)!.args;
      resolve = (imagePath) => join(options.context, posix.relative(workdir, imagePath));
      for (const copy of stage.instructions.filter((i) => i.keyword === 'COPY').map((i) => parseCopy(i.args))) contextSources.push(...copy.sources);
    } else {
      resolve = await runStage(stage, options.depsRoot, options.context, contextSources);
    }
    built.set(name, resolve);
    return resolve;
  };

  let workdir = '/';
  const env: Record<string, string> = {};
  let user: ImageLayout['user'];
  const volumes: string[] = [];
  let entrypoint: string[] = [];
  const host = (imagePath: string) => join(options.root, imagePath);
  mkdirSync(options.root, { recursive: true });
  chmodSync(options.root, 0o755);
  for (const { keyword, args } of final.instructions) {
    if (keyword === 'WORKDIR') {
      workdir = posix.resolve(workdir, args);
      mkdirSync(host(workdir), { recursive: true });
    } else if (keyword === 'ENV') {
      for (const [, name, value] of args.matchAll(/(\w+)=(\S+)/g)) env[name!] = value!;
    } else if (keyword === 'USER') {
      const [uid, gid = uid] = args.split(':').map(Number);
      user = { uid: uid!, gid: gid! };
    } else if (keyword === 'VOLUME') {
      for (const path of JSON.parse(args) as string[]) volumes.push(host(path));
    } else if (keyword === 'ENTRYPOINT') {
      entrypoint = JSON.parse(args) as string[];
    } else if (keyword === 'COPY') {
      const copy = parseCopy(args);
      const source = copy.from === undefined ? (path: string) => join(options.context, path) : await stageSource(copy.from);
      if (copy.from === undefined) contextSources.push(...copy.sources);
      copyInto(copy, source, host(posix.resolve(workdir, copy.destination)));
    }
  }
  for (const volume of volumes) {
    mkdirSync(volume, { recursive: true });
    // Only root may hand a directory to another user; the test then runs the gateway as the current user.
    if (user && process.getuid?.() === 0) chownSync(volume, user.uid, user.gid);
  }
  const mapped = entrypoint.map((word) => (word.startsWith('/') ? host(word) : word));
  return { root: options.root, entrypoint: mapped, workdir: host(workdir), env, ...(user ? { user } : {}), volumes, contextSources: [...new Set(contextSources)] };
}

/** Runs a dependency stage for real: its context COPY lines, then the `npm ci` of its RUN lines. */
async function runStage(stage: Stage, root: string, context: string, contextSources: string[]): Promise<(imagePath: string) => string> {
  let workdir = '/';
  const host = (imagePath: string) => join(root, imagePath);
  for (const { keyword, args } of stage.instructions) {
    if (keyword === 'WORKDIR') {
      workdir = posix.resolve(workdir, args);
      mkdirSync(host(workdir), { recursive: true });
    } else if (keyword === 'COPY') {
      const copy = parseCopy(args);
      if (copy.from !== undefined) throw new Error('a dependency stage copies from the context only');
      contextSources.push(...copy.sources);
      copyInto(copy, (path) => join(context, path), host(posix.resolve(workdir, copy.destination)));
    } else if (keyword === 'RUN') {
      // apt-get (the compiler toolchain, present on the test machine) and
      // `npm cache clean` (which would empty the machine's shared cache) are not run.
      for (const command of args.split('&&').map((part) => part.trim())) {
        if (!command.startsWith('npm ci')) continue;
        const [, ...npmArgs] = command.split(/\s+/);
        await run(...withoutTestRunner('npm', npmArgs), { cwd: host(workdir), env: npmEnvironment(), maxBuffer: 64 * 1024 * 1024 });
      }
    }
  }
  return host;
}

/**
 * A command line that runs `command` without the test runner's NODE_OPTIONS.
 * tap's process-info hook wraps every spawn and puts its loader back into
 * NODE_OPTIONS whatever env the spawn is given; `env -u` drops it again right
 * before exec, so the child is what the image would run (and one running as
 * another user does not try to write tap's process records).
 */
export function withoutTestRunner(command: string, args: string[]): [string, string[]] {
  return ['env', ['-u', 'NODE_OPTIONS', command, ...args]];
}

/**
 * The environment of an npm run in a fresh build stage: the machine's own
 * (npm configuration, cache, certificates), without the test runner's
 * NODE_OPTIONS (its loader) and TAP variables.
 */
function npmEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'NODE_OPTIONS' && !/^_?TAP/.test(name)));
}

/** Docker's COPY: a directory source copies its contents; several sources or a trailing `/` mean DEST is a directory. */
function copyInto(copy: Copy, source: (path: string) => string, destination: string): void {
  const intoDirectory = copy.sources.length > 1 || copy.destination.endsWith('/');
  for (const path of copy.sources) {
    const from = source(path);
    if (!existsSync(from)) throw new Error(`COPY ${path}: ${relative(process.cwd(), from)} does not exist`);
    const to = statSync(from).isDirectory() ? destination : intoDirectory ? join(destination, posix.basename(path)) : destination;
    mkdirSync(statSync(from).isDirectory() ? to : dirname(to), { recursive: true });
    cpSync(from, to, { recursive: true });
  }
}

/** Whether `.dockerignore` lets `path` into the build context (last matching rule wins, as in Docker). */
export function allowedByDockerignore(dockerignore: string, path: string): boolean {
  let allowed = true;
  for (const raw of dockerignore.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    const pattern = (negated ? line.slice(1) : line).replace(/^\/+|\/+$/g, '');
    if (globMatches(pattern, path)) allowed = negated;
  }
  return allowed;
}

/** A pattern matches the path itself or one of its parent directories. */
function globMatches(pattern: string, path: string): boolean {
  const source = pattern
    .split('**')
    .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]'))
    .join('.*');
  const regex = new RegExp(`^${source}$`);
  const parts = path.split('/');
  return parts.some((_, index) => regex.test(parts.slice(0, index + 1).join('/')));
}

/** The Dockerfile's text. */
export function readDockerfile(root: string): string {
  return readFileSync(join(root, 'Dockerfile'), 'utf8');
}
