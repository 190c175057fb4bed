import { connect, type Socket } from 'node:net';
import { LatencyRecorder, type LoadResult } from './load.js';
import type { Child } from './processes.js';

/** Connections opened at a time before a burst, below Node's listen backlog (511) so that no SYN is dropped. */
const CONNECT_BATCH = 200;
const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * `cookies.length` GET requests at the same instant, one per connection:
 * every connection is opened first (in batches, so the listen backlog never
 * overflows and no SYN waits a second for its retransmit), then all requests
 * are written in one go. Latency runs from that write to the end of each
 * response, so it measures the server's answer to the burst, not TCP set-up.
 * autocannon cannot do this: it connects and sends at once, and it notices
 * the end of an `amount` run only on its one-second tick.
 */
export async function burst(url: string, cookies: readonly string[], server?: Child): Promise<LoadResult> {
  const { hostname, port, pathname } = new URL(url);
  const sockets: Socket[] = [];
  for (let start = 0; start < cookies.length; start += CONNECT_BATCH) {
    const batch = cookies.slice(start, start + CONNECT_BATCH).map(() => open(hostname, Number(port)));
    sockets.push(...(await Promise.all(batch)));
  }
  const requests = cookies.map((cookie) => Buffer.from(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nCookie: ${cookie}\r\nAccept: */*\r\n\r\n`));
  const times = new LatencyRecorder();
  let errors = 0;
  let bytes = 0;
  const cpuBefore = server?.cpuSeconds() ?? 0;
  const mainBefore = server?.mainThreadCpuSeconds() ?? 0;
  const started = process.hrtime.bigint();
  const answers = sockets.map((socket, i) => {
    const answer = readResponse(socket, started);
    socket.write(requests[i]!);
    return answer;
  });
  for (const answer of await Promise.all(answers)) {
    bytes += answer.bytes;
    if (answer.status >= 200 && answer.status < 300) times.add(answer.ms);
    else errors += 1;
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = (server?.cpuSeconds() ?? cpuBefore) - cpuBefore;
  const main = (server?.mainThreadCpuSeconds() ?? mainBefore) - mainBefore;
  for (const socket of sockets) socket.destroy();
  const n = cookies.length;
  return {
    requests: n - errors,
    seconds,
    rps: n / seconds,
    p50: times.percentile(0.5),
    p99: times.percentile(0.99),
    max: times.percentile(1),
    errors,
    bytesPerSecond: bytes / seconds,
    cpuPerRequestUs: server ? (cpu / n) * 1e6 : 0,
    serverBusy: server ? cpu / seconds : 0,
    mainThreadShare: cpu > 0 ? main / cpu : 0,
  };
}

function open(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Reads one HTTP/1.1 response with a Content-Length (what every server here sends); status 0 on a broken connection. */
function readResponse(socket: Socket, started: bigint): Promise<{ status: number; ms: number; bytes: number }> {
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    const done = (status: number) => {
      socket.removeAllListeners('data');
      resolve({ status, ms: Number(process.hrtime.bigint() - started) / 1e6, bytes: received.length });
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const headEnd = received.indexOf(HEAD_END);
      if (headEnd < 0) return;
      const head = received.subarray(0, headEnd).toString('latin1');
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (received.length >= headEnd + HEAD_END.length + length) done(Number(head.slice(9, 12)));
    });
    socket.once('error', () => done(0));
    socket.once('close', () => done(0));
  });
}
