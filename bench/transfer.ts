import { request } from 'node:http';

/** One large transfer: how long it took and how many bytes arrived (download) or were counted upstream (upload). */
export interface Transfer {
  bytes: number;
  seconds: number;
  bytesPerSecond: number;
}

const CHUNK = Buffer.alloc(64 * 1024, 'u');

/** GET `url` on a new connection and count the body; throws unless 200 with `expected` bytes. */
export function download(url: string, cookie: string, expected: number): Promise<Transfer> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = request(url, { agent: false, headers: { cookie } }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      res.on('error', reject);
      res.on('end', () => {
        if (res.statusCode !== 200 || bytes !== expected) {
          reject(new Error(`GET ${url} answered ${res.statusCode} with ${bytes} bytes, expected 200 with ${expected}`));
          return;
        }
        resolve(measured(bytes, started));
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** POST `bytes` bytes to `url` (the bench upstream answers `{"bytes":N}`); throws unless every byte arrived. */
export function upload(url: string, cookie: string, bytes: number): Promise<Transfer> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = request(
      url,
      { method: 'POST', agent: false, headers: { cookie, 'content-type': 'application/octet-stream', 'content-length': bytes } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        res.on('error', reject);
        res.on('end', () => {
          const received = res.statusCode === 200 ? (JSON.parse(text) as { bytes: number }).bytes : -1;
          if (received !== bytes) {
            reject(new Error(`POST ${url} answered ${res.statusCode} (${text.slice(0, 200)}), expected 200 with {"bytes":${bytes}}`));
            return;
          }
          resolve(measured(bytes, started));
        });
      },
    );
    req.on('error', reject);
    let left = bytes;
    const pump = (): void => {
      while (left > 0) {
        const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
        left -= chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

function measured(bytes: number, started: bigint): Transfer {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { bytes, seconds, bytesPerSecond: bytes / seconds };
}
