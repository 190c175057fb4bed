import t from 'tap';
import { existsSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startHarness } from '../helpers/harness.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';
import { CHROMIUM, firstOfChain, keepEvidenceOnFailure, openBrowser, submitLoginForm } from './browser.js';

/**
 * README "WebSockets and server-sent events" in Chromium: the page's own `EventSource` gets each event as the
 * upstream sends it, and its own `WebSocket` echoes through the gateway and
 * is closed with 1008 when the user signs out in another tab.
 */

const chromiumMissing = existsSync(CHROMIUM) || process.env.CI === 'true' ? false : `${CHROMIUM} is not installed (apt-get install chromium)`;

/** What the page keeps of its live channels, read back by the test. */
interface PageState {
  events: Array<{ data: string; at: number }>;
  echoed: Promise<string>;
  socketClosed: Promise<{ code: number; reason: string; at: number }>;
}

t.test('in Chromium: EventSource events one by one, a WebSocket echo, and a logout in another tab closes the socket with 1008', { skip: chromiumMissing }, async (t) => {
  // The app: a page to land on after sign-in, and an event stream that sends each event when the test says.
  const streams: ServerResponse[] = [];
  const app = createServer((request, response) => {
    if (request.url === '/events') {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      response.flushHeaders();
      streams.push(response);
      return;
    }
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>Live</title><h1>Live</h1>');
  });
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  const sockets = await startWebSocketUpstream();
  const h = await startHarness({
    authorizationServerHost: 'localhost',
    config: () => ({
      routes: [
        { path: '/socket', upstream: sockets.url, websocket: true },
        { path: '/', upstream: `http://127.0.0.1:${(app.address() as AddressInfo).port}` },
      ],
    }),
  });
  sockets.as = h.as;
  t.teardown(async () => {
    for (const stream of streams) stream.destroy();
    await h.close();
    await sockets.close();
    await new Promise((resolve) => app.close(resolve));
  });
  const { context, page } = await openBrowser(t);

  await page.goto(`${h.url}/live`);
  await submitLoginForm(page, 'alice');
  await page.waitForURL(`${h.url}/live`);
  t.equal(await page.locator('h1').textContent(), 'Live', 'signed in, on the app page');

  t.test('EventSource: each event reaches the page before the upstream sends the next', async (t) => {
    keepEvidenceOnFailure(t, page);
    await page.evaluate(() => {
      const state = window as unknown as PageState & { source: EventSource };
      state.events = [];
      state.source = new EventSource('/events');
      state.source.onmessage = (event) => state.events.push({ data: event.data as string, at: Date.now() });
    });
    const sentAt: number[] = [];
    for (const [index, data] of ['one', 'two', 'three'].entries()) {
      // Wait for the stream on the first round; later rounds write to the same one.
      while (streams.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      sentAt.push(Date.now());
      streams[0]!.write(`data: ${data}\n\n`);
      // The next event is sent only once this one has arrived: a gateway holding events back times out here.
      await page.waitForFunction((count) => (window as unknown as PageState).events.length === count, index + 1, { timeout: 5_000 });
    }
    const events = await page.evaluate(() => (window as unknown as PageState).events);
    t.strictSame(
      events.map(({ data }) => data),
      ['one', 'two', 'three'],
    );
    for (const [index, event] of events.entries()) {
      t.ok(event.at >= sentAt[index]! - 50, `"${event.data}" arrived ${event.at - sentAt[index]!} ms after it was sent`);
      if (index + 1 < sentAt.length) t.ok(event.at <= sentAt[index + 1]!, `"${event.data}" arrived before "${events[index + 1]!.data}" was sent`);
    }
    await page.evaluate(() => (window as unknown as { source: EventSource }).source.close());
  });

  t.test('WebSocket: an echo, then a logout in another tab closes it with 1008 seen by the page', async (t) => {
    keepEvidenceOnFailure(t, page);
    const before = sockets.handshakes.length;
    const echoed = await page.evaluate(async () => {
      const state = window as unknown as PageState;
      const socket = new WebSocket(`${location.origin.replace(/^http/, 'ws')}/socket/chat`);
      state.socketClosed = new Promise((resolve) => socket.addEventListener('close', (event) => resolve({ code: event.code, reason: event.reason, at: Date.now() })));
      state.echoed = new Promise((resolve, reject) => {
        socket.addEventListener('message', (event) => resolve(event.data as string), { once: true });
        socket.addEventListener('error', () => reject(new Error('the WebSocket failed')));
      });
      await new Promise((resolve) => socket.addEventListener('open', resolve, { once: true }));
      socket.send('hello from Chromium');
      return state.echoed;
    });
    t.equal(echoed, 'hello from Chromium', 'the upstream echoed it through the gateway');
    t.equal(sockets.handshakes.length, before + 1);
    t.equal(sockets.handshakes.at(-1)!.sub, 'alice', "the upstream's handshake carried alice's bearer");
    t.equal(sockets.handshakes.at(-1)!.headers.cookie, undefined, "and none of the gateway's cookies");

    const other = await context.newPage();
    keepEvidenceOnFailure(t, other);
    const loggedOutAt = Date.now();
    const logout = firstOfChain((await other.goto(`${h.url}/logout`))!);
    t.equal((await logout.response())?.status(), 302, 'the other tab signed out');
    const closed = await page.evaluate(() => (window as unknown as PageState).socketClosed);
    t.equal(closed.code, 1008, 'the page saw close code 1008');
    t.equal(closed.reason, 'session ended');
    t.ok(closed.at - loggedOutAt < 5_000, `closed ${closed.at - loggedOutAt} ms after the logout`);

    const reconnect = page.waitForResponse(`${h.url}/events`);
    await page.evaluate(() => void new EventSource('/events'));
    t.equal((await reconnect).status(), 401, 'an EventSource reconnect without the session: 401, never a redirect');
  });
});
