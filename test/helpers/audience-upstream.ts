import { createServer } from 'node:http';
import { closeServer, listen } from '../../src/demo/listen.js';
import type { AuthorizationServer } from '../../src/demo/authorization-server.js';

/** What an audience-checking upstream decided about one request. */
export interface AudienceCheck {
  path: string;
  /** The bearer token it received ('' without one). */
  token: string;
  /** 'ok', or why it refused. */
  verdict: string;
  sub?: string;
  aud?: unknown;
  scope?: string;
}

export interface AudienceUpstream {
  url: string;
  checks: AudienceCheck[];
  /** The AS it introspects at: set before the first request (the upstream starts before the AS, whose gateway needs its URL). */
  as: AuthorizationServer | undefined;
  close(): Promise<void>;
}

/**
 * A resource server that checks the audience of what it receives, as an API
 * owned by another team does: it introspects the bearer token at the AS
 * (RFC 7662) on every request and answers 401 when inactive, 403 when its
 * `aud` is not `audience` (undefined: the token must carry no audience, the
 * sign-in token) or a scope in `scopes` is missing, else 200 `{sub, aud, scope}`.
 */
export async function startAudienceUpstream(audience: string | undefined, scopes: readonly string[] = []): Promise<AudienceUpstream> {
  const checks: AudienceCheck[] = [];
  const server = createServer((req, res) => {
    const as = upstream.as!;
    const { clientId, clientSecret } = as.introspection;
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const check: AudienceCheck = { path: req.url ?? '', token, verdict: '' };
    checks.push(check);
    const answer = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (token === '') {
      check.verdict = 'no bearer token';
      answer(401, { error: check.verdict });
      return;
    }
    fetch(`${as.listenUrl}/token/introspection`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
    })
      .then((response) => response.json() as Promise<{ active: boolean; sub?: string; aud?: unknown; scope?: string }>)
      .then((result) => {
        Object.assign(check, { sub: result.sub, aud: result.aud, scope: result.scope });
        const granted = new Set((result.scope ?? '').split(' '));
        if (!result.active) check.verdict = 'inactive token';
        else if (audience === undefined ? result.aud !== undefined : !audienceIncludes(result.aud, audience)) check.verdict = `wrong audience ${JSON.stringify(result.aud)}`;
        else if (scopes.some((scope) => !granted.has(scope))) check.verdict = `missing scope in ${JSON.stringify(result.scope)}`;
        else check.verdict = 'ok';
        if (check.verdict === 'ok') answer(200, { sub: result.sub, aud: result.aud, scope: result.scope });
        else answer(check.verdict === 'inactive token' ? 401 : 403, { error: check.verdict });
      })
      .catch(() => answer(500, { error: 'introspection failed' }));
  });
  const upstream: AudienceUpstream = { url: '', checks, as: undefined, close: () => closeServer(server) };
  upstream.url = await listen(server, '127.0.0.1', 0);
  return upstream;
}

function audienceIncludes(aud: unknown, audience: string): boolean {
  return aud === audience || (Array.isArray(aud) && aud.includes(audience));
}
