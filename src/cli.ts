#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { loadConfigFile } from './config/load.js';
import { renderConfig } from './config/render.js';
import { configWarnings } from './config/checks.js';
import { ConfigError } from './errors.js';
import type { Config } from './config/schema.js';
import { createLogger } from './logger.js';

const USAGE = `Usage:
  gatehouse [--config FILE]         run the gateway (or GATEHOUSE_CONFIG=FILE)
  gatehouse check [--config FILE] [--online]
                                    validate FILE; print the effective config, secrets redacted;
                                    --online also fetches the provider's discovery document
  gatehouse pseudonym USER [--config FILE]
                                    print USER's pseudonym in the logs (the userIdClaim value, e.g. an email)
  gatehouse demo [--upstream URL | --config FILE] [--email-domain DOMAIN]
                                    local authorization server + demo upstream + gateway on loopback;
                                    --upstream puts them in front of your own service instead,
                                    --config runs your config's routes against the demo authorization server,
                                    --email-domain gives the demo users addresses at DOMAIN (alice@DOMAIN)
  gatehouse --version               print the version
`;

const OPTIONS = {
  config: { type: 'string', short: 'c', value: 'FILE' },
  upstream: { type: 'string', value: 'URL' },
  'email-domain': { type: 'string', value: 'DOMAIN' },
  online: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const satisfies Record<string, { type: 'string' | 'boolean'; short?: string; value?: string }>;

/** Options that belong to `gatehouse demo` only. */
const DEMO_OPTIONS = ['upstream', 'email-domain'] as const;

/**
 * Reads argv. A mistyped or misused option gets one sentence that names it
 * and what was meant (`unknown option --confg; did you mean --config?`),
 * never parseArgs's own message about positionals and `--`.
 */
function parseCommandLine(args: string[]): { values: Partial<Record<keyof typeof OPTIONS, string | boolean>>; positionals: string[] } | { problem: string } {
  const { tokens } = parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: false, tokens: true });
  const values: Partial<Record<keyof typeof OPTIONS, string | boolean>> = {};
  const positionals: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value);
    if (token.kind !== 'option') continue;
    const option = OPTIONS[token.name as keyof typeof OPTIONS] as (typeof OPTIONS)[keyof typeof OPTIONS] | undefined;
    if (option === undefined) return { problem: `unknown option ${token.rawName}${nearestOption(token.name)}` };
    const name = token.name as keyof typeof OPTIONS;
    if (option.type === 'string') {
      // `--config --upstream x`: parseArgs would take the next option as the value.
      if (token.value === undefined || token.value === '' || (!token.inlineValue && token.value.startsWith('-'))) {
        return { problem: `--${name} needs a value: --${name} ${option.value}` };
      }
      values[name] = token.value;
    } else {
      if (token.inlineValue) return { problem: `--${name} takes no value` };
      values[name] = true;
    }
  }
  return { values, positionals };
}

/** `; did you mean --config?` for `--confg`, `--conifg`, `--Config`; empty when nothing is close. */
function nearestOption(name: string): string {
  const near = Object.keys(OPTIONS).find((known) => known === name.toLowerCase() || editDistance(known, name.toLowerCase()) <= 2);
  return near === undefined ? '' : `; did you mean --${near}?`;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/** The only place that reads argv, touches process.* and exits. */
async function main(): Promise<number> {
  const parsed = parseCommandLine(process.argv.slice(2));
  if ('problem' in parsed) {
    process.stderr.write(`gatehouse: ${parsed.problem}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const command = positionals[0] ?? 'run';
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${await packageVersion()}\n`);
    return 0;
  }
  const arity = command === 'pseudonym' ? 2 : 1;
  if (positionals.length > arity || !['run', 'check', 'demo', 'pseudonym'].includes(command)) {
    process.stderr.write(`unknown command: ${positionals.join(' ')}\n${USAGE}`);
    return 2;
  }
  const logger = createLogger(process.env.LOG_LEVEL ?? 'info');

  const misplaced = DEMO_OPTIONS.find((name) => values[name] !== undefined && command !== 'demo');
  if (misplaced !== undefined) {
    process.stderr.write(`--${misplaced} is an option of gatehouse demo only\n${USAGE}`);
    return 2;
  }
  if (values.online !== undefined && command !== 'check') {
    process.stderr.write(`--online is an option of gatehouse check only\n${USAGE}`);
    return 2;
  }
  if (command === 'demo') {
    return runDemo(logger, { upstream: values.upstream as string | undefined, configFile: values.config as string | undefined, emailDomain: values['email-domain'] as string | undefined });
  }

  if (command === 'pseudonym' && positionals[1] === undefined) {
    process.stderr.write(`gatehouse pseudonym: give the user id, as logged in clear before pseudonyms (the userIdClaim value)\n${USAGE}`);
    return 2;
  }
  const file = (values.config as string | undefined) ?? process.env.GATEHOUSE_CONFIG;
  if (file === undefined) {
    process.stderr.write(`config: no file given: pass --config FILE or set GATEHOUSE_CONFIG\n${USAGE}`);
    return 1;
  }
  let config;
  try {
    config = loadConfigFile(file, process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.problems.join('\n')}\n`);
    return 1;
  }
  if (command === 'pseudonym') {
    const { createPseudonymizer } = await import('./pseudonym.js');
    process.stdout.write(`${createPseudonymizer(config.session.encryptionKeys[0]!)(positionals[1]!)}\n`);
    return 0;
  }
  const warnings = configWarnings(config);
  if (command === 'check') {
    for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
    process.stdout.write(renderConfig(config));
    if (values.online === true) return checkOnline(config);
    return 0;
  }
  for (const warning of warnings) logger.warn({ warning }, 'config warning');

  // Listening for signals before start-up: a SIGTERM while discovery is still
  // waiting for the AS then stops the gateway as soon as it is up, with exit 0.
  const signalled = untilSignal();
  // Imported here so that `check` and config errors answer without loading the server's dependencies.
  const { startTracing } = await import('./tracing/tracing.js');
  const { startGateway } = await import('./server.js');
  // Before the gateway: discovery, its first call to the AS, is traced too. Undefined unless OTEL_* asks for it.
  const tracing = await startTracing(process.env, logger);
  const gateway = await startGateway(config, { logger, cwd: process.cwd(), ...(tracing ? { tracing } : {}) });
  await signalled;
  await gateway.shutdown();
  // The spans of the last requests are still in the batch: export them before exiting.
  await tracing?.shutdown();
  // Everything is closed, so the process ends by itself; should a handle
  // outlive the shutdown all the same, SIGTERM must still end the process.
  setTimeout(() => process.exit(0), EXIT_DEADLINE_MS).unref();
  return 0;
}

/**
 * `gatehouse check --online`: what the gateway would meet at start-up. The
 * provider's discovery document is fetched once; an issuer it names that
 * is not the configured one, or no answer, is a problem (exit 1).
 */
async function checkOnline(config: Config): Promise<number> {
  const { checkDiscovery } = await import('./oauth/provider.js');
  const named = Object.entries(config.providers ?? {}).map(([name, settings]) => ({ key: `providers.${name}`, settings }));
  let failed = false;
  for (const { key, settings } of [{ key: 'provider', settings: config.provider }, ...named]) {
    if (settings.issuer === undefined) {
      process.stderr.write(`online: no ${key}.issuer, so no discovery document to fetch (the endpoints are used as given)\n`);
      continue;
    }
    const problems = (await checkDiscovery(settings)).map((problem) => problem.replace(/^provider\./, `${key}.`));
    for (const problem of problems) process.stderr.write(`${problem}\n`);
    if (problems.length === 0) process.stderr.write(`online: ${key}.issuer: discovery answered and names ${settings.issuer} as its issuer\n`);
    failed ||= problems.length > 0;
  }
  return failed ? 1 : 0;
}

/**
 * `gatehouse demo`. Its authorization server is oidc-provider, a development
 * dependency: a production install (`npm ci --omit=dev`, the container
 * image) does not have it, and then says how to get it (README "Try it").
 */
async function runDemo(logger: ReturnType<typeof createLogger>, options: { upstream?: string; configFile?: string; emailDomain?: string }): Promise<number> {
  const { upstream } = options;
  if (upstream !== undefined && !/^https?:\/\/[^/]/.test(upstream)) {
    process.stderr.write(`--upstream: must be an http(s) URL such as http://127.0.0.1:3000, got "${upstream}"\n`);
    return 2;
  }
  let demoModule;
  try {
    demoModule = await import('./demo/demo.js');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND' || !String((err as Error).message).includes('oidc-provider')) throw err;
    process.stderr.write(
      'gatehouse demo needs oidc-provider, a development dependency that a production install leaves out.\n' +
        'Run the demo from a clone of the repository (npm ci && npm run demo), or add it here: npm install oidc-provider@9\n',
    );
    return 1;
  }
  const { demoBanner, startDemo, DemoPortInUseError, DemoSettingError } = demoModule;
  let demo;
  try {
    demo = await startDemo(process.env, logger, options);
  } catch (err) {
    if (err instanceof ConfigError) {
      // Never the plain demo instead: the file was asked for, so its problems are the answer.
      process.stderr.write(`gatehouse demo --config ${options.configFile}: the config cannot run:\n${err.problems.join('\n')}\n`);
      return 1;
    }
    if (err instanceof DemoSettingError) {
      process.stderr.write(`gatehouse demo: ${err.message}\n`);
      return 2;
    }
    if (!(err instanceof DemoPortInUseError)) throw err;
    process.stderr.write(`gatehouse demo: ${err.message}\n`);
    return 1;
  }
  for (const warning of configWarnings(demo.config)) logger.warn({ warning }, 'config warning');
  process.stdout.write(demoBanner(demo));
  await untilSignal();
  await demo.stop();
  return 0;
}

async function packageVersion(): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  const manifest = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

/** How long the process may linger after a completed shutdown. */
const EXIT_DEADLINE_MS = 2000;

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`gatehouse: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
