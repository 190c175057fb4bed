import { SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { Pseudonymizer } from '../pseudonym.js';

/**
 * OpenTelemetry tracing (README, "Tracing"), off unless an OTLP endpoint is
 * configured through the standard variables. This module is all the hot
 * path ever sees: while tracing is off `tracer` stays undefined, every
 * helper below returns after one comparison, and the SDK, the exporter and
 * the instrumentations (./sdk.ts) are never even loaded. test/observe/
 * tracing.test.ts pins the spans, their links and the secret scan;
 * bench/ measures the cost.
 */

/** Set once the SDK is started; undefined means tracing is off. */
let tracer: Tracer | undefined;

/** What the CLI gets back when tracing is on. */
export interface Tracing {
  /** Registered first on the public app: the server span of every request (@fastify/otel). */
  plugin: FastifyPluginAsync<{ pseudonymize: Pseudonymizer }>;
  /** Exports what is still buffered, then stops. */
  shutdown(): Promise<void>;
}

/**
 * Whether the environment asks for traces: an OTLP endpoint for all signals
 * or for traces (OpenTelemetry's SDK environment variables), unless the SDK
 * is disabled or the traces exporter is `none`.
 */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return Boolean(endpoint) && env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true' && env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() !== 'none';
}

/**
 * Starts the SDK when the environment asks for it (see `tracingRequested`),
 * loading it only then. Throws on a setting the gateway cannot honour (the
 * grpc protocol), so a misconfigured start fails loudly.
 */
export async function startTracing(env: NodeJS.ProcessEnv, logger: Logger): Promise<Tracing | undefined> {
  if (!tracingRequested(env)) return undefined;
  const { startSdk } = await import('./sdk.js');
  const started = startSdk(env, logger);
  tracer = started.tracer;
  return {
    plugin: started.plugin,
    async shutdown() {
      tracer = undefined;
      await started.shutdown();
    },
  };
}

/** The calls to the authorization server that get a span of their own. */
export type AsOperation = 'discovery' | 'token' | 'refresh' | 'revocation' | 'userinfo';

/**
 * Runs one call to the authorization server inside a span named
 * `AS <operation>` (a child of the active span: the request's server span).
 * The HTTP client span of the call itself (undici) becomes its child.
 * Nothing about the call's parameters is recorded, only its outcome.
 */
export function traceAsCall<T>(operation: AsOperation, call: () => Promise<T>): Promise<T> {
  if (tracer === undefined) return call();
  return tracer.startActiveSpan(`AS ${operation}`, { kind: SpanKind.INTERNAL, attributes: { 'gatehouse.as.operation': operation } }, async (span) => {
    try {
      return await call();
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute('error.type', err instanceof Error ? err.name : typeof err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** The active span (the request's server span, or an AS call's), when tracing is on. */
export function activeSpan(): Span | undefined {
  return tracer === undefined ? undefined : trace.getActiveSpan();
}

/** Adds attributes to `span` when there is one (tracing on). Only safe values: see the README's list. */
export function annotate(span: Span | undefined, attributes: Attributes): void {
  span?.setAttributes(attributes);
}
