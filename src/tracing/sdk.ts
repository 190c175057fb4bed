import { context, propagation, trace, type Attributes, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import fp from 'fastify-plugin';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Pseudonymizer } from '../pseudonym.js';

/**
 * The OpenTelemetry SDK, loaded by ./tracing.ts only when an OTLP endpoint
 * is configured. Exporter settings (endpoint, headers, timeout, batch
 * sizes) come from the standard OTEL_* variables, read by the SDK itself;
 * the protocol picks the exporter: http/protobuf (the OpenTelemetry default)
 * or http/json. README, "Tracing", lists what a span may carry.
 */
export interface StartedSdk {
  tracer: Tracer;
  plugin: FastifyPluginAsync<{ pseudonymize: Pseudonymizer }>;
  shutdown(): Promise<void>;
}

export function startSdk(env: NodeJS.ProcessEnv, logger: Logger): StartedSdk {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  let exporter: SpanExporter;
  if (protocol === 'http/json') exporter = new JsonExporter();
  else if (protocol === 'http/protobuf') exporter = new ProtobufExporter();
  else throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf or http/json`);

  const resource = resourceFromAttributes({ 'service.name': 'gatehouse' }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new TracerProvider({
    resource,
    sampler: sampler(env),
    spanProcessors: [new BatchSpanProcessor({ exporter: new SafeExporter(exporter) })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);

  // Client spans for every undici request: the upstream call (@fastify/reply-from's
  // pool) and the AS calls (openid-client uses the global fetch); both
  // publish on the same diagnostics channels. The instrumentation injects
  // the W3C traceparent of its span into the outgoing request.
  // Enabled by its constructor (it generates spans only when constructed
  // enabled), after the global provider above is set.
  const undici = new UndiciInstrumentation();
  undici.setTracerProvider(provider);

  const fastifyOtel = new FastifyOtelInstrumentation({
    // One server span per request; no span per hook or handler, so the
    // upstream and AS spans are direct children of the request's span.
    instrumentHooks: false,
    instrumentHandler: false,
    // Error messages are free text: only the error's type is exported (SafeExporter).
    recordExceptions: false,
    requestHook: (span, request) => {
      // @fastify/otel records request.url, query string included.
      span.setAttributes({ 'url.path': pathOf(request.url), 'gatehouse.route': routeClass(request) });
    },
  });
  fastifyOtel.setTracerProvider(provider);
  const otelPlugin = fastifyOtel.plugin();

  const plugin = fp(
    async (fastify, { pseudonymize }: { pseudonymize: Pseudonymizer }) => {
      await fastify.register(otelPlugin);
      fastify.addHook('onRequest', async (request) => {
        // The server span has taken its parent from these already; the
        // upstream gets the traceparent of the gateway's own upstream span
        // (injected by the undici instrumentation), never a second one.
        delete request.headers.traceparent;
        delete request.headers.tracestate;
      });
      fastify.addHook('onSend', async (request) => {
        // Runs before @fastify/otel's route-level onSend ends the span.
        const userId = (request as FastifyRequest & { userId?: string }).userId;
        if (userId !== undefined) request.opentelemetry().span?.setAttribute('gatehouse.user', pseudonymize(userId));
      });
    },
    { name: 'gatehouse-tracing', fastify: '5.x' },
  );

  logger.info({ protocol, serviceName: resource.attributes['service.name'] }, 'tracing on: exporting spans over OTLP');
  return {
    tracer: provider.getTracer('gatehouse'),
    plugin,
    async shutdown() {
      undici.disable();
      fastifyOtel.disable();
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

function routeClass(request: FastifyRequest): string {
  return (request.routeOptions.config as { routeClass?: string }).routeClass ?? 'proxy';
}

function pathOf(url: string): string {
  const end = url.search(/[?#]/);
  return end < 0 ? url : url.slice(0, end);
}

/** OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG; default parentbased_always_on. */
function sampler(env: NodeJS.ProcessEnv): Sampler {
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
  const fraction = Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1;
  switch (env.OTEL_TRACES_SAMPLER?.trim()) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(fraction);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(fraction) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * The attributes a span may carry out of the process. Everything else an
 * instrumentation records is dropped before export: headers, the query
 * (url.query), the user agent, free-text messages. URLs lose their query,
 * fragment and credentials. A second guard behind the instrumentations'
 * own settings: a future attribute of theirs never leaves unseen.
 */
const EXPORTED_ATTRIBUTES: ReadonlySet<string> = new Set([
  'http.request.method',
  'http.request.method_original',
  'http.response.status_code',
  'http.route',
  'url.path',
  'url.full',
  'url.scheme',
  'server.address',
  'server.port',
  'network.peer.address',
  'network.peer.port',
  'error.type',
  'exception.type',
  'fastify.root',
  'fastify.type',
  'gatehouse.route',
  'gatehouse.user',
  'gatehouse.refresh.outcome',
  'gatehouse.as.operation',
]);

function safeAttributes(attributes: Attributes | undefined): Attributes {
  const kept: Attributes = {};
  if (attributes === undefined) return kept;
  for (const [name, value] of Object.entries(attributes)) {
    if (!EXPORTED_ATTRIBUTES.has(name)) continue;
    if (name === 'url.full' && typeof value === 'string') kept[name] = safeUrl(value);
    else if (name === 'url.path' && typeof value === 'string') kept[name] = pathOf(value);
    else kept[name] = value;
  }
  return kept;
}

function safeUrl(value: string): string {
  try {
    const url = new URL(value);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return '';
  }
}

/** Hands the exporter copies of the spans holding only `EXPORTED_ATTRIBUTES`, no event text and no status message. */
class SafeExporter implements SpanExporter {
  readonly #inner: SpanExporter;

  constructor(inner: SpanExporter) {
    this.#inner = inner;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    const safe = spans.map((span): ReadableSpan =>
      Object.create(span, {
        attributes: { value: safeAttributes(span.attributes) },
        events: { value: span.events.map((event) => ({ time: event.time, name: event.name, attributes: safeAttributes(event.attributes) })) },
        status: { value: { code: span.status.code } },
        links: { value: [] },
      }) as ReadableSpan,
    );
    this.#inner.export(safe, resultCallback);
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}
