import t from 'tap';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { closeServer, listen } from '../../src/demo/listen.js';
import { createLogger } from '../../src/logger.js';
import { createPseudonymizer } from '../../src/pseudonym.js';
import { activeSpan, annotate, startTracing, traceAsCall } from '../../src/tracing/tracing.js';

/**
 * README, "Tracing", with the default protocol (http/protobuf) and the SDK
 * in this process: the tracing plugin on a Fastify app, an AS call and an
 * outgoing fetch inside a request, the export after shutdown. The
 * exported bytes carry the span names, the user pseudonym and the
 * traceparent's trace id, and none of the request's secrets.
 * test/observe/tracing.test.ts checks the whole gateway over http/json.
 */

t.test('http/protobuf: spans reach the collector, secrets do not', async (t) => {
  const bodies: Buffer[] = [];
  const types: string[] = [];
  const collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks));
      types.push(req.headers['content-type'] ?? '');
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  const collectorUrl = await listen(collector, '127.0.0.1', 0);
  t.teardown(() => closeServer(collector));
  const seenTraceparents: string[] = [];
  const as = createServer((req, res) => {
    seenTraceparents.push(String(req.headers.traceparent));
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"sub":"bob"}');
  });
  const asUrl = await listen(as, '127.0.0.1', 0);
  t.teardown(() => closeServer(as));

  // The exporter reads the standard variables from the process environment, as in production.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collectorUrl;
  process.env.OTEL_BSP_SCHEDULE_DELAY = '20';
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: collectorUrl, OTEL_TRACES_SAMPLER: 'always_on' };
  const lines: string[] = [];
  const logger = createLogger('info', new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()) }));
  const tracing = await startTracing(env, logger);
  t.ok(tracing, 'tracing on');
  t.match(lines.join(''), /"protocol":"http\/protobuf","serviceName":"gatehouse"/, 'the default protocol and service name');

  const secret = randomBytes(12).toString('hex');
  const app = Fastify();
  const pseudonymize = createPseudonymizer(randomBytes(32).toString('base64'));
  await app.register(tracing!.plugin, { pseudonymize });
  app.get('/who', { config: { routeClass: 'session' } }, async (request) => {
    (request as typeof request & { userId?: string }).userId = 'bob';
    annotate(activeSpan(), { 'gatehouse.refresh.outcome': 'ok' });
    await traceAsCall('userinfo', async () => (await fetch(`${asUrl}/userinfo`, { headers: { authorization: `Bearer ${secret}` } })).text());
    await t.rejects(traceAsCall('refresh', async () => Promise.reject(new TypeError(`refused ${secret}`))), TypeError, 'a failed AS call rethrows');
    return 'ok';
  });
  const traceId = randomBytes(16).toString('hex');
  const response = await app.inject({
    url: `/who?code=${secret}&state=${secret}`,
    headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, cookie: `session_id=${secret}` },
  });
  t.equal(response.statusCode, 200);
  t.equal(seenTraceparents.length, 1);
  t.match(seenTraceparents[0], new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`), 'the AS call carries the request trace');
  await app.close();
  await tracing!.shutdown();
  t.equal(activeSpan(), undefined, 'off again after shutdown');

  t.ok(bodies.length > 0, 'exported');
  t.ok(types.every((type) => type === 'application/x-protobuf'), 'as protobuf');
  const exported = Buffer.concat(bodies);
  for (const text of ['request', 'AS userinfo', 'AS refresh', 'gatehouse.user', pseudonymize('bob'), 'gatehouse.refresh.outcome', '/who', 'TypeError']) {
    t.ok(exported.includes(text), `exported: ${text}`);
  }
  t.ok(exported.includes(Buffer.from(traceId, 'hex')), 'the caller trace id (as bytes)');
  for (const text of [secret, 'code=', 'state=', 'session_id', 'Bearer', 'refused']) t.notOk(exported.includes(text), `not exported: ${text.slice(0, 12)}`);
});
