import t from 'tap';
import { startHarness } from '../helpers/harness.js';
import { signIn } from '../helpers/sign-in.js';

/** README "Observe": GET /metrics on the admin listener, Prometheus text with the gateway's metrics and prom-client's defaults. */

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseMetrics(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [, name, labelText, value] = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line) ?? [];
      const labels = Object.fromEntries([...(labelText ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)].map(([, key, text]) => [key, text]));
      return { name: name ?? line, labels, value: Number(value) };
    });
}

/** The value of the sample with exactly these labels, undefined when absent. */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  return samples.find((sample) => sample.name === name && JSON.stringify(Object.entries(sample.labels).sort()) === wanted)?.value;
}

t.test('metrics count requests by route class and status, logins, refreshes, upstream latency and live sessions', async (t) => {
  const h = await startHarness({ accessTokenTtl: 2 });
  t.teardown(() => h.close());
  const scrape = async () => {
    const response = await fetch(`${h.gateway.adminAddress}/metrics`);
    t.equal(response.status, 200);
    t.match(response.headers.get('content-type'), /^text\/plain/);
    return parseMetrics(await response.text());
  };

  const alice = await signIn(h.url, { user: 'alice' }); // login 302, callback 302
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: alice.cookie } })).status, 200);
  t.equal((await fetch(`${h.url}/session`, { headers: { cookie: alice.cookie } })).status, 200);
  t.equal((await fetch(`${h.url}/api/me`)).status, 401);
  const bob = await signIn(h.url, { user: 'bob' });
  t.equal(valueOf(await scrape(), 'gatehouse_active_sessions'), 2, 'two live sessions in the store');

  t.equal((await fetch(`${h.url}/logout`, { headers: { cookie: bob.cookie }, redirect: 'manual' })).status, 302);
  // The 2 s access token is refreshed from 1 s on (skew capped at half the lifetime).
  await new Promise((resolve) => setTimeout(resolve, 1200));
  t.equal((await fetch(`${h.url}/api/me`, { headers: { cookie: alice.cookie } })).status, 200);
  t.ok(h.as.grants.refreshToken >= 1, 'the AS saw a refresh');

  const samples = await scrape();
  const requests = (route: string, status: string) => valueOf(samples, 'gatehouse_http_requests_total', { route, status });
  t.equal(requests('login', '302'), 2);
  t.equal(requests('callback', '302'), 2);
  t.equal(requests('session', '200'), 1);
  t.equal(requests('logout', '302'), 1);
  t.equal(requests('proxy', '200'), 2);
  t.equal(requests('proxy', '401'), 1);
  t.equal(valueOf(samples, 'gatehouse_logins_total', { result: 'ok' }), 2);
  t.equal(valueOf(samples, 'gatehouse_token_refreshes_total', { target: 'sign-in', result: 'ok' }), h.as.grants.refreshToken, 'one ok per refresh grant');

  t.equal(valueOf(samples, 'gatehouse_http_request_duration_seconds_count', { route: 'proxy' }), 3, 'request durations by route class');
  t.equal(valueOf(samples, 'gatehouse_http_request_duration_seconds_count', { route: 'login' }), 2);
  t.ok((valueOf(samples, 'gatehouse_http_request_duration_seconds_sum', { route: 'callback' }) ?? 0) > 0);

  const upstreamRequests = h.upstream.received.length;
  t.equal(upstreamRequests, 2);
  t.equal(valueOf(samples, 'gatehouse_upstream_request_duration_seconds_count'), upstreamRequests, 'one observation per upstream request');
  t.equal(valueOf(samples, 'gatehouse_upstream_request_duration_seconds_bucket', { le: '+Inf' }), upstreamRequests);
  t.ok(samples.some((sample) => sample.name === 'gatehouse_upstream_request_duration_seconds_bucket' && sample.labels.le === '0.1'), 'a histogram with buckets');
  t.ok((valueOf(samples, 'gatehouse_upstream_request_duration_seconds_sum') ?? 0) > 0);

  t.equal(valueOf(samples, 'gatehouse_active_sessions'), 1, 'the logged-out session is gone from the count');
  t.ok((valueOf(samples, 'process_resident_memory_bytes') ?? 0) > 0, 'process_resident_memory_bytes');
  t.ok((valueOf(samples, 'nodejs_heap_size_used_bytes') ?? 0) > 0, 'nodejs_heap_size_used_bytes');
});

t.test('a refused callback is counted as a failed login, not an ok one', async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  t.equal((await fetch(`${h.url}/callback?code=x&state=y`)).status, 400);
  const samples = parseMetrics(await (await fetch(`${h.gateway.adminAddress}/metrics`)).text());
  t.equal(valueOf(samples, 'gatehouse_http_requests_total', { route: 'callback', status: '400' }), 1);
  // Every result is shown from start-up (README "Observe"): ok stays at 0, one failure reason counts 1.
  t.equal(valueOf(samples, 'gatehouse_logins_total', { result: 'ok' }), 0);
  const failed = samples.filter((sample) => sample.name === 'gatehouse_logins_total' && sample.value > 0);
  t.equal(failed.length, 1);
  t.equal(failed[0]!.value, 1);
  t.not(failed[0]!.labels.result, 'ok');
});
