import { request } from 'node:http';

/** What a page load answered. */
export interface PageResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * A GET as a browser's top-level navigation sends it (`Sec-Fetch-Mode:
 * navigate`, `Accept: text/html…`). Node's fetch cannot: it always sends
 * `Sec-Fetch-Mode: cors`.
 * @example const page = await navigate(`${h.url}/callback?error=access_denied`, { cookie });
 */
export function navigate(url: URL | string, headers: Record<string, string> = {}): Promise<PageResponse> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document', ...headers } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end();
  });
}
