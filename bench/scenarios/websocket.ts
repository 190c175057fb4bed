import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { signIn } from '../../test/helpers/sign-in.js';
import { WEBSOCKET_PATH } from '../cast.js';
import { median } from '../load.js';
import { check, fixed, mib, ratio, type Row, type Scenario } from '../scenario.js';

/** Bytes of each echoed message. */
const MESSAGE_BYTES = 64;
/** Sockets echoing at once in the throughput rounds. */
const ECHO_SOCKETS = 10;
/** Sockets opened at once while filling the gateway with idle ones. */
const OPEN_BATCH = 50;

/**
 * WebSockets through the gateway (README "WebSockets and server-sent
 * events"): RSS per idle socket (1,000 in the full run), and echo messages
 * per second over 10 sockets, each sending its next 64-byte message when the
 * last one came back, through the gateway against the same echo server
 * reached directly, rounds alternating. The echo server runs in the driver.
 */
export const websocket: Scenario = async ({ mode, cast, progress }) => {
  const echo = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  echo.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })));
  await new Promise((resolve) => echo.once('listening', resolve));
  const echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
  const gateway = await cast.startGateway({ name: 'websocket', websocketUpstream: echoUrl });
  try {
    const { cookie } = await signIn(gateway.url, { user: 'alice' });
    const viaGateway = () => open(`${gateway.url.replace('http', 'ws')}${WEBSOCKET_PATH}`, cookie, gateway.url);
    const direct = () => open(echoUrl.replace('http', 'ws'), cookie, gateway.url);

    const idleCount = mode.quick ? 100 : 1000;
    progress(`websocket: ${idleCount} idle sockets`);
    const rssBefore = gateway.child.rss();
    const idle: WebSocket[] = [];
    for (let opened = 0; opened < idleCount; opened += OPEN_BATCH) {
      idle.push(...(await Promise.all(Array.from({ length: Math.min(OPEN_BATCH, idleCount - opened) }, viaGateway))));
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const rssIdle = gateway.child.rss();
    for (const socket of idle) socket.terminate();

    progress('websocket: echo rounds, direct and through the gateway');
    const rounds = { direct: [] as number[], gatehouse: [] as number[] };
    for (let round = 0; round < mode.rounds; round += 1) {
      rounds.direct.push(await echoRate(direct, mode.duration));
      rounds.gatehouse.push(await echoRate(viaGateway, mode.duration));
    }
    const directRate = median(rounds.direct);
    const gatewayRate = median(rounds.gatehouse);
    const perSocket = (rssIdle - rssBefore) / idleCount;
    const rows: Row[] = [
      {
        scenario: `websocket: ${idleCount} idle sockets`,
        metric: 'gateway RSS per socket (before → with them open)',
        baseline: '',
        gatehouse: `${fixed(perSocket / 1024, 1)} KiB (${mib(rssBefore)} → ${mib(rssIdle)})`,
        ratio: '',
        target: '',
      },
      {
        scenario: `websocket: echo, ${ECHO_SOCKETS} sockets, ${MESSAGE_BYTES} B`,
        metric: 'messages/s (baseline column: the echo server directly)',
        baseline: fixed(directRate),
        gatehouse: fixed(gatewayRate),
        ratio: ratio(gatewayRate / directRate),
        target: '',
      },
    ];
    return {
      rows,
      checks: [check('websocket: every idle socket opened', idle.length === idleCount, `${idle.length} of ${idleCount}`)],
      data: { idleCount, rssBefore, rssIdle, perSocket, rounds },
    };
  } finally {
    await gateway.stop();
    await new Promise((resolve) => echo.close(resolve));
  }
};

function open(url: string, cookie: string, origin: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers: { cookie }, origin, perMessageDeflate: false });
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, response) => reject(new Error(`upgrade refused: ${response.statusCode}`)));
  });
}

/** Messages per second echoed over ECHO_SOCKETS sockets for `seconds`, each sending its next message when the last came back. */
async function echoRate(connect: () => Promise<WebSocket>, seconds: number): Promise<number> {
  const sockets = await Promise.all(Array.from({ length: ECHO_SOCKETS }, connect));
  const message = Buffer.alloc(MESSAGE_BYTES, 1);
  let echoed = 0;
  let running = true;
  for (const socket of sockets) {
    socket.on('message', () => {
      echoed += 1;
      if (running) socket.send(message);
    });
  }
  const started = process.hrtime.bigint();
  for (const socket of sockets) socket.send(message);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  running = false;
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  for (const socket of sockets) socket.terminate();
  return echoed / elapsed;
}
