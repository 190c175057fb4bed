import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect as connectTcp } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeServer, listen } from '../../src/demo/listen.js';

/**
 * A certificate authority made at test time with openssl (.ci/run installs
 * it): its certificate, and a server certificate it signed for 127.0.0.1
 * and localhost. Nothing on the machine trusts it unless told to.
 */
export interface TestCa {
  dir: string;
  /** The CA certificate (PEM), as a file for NODE_EXTRA_CA_CERTS or redis-server. */
  caFile: string;
  ca: string;
  /** The server certificate and its key, as files and as PEM. */
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
  close(): void;
}

export function makeTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-ca-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=gatehouse test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'server.ext');
  return {
    dir,
    caFile: file('ca.pem'),
    ca: readFileSync(file('ca.pem'), 'utf8'),
    certFile: file('server.pem'),
    keyFile: file('server.key'),
    cert: readFileSync(file('server.pem'), 'utf8'),
    key: readFileSync(file('server.key'), 'utf8'),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A TLS listener on 127.0.0.1 that hands each connection, decrypted, to `target` (host:port); `connections` counts TCP connections, handshake or not. */
export interface TlsFront {
  url: string;
  port: number;
  /** Set before the first connection: the plain TCP origin behind it. */
  target: { host: string; port: number } | undefined;
  connections: number;
  close(): Promise<void>;
}

export async function startTlsFront(ca: TestCa): Promise<TlsFront> {
  const sockets = new Set<{ destroy(): void }>();
  const front: TlsFront = {
    url: '',
    port: 0,
    target: undefined,
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server: TlsServer = createTlsServer({ cert: ca.cert, key: ca.key }, (socket) => {
    const upstream = connectTcp(front.target!.port, front.target!.host);
    sockets.add(socket).add(upstream);
    socket.on('close', () => sockets.delete(socket));
    upstream.on('close', () => sockets.delete(upstream));
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  server.on('connection', () => front.connections++);
  // A client that refuses the certificate ends the handshake: not a test failure.
  server.on('tlsClientError', () => {});
  front.url = (await listen(server as unknown as HttpsServer, '127.0.0.1', 0)).replace('http:', 'https:');
  front.port = Number(new URL(front.url).port);
  return front;
}

/** An https upstream with the CA's server certificate: answers 200 `{path}` and counts the requests it received. */
export interface HttpsUpstream {
  url: string;
  requests: string[];
  close(): Promise<void>;
}

export async function startHttpsUpstream(ca: TestCa): Promise<HttpsUpstream> {
  const requests: string[] = [];
  const server = createHttpsServer({ cert: ca.cert, key: ca.key }, (req, res) => {
    requests.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }));
  });
  server.on('tlsClientError', () => {});
  const url = (await listen(server, '127.0.0.1', 0)).replace('http:', 'https:');
  return { url, requests, close: () => closeServer(server) };
}
