import WebSocket from 'ws';

/** Bytes sent towards one side and not yet written to its socket above which the other side stops being read. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/** RFC 6455 §7.4.1: a message too big to process. */
const MESSAGE_TOO_BIG = 1009;

/** What the relay counts for the access-log line of a closed socket. */
export interface RelayCounters {
  /** Message bytes from the browser to the upstream, and back. */
  bytesIn: number;
  bytesOut: number;
}

/**
 * Passes messages both ways unchanged, text as text and binary as binary,
 * and closes each side when the other closes. Back-pressure: while more than
 * HIGH_WATER bytes wait to be written to one side, the other side's socket is
 * not read (TCP then slows its sender), until they drop below LOW_WATER.
 */
export function relay(browser: WebSocket, upstream: WebSocket, counters: RelayCounters): void {
  forward(browser, upstream, (bytes) => (counters.bytesIn += bytes));
  forward(upstream, browser, (bytes) => (counters.bytesOut += bytes));
  browser.once('close', (code, reason) => closeWith(upstream, code, reason));
  upstream.once('close', (code, reason) => closeWith(browser, code, reason));
  browser.on('error', (err) => endAfterError(upstream, err));
  upstream.on('error', (err) => endAfterError(browser, err));
}

/**
 * One side failed. A message over `limits.websocketMessageBytes` is a failure
 * ws has already answered on that side with 1009; the other side is closed
 * with 1009 too, so the page learns why. Any other failure cuts it.
 */
function endAfterError(other: WebSocket, err: Error): void {
  if ((err as NodeJS.ErrnoException).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') closeWith(other, MESSAGE_TOO_BIG, Buffer.from('message too big'));
  else other.terminate();
}

function forward(from: WebSocket, to: WebSocket, count: (bytes: number) => void): void {
  let pending = 0;
  from.on('message', (data: Buffer, isBinary: boolean) => {
    if (to.readyState !== WebSocket.OPEN) return;
    const size = data.length;
    count(size);
    pending += size;
    to.send(data, { binary: isBinary }, () => {
      pending -= size;
      if (from.isPaused && pending < LOW_WATER) from.resume();
    });
    if (pending > HIGH_WATER && !from.isPaused) from.pause();
  });
}

/** Close codes a peer may not send in a close frame (RFC 6455 §7.4.1): 1005, 1006 and 1015 become 1000. */
function closeWith(socket: WebSocket, code: number, reason: Buffer): void {
  if (socket.readyState === WebSocket.CLOSED || socket.readyState === WebSocket.CLOSING) return;
  const sendable = code === 1005 || code === 1006 || code === 1015 ? 1000 : code;
  socket.close(sendable, reason);
}
