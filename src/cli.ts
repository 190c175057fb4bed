#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { loadConfigFile, renderConfig } from './config/load.js';
import { ConfigError } from './errors.js';
import { createLogger } from './logger.js';

const USAGE = `Usage:
  gatehouse [--config FILE]         run the gateway (or GATEHOUSE_CONFIG=FILE)
  gatehouse check [--config FILE]   validate FILE; print the effective config, secrets redacted
  gatehouse demo                    local authorization server + demo upstream + gateway on loopback
`;

/** The only place that reads argv, touches process.* and exits. */
async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: process.argv.slice(2),
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
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
  if (positionals.length > 1 || !['run', 'check', 'demo'].includes(command)) {
    process.stderr.write(`unknown command: ${positionals.join(' ')}\n${USAGE}`);
    return 2;
  }
  const logger = createLogger(process.env.LOG_LEVEL ?? 'info');

  if (command === 'demo') {
    // Loaded only here: the demo pulls in oidc-provider, which a production run never needs (and which warns on stderr).
    const { demoBanner, startDemo } = await import('./demo/demo.js');
    const demo = await startDemo(process.env, logger);
    process.stdout.write(demoBanner(demo));
    await untilSignal();
    await demo.stop();
    return 0;
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
  if (command === 'check') {
    process.stdout.write(renderConfig(config));
    return 0;
  }

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
