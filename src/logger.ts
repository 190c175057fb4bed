import pino, { type DestinationStream, type Logger } from 'pino';
import type { FastifyRequest } from 'fastify';
import type { Pseudonymizer } from './pseudonym.js';
import { StdoutLog } from './stdout-log.js';

/**
 * JSON logs without secrets. Requests are logged by path only: a query
 * string may carry an authorization code or state, and headers carry cookies
 * and tokens, so neither is ever serialized. Redaction is a second guard
 * with explicit paths (wildcards cost on every line). A `userId` is logged
 * as a keyed pseudonym by the gateway's child logger (`withPseudonyms`);
 * this logger, which has no key, never writes one at all.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]', 'accessToken', 'refreshToken', 'idToken'],
        censor: '[redacted]',
      },
      serializers: {
        req: serializeRequest,
        err: pino.stdSerializers.err,
        userId: unkeyedUser,
      },
    },
    destination ?? new StdoutLog(),
  );
}

function serializeRequest(request: FastifyRequest): Record<string, unknown> {
  const query = request.url.indexOf('?');
  return { method: request.method, path: query < 0 ? request.url : request.url.slice(0, query) };
}

/** A `userId` logged without the pseudonym key (outside a gateway): never the id itself. */
function unkeyedUser(): string {
  return '[user]';
}

/**
 * The gateway's logger: `logger` whose `userId` field is written as the
 * user's keyed pseudonym (src/pseudonym.ts, README "Logs"). Fastify's
 * request loggers are its children and inherit the serializer.
 */
export function withPseudonyms(logger: Logger, pseudonymize: Pseudonymizer): Logger {
  return logger.child({}, { serializers: { userId: pseudonymize } });
}
