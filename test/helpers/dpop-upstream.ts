import { createHash, createPublicKey, verify, type JsonWebKey } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { WebSocketServer } from 'ws';
import { closeServer, listen } from '../../src/demo/listen.js';

/** What the upstream decided about one request. */
export interface DpopCheck {
  method: string;
  path: string;
  authorization: string | undefined;
  proof: string | undefined;
  /** 'ok', or why the request was refused. */
  verdict: string;
  /** Whether it was a WebSocket handshake (accepted with 101 when 'ok', else answered 401). */
  upgrade?: boolean;
  sub?: string;
}

export interface DpopUpstream {
  url: string;
  /** Set before the first request: the AS's RFC 7662 endpoint and a client allowed to introspect every token. */
  introspection: { endpoint: string; clientId: string; clientSecret: string } | undefined;
  checks: DpopCheck[];
  /**
   * Server-issued nonces (RFC 9449 §9): when set, a proof must carry this
   * `nonce`, else the answer is 401 `WWW-Authenticate: DPoP
   * error="use_dpop_nonce"` with `DPoP-Nonce` giving it. Undefined: no nonce asked.
   */
  nonce: string | undefined;
  /** With `nonce`: refuse every proof this way, each time with a new nonce (a server whose nonces never satisfy). */
  refuseEveryNonce: boolean;
  close(): Promise<void>;
}

const PROOF_MAX_AGE_S = 60;

/**
 * A resource server that accepts only DPoP-bound tokens, checked as RFC 9449
 * §7 and §4.3 tell it to: `Authorization: DPoP <token>`, one `DPoP` proof
 * whose signature verifies with the key in its header, `typ` dpop+jwt,
 * `htm` and `htu` equal to this request's method and URL (this server's
 * own URL, as the gateway must target it), `ath` the token's hash, a recent
 * `iat`, a `jti` never seen before, and introspection at the AS saying the
 * token is active with `cnf.jkt` equal to the proof key's thumbprint
 * (RFC 7638). Answers 200 `{sub, jkt}` or 401 with the reason. A
 * WebSocket handshake is checked the same way (its proof's `htu` is the
 * http URL of the GET, RFC 9449 §4.2) and accepted, then echoes.
 */
export async function startDpopUpstream(): Promise<DpopUpstream> {
  const seenJti = new Set<string>();
  const checks: DpopCheck[] = [];
  const upstream: DpopUpstream = { url: '', introspection: undefined, checks, nonce: undefined, refuseEveryNonce: false, close: async () => closeServer(server) };
  let nonces = 0;
  const server = createServer((req, res) => {
    void handle(req, res).catch(() => res.writeHead(500).end());
  });
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const check: DpopCheck = {
      method: req.method ?? '',
      path: req.url ?? '',
      authorization: req.headers.authorization,
      proof: typeof req.headers.dpop === 'string' ? req.headers.dpop : undefined,
      verdict: '',
    };
    checks.push(check);
    const result = await validate(req, check);
    check.verdict = result.verdict;
    if (result.verdict === 'use_dpop_nonce') {
      if (upstream.refuseEveryNonce) upstream.nonce = `nonce-${++nonces}-${Date.now()}`;
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'DPoP error="use_dpop_nonce", algs="ES256"', 'dpop-nonce': upstream.nonce! });
      res.end(JSON.stringify({ error: 'use_dpop_nonce' }));
      return;
    }
    if (result.verdict !== 'ok') {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'DPoP error="invalid_token", algs="ES256"' });
      res.end(JSON.stringify({ error: result.verdict }));
      return;
    }
    check.sub = result.sub;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ sub: result.sub, jkt: result.jkt }));
  }

  async function validate(req: IncomingMessage, check: DpopCheck): Promise<{ verdict: string; sub?: string; jkt?: string }> {
    const token = /^DPoP ([A-Za-z0-9\-._~+/]+=*)$/.exec(check.authorization ?? '')?.[1];
    if (token === undefined) return { verdict: 'no DPoP authorization' };
    if (check.proof === undefined || req.headersDistinct.dpop?.length !== 1) return { verdict: 'not exactly one proof' };
    const parts = check.proof.split('.');
    if (parts.length !== 3) return { verdict: 'malformed proof' };
    let header: { typ?: string; alg?: string; jwk?: JsonWebKey };
    let payload: { htm?: string; htu?: string; ath?: string; iat?: number; jti?: string; nonce?: string };
    try {
      header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString()) as typeof header;
      payload = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString()) as typeof payload;
    } catch {
      return { verdict: 'malformed proof' };
    }
    if (header.typ !== 'dpop+jwt' || header.alg !== 'ES256' || header.jwk?.kty !== 'EC' || 'd' in header.jwk) return { verdict: 'bad proof header' };
    const key = createPublicKey({ key: header.jwk, format: 'jwk' });
    const signed = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(parts[2]!, 'base64url'));
    if (!signed) return { verdict: 'bad proof signature' };
    if (payload.htm !== req.method) return { verdict: 'htm mismatch' };
    const path = (req.url ?? '/').split('?')[0];
    if (payload.htu !== `${upstream.url}${path}`) return { verdict: 'htu mismatch' };
    if (payload.ath !== createHash('sha256').update(token).digest('base64url')) return { verdict: 'ath mismatch' };
    if (typeof payload.iat !== 'number' || Math.abs(Date.now() / 1000 - payload.iat) > PROOF_MAX_AGE_S) return { verdict: 'stale proof' };
    if (typeof payload.jti !== 'string' || seenJti.has(payload.jti)) return { verdict: 'replayed proof' };
    if (upstream.nonce !== undefined && (upstream.refuseEveryNonce || payload.nonce !== upstream.nonce)) {
      seenJti.add(payload.jti);
      return { verdict: 'use_dpop_nonce' };
    }
    seenJti.add(payload.jti);
    const { crv, kty, x, y } = header.jwk as Record<string, string>;
    const jkt = createHash('sha256').update(JSON.stringify({ crv, kty, x, y })).digest('base64url');
    const introspected = await introspect(token);
    if (introspected.active !== true) return { verdict: 'token not active' };
    if (introspected.cnf?.jkt !== jkt) return { verdict: 'key not bound to token' };
    return { verdict: 'ok', sub: introspected.sub, jkt };
  }

  async function introspect(token: string): Promise<{ active?: boolean; sub?: string; cnf?: { jkt?: string } }> {
    const { endpoint, clientId, clientSecret } = upstream.introspection!;
    const response = await fetch(endpoint, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
    });
    return (await response.json()) as { active?: boolean; sub?: string; cnf?: { jkt?: string } };
  }

  const sockets = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req: IncomingMessage, socket, head) => {
    const check: DpopCheck = {
      method: req.method ?? '',
      path: req.url ?? '',
      authorization: req.headers.authorization,
      proof: typeof req.headers.dpop === 'string' ? req.headers.dpop : undefined,
      verdict: '',
      upgrade: true,
    };
    checks.push(check);
    void validate(req, check).then(
      (result) => {
        check.verdict = result.verdict;
        check.sub = result.sub;
        if (result.verdict !== 'ok') {
          socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
          return;
        }
        sockets.handleUpgrade(req, socket, head, (ws) => {
          ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
        });
      },
      () => socket.destroy(),
    );
  });
  upstream.close = async () => {
    for (const client of sockets.clients) client.terminate();
    sockets.close();
    await closeServer(server);
  };
  upstream.url = await listen(server, '127.0.0.1', 0);
  return upstream;
}
