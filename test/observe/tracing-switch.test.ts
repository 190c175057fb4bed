import t from 'tap';
import { createLogger } from '../../src/logger.js';
import { activeSpan, startTracing, traceAsCall, tracingRequested } from '../../src/tracing/tracing.js';
import { Writable } from 'node:stream';

/**
 * README, "Tracing": off unless an OTLP endpoint is configured, and then
 * nothing of the SDK runs. test/observe/tracing.test.ts covers tracing on.
 */

t.test('tracing is requested by an OTLP endpoint only, and turned off by OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none', async (t) => {
  t.equal(tracingRequested({}), false);
  t.equal(tracingRequested({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), false, 'other OTEL_* variables alone do not');
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }), false, 'an empty endpoint does not');
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), true);
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }), true);
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }), false);
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }), false);
});

t.test('off: startTracing gives nothing, AS calls run as they are, there is no span', async (t) => {
  const logger = createLogger('info', new Writable({ write: (_chunk, _encoding, done) => done() }));
  t.equal(await startTracing({}, logger), undefined);
  t.equal(await traceAsCall('refresh', async () => 42), 42);
  await t.rejects(traceAsCall('token', async () => Promise.reject(new Error('boom'))), /boom/, 'failures pass through');
  t.equal(activeSpan(), undefined);
});

t.test('an unsupported protocol stops start-up with a message naming it', async (t) => {
  const logger = createLogger('info', new Writable({ write: (_chunk, _encoding, done) => done() }));
  await t.rejects(startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, logger), {
    message: 'OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: use http/protobuf or http/json',
  });
  t.equal(activeSpan(), undefined, 'and tracing stays off');
});
