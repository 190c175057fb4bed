#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { loadConfigFile } from './config/load.js';
import { renderConfig } from './config/render.js';
import { configWarnings } from './config/checks.js';
import { ConfigError } from './errors.js';
import { createLogger } from './logger.js';

const USAGE = `Usage:
  gatehouse [--config FILE]         run the gateway (or GATEHOUSE_CONFIG=FILE)
  gatehouse check [--config FILE]   validate FILE; print the effective config, secrets redacted
  gatehouse pseudonym USER [--config FILE]
                                    print USER's pseudonym in the logs (the userIdClaim value, e.g. an email)
  gatehouse demo [--upstream URL]   local authorization server + demo upstream + gateway on loopback;
                                    --upstream puts them in front of your own service instead
  gatehouse --version               print the version
`;

/** The only place that reads argv, touches process.* and exits. */
async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: process.argv.slice(2),
      options: {
        config: { type: 'string', short: 'c' },
        upstream: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      allowPositionals: true,
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
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

  if (values.upstream !== undefined && command !== 'demo') {
    process.stderr.write(`--upstream is an option of gatehouse demo only\n${USAGE}`);
    return 2;
  }
  if (command === 'demo') return runDemo(logger, values.upstream);

  if (command === 'pseudonym' && positionals[1] === undefined) {
    process.stderr.write(`gatehouse pseudonym: give the user id, as logged in clear before pseudonyms (the userIdClaim value)\n${USAGE}`);
    return 2;
  }
  const file = values.config ?? process.env.GATEHOUSE_CONFIG;
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
 * `gatehouse demo`. Its authorization server is oidc-provider, a development
 * dependency: a production install (`npm ci --omit=dev`, the container
 * image) does not have it, and then says how to get it (README "Try it").
 */
async function runDemo(logger: ReturnType<typeof createLogger>, upstream: string | undefined): Promise<number> {
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
  const { demoBanner, startDemo, DemoPortInUseError } = demoModule;
  let demo;
  try {
    demo = await startDemo(process.env, logger, { upstream });
  } catch (err) {
    if (!(err instanceof DemoPortInUseError)) throw err;
    process.stderr.write(`gatehouse demo: ${err.message}\n`);
    return 1;
  }
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
