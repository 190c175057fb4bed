import { request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';

/** A response read to its end with node:http, raw header lines kept. */
export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** Header names as sent, lower-cased. */
  headerNames: string[];
  body: Buffer;
}

/**
 * One request with node:http instead of fetch, which refuses to send
 * hop-by-hop headers (Connection, Keep-Alive, TE, Upgrade...) and cannot send
 * an absolute-form request target or a Host of its own choosing, nor choose
 * its source address (`localAddress`, e.g. 127.0.0.2 to come from another loopback host).
 * @example const answer = await httpSend(h.url, { path: 'http://evil.example/api/me', headers: { host: 'evil.example', cookie } });
 */
export async function httpSend(
  baseUrl: string,
  options: { method?: string; path?: string; headers?: OutgoingHttpHeaders; body?: string | Buffer; localAddress?: string } = {},
): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: hostname, port, method: options.method ?? 'GET', path: options.path ?? '/', headers: options.headers, agent: false, localAddress: options.localAddress },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            headerNames: res.rawHeaders.filter((_, index) => index % 2 === 0).map((name) => name.toLowerCase()),
            body: Buffer.concat(chunks),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}
