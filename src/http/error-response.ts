import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorRow, type GatehouseError } from '../errors.js';
import type { GatewayCookies } from './cookies.js';
import type { PageRenderer } from './page-template.js';
import { isNavigation } from './request-kind.js';

/** A link a gateway page offers (sign in, sign out, try again). */
export interface Link {
  href: string;
  text: string;
}

/**
 * The gateway's own links a page may offer, from `server.publicUrl`'s path
 * and `paths.*`, computed once (src/app.ts).
 */
export class GatewayLinks {
  /** basePath + paths.login */
  readonly login: string;
  /** Sign out, as the 403 page offers it. */
  readonly signOut: Link;

  constructor(
    readonly basePath: string,
    paths: { login: string; logout: string },
  ) {
    this.login = `${basePath}${paths.login}`;
    this.signOut = { href: `${basePath}${paths.logout}`, text: 'Sign out' };
  }

  /** Sign-in that comes back to `returnTo` (a path of this site, basePath included). */
  signIn(returnTo: string, text = 'Sign in'): Link {
    return { href: `${this.login}?returnTo=${encodeURIComponent(returnTo)}`, text };
  }

  /** Sign-in that comes back to the request's page: a GET's own URL, else the site's root. */
  signInFor(request: { method: string; url: string }): Link {
    return this.signIn(request.method === 'GET' ? `${this.basePath}${request.url}` : `${this.basePath}/`);
  }
}

/**
 * The JSON body of a refusal: `{"error": slug}` for the bare rows (README
 * "Errors"; with the row's `reason` when it has one), else with the registry's sentence, and the link's href as
 * `login` when one is offered. Never the request's path or an upstream's text.
 */
export function errorBody(error: GatehouseError, link?: Link): Record<string, string> {
  const row = errorRow(error.code);
  if (row.bare) return row.reason === undefined ? { error: row.slug } : { error: row.slug, reason: row.reason };
  return { error: row.slug, message: error.message, ...(link ? { login: link.href } : {}) };
}

/**
 * A whole HTTP/1.1 refusal for a socket Fastify does not answer (a
 * WebSocket upgrade, bytes the parser refused): the same JSON body and the
 * same `no-store` and `nosniff` as every other gateway error, and the
 * connection closed.
 */
export function rawErrorResponse(error: GatehouseError & { challenge?: string }): string {
  const body = JSON.stringify(errorBody(error));
  // A step-up refusal names what it asks for (RFC 9470 §3, src/access/step-up.ts); the value is the gateway's own, never the request's.
  return rawResponse(error.statusCode, body, error.challenge === undefined ? '' : `WWW-Authenticate: ${error.challenge}\r\n`);
}

/** A bodiless (body '') or JSON answer on a raw socket, closing the connection; `extraHeaders` whole CRLF-ended lines. */
export function rawResponse(status: number, body: string, extraHeaders = ''): string {
  const type = body === '' ? '' : 'Content-Type: application/json; charset=utf-8\r\n';
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${type}${extraHeaders}Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`
  );
}

/**
 * The one renderer of the gateway's error answers (README "Errors",
 * "Pages"): HTML for navigations, JSON for API calls, always uncacheable and
 * `nosniff`. Built once with what it reads: the pages, the cookies (a 401
 * clears a session cookie the browser sent) and the links.
 */
export class ErrorResponse {
  constructor(
    readonly pages: PageRenderer,
    readonly cookies: GatewayCookies,
    readonly links: GatewayLinks,
  ) {}

  /**
   * Answers with a registry error as HTML (navigations) or JSON (API calls;
   * `format: 'json'` whatever the request).
   */
  send(request: FastifyRequest, reply: FastifyReply, error: GatehouseError, link?: Link, format: 'by-request' | 'json' = 'by-request'): FastifyReply {
    const { cookies, pages } = this;
    if (error.code === 'GH_ERR_SESSION_REQUIRED' && request.cookies?.[cookies.sessionName] !== undefined) cookies.clearSession(reply);
    const row = errorRow(error.code);
    reply.code(error.statusCode).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff');
    if (format === 'by-request' && isNavigation(request)) {
      const action = link ?? (error.code === 'GH_ERR_SESSION_REQUIRED' ? this.links.signInFor(request) : undefined);
      return reply
        .header('content-security-policy', pages.securityPolicy)
        .type('text/html; charset=utf-8')
        .send(pages.render({ page: row.page ?? 'refused', title: row.title, message: error.message, action, status: error.statusCode }));
    }
    return reply.type('application/json; charset=utf-8').send(errorBody(error, link));
  }
}
