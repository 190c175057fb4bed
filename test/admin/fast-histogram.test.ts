import t from 'tap';
import { Registry } from 'prom-client';
import { FastHistogram } from '../../src/metrics/fast-histogram.js';

t.test('buckets are cumulative, a bound includes its own value, and what exceeds every bound counts only in +Inf', async (t) => {
  const histogram = new FastHistogram('demo_seconds', 'demo', [0.1, 1], 'route');
  for (const value of [0.05, 0.1, 0.5, 7]) histogram.observe(value, 'proxy');
  histogram.observe(0.2, 'login');
  const registry = new Registry();
  registry.registerMetric(histogram.asMetric());
  const lines = (await registry.metrics()).split('\n');
  t.strictSame(
    lines.filter((line) => line.includes('route="proxy"')),
    [
      'demo_seconds_bucket{route="proxy",le="0.1"} 2',
      'demo_seconds_bucket{route="proxy",le="1"} 3',
      'demo_seconds_bucket{route="proxy",le="+Inf"} 4',
      'demo_seconds_sum{route="proxy"} 7.65',
      'demo_seconds_count{route="proxy"} 4',
    ],
  );
  t.ok(lines.includes('demo_seconds_count{route="login"} 1'), 'each label value is a series of its own');
  t.ok(lines.includes('# TYPE demo_seconds histogram'));

  histogram.reset();
  t.notOk((await registry.metrics()).includes('demo_seconds_count'), 'reset empties every series');
});
