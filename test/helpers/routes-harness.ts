import { startHarness, type Harness, type HarnessOptions } from './harness.js';
import { startScriptedUpstream, type ScriptedUpstream } from './scripted-upstream.js';

/** Three upstreams a `routes` config sends requests to, each recording what reached it. */
export interface ThreeUpstreams {
  web: ScriptedUpstream;
  api: ScriptedUpstream;
  docs: ScriptedUpstream;
}

/** The whole cast (README "Routes"): the AS, a gateway with `routes`, and three real upstream servers. */
export interface RoutesHarness extends Harness, ThreeUpstreams {}

/**
 * Starts three scripted upstreams, then the harness with the `routes` that
 * `routes(upstreams)` returns (and `options.config`'s other sections).
 * @example
 * const h = await startRoutesHarness(({ web, api }) => [{ path: '/api', upstream: api.url }, { path: '/', upstream: web.url, auth: 'public' }]);
 */
export async function startRoutesHarness(routes: (upstreams: ThreeUpstreams) => Array<Record<string, unknown>>, options: HarnessOptions = {}): Promise<RoutesHarness> {
  const upstreams: ThreeUpstreams = { web: await startScriptedUpstream(), api: await startScriptedUpstream(), docs: await startScriptedUpstream() };
  const extra = options.config;
  const harness = await startHarness({
    ...options,
    config: (as) => ({ ...(typeof extra === 'function' ? extra(as) : (extra ?? {})), routes: routes(upstreams) }),
  });
  const close = harness.close;
  return Object.assign(harness, upstreams, {
    async close() {
      await close();
      await Promise.all([upstreams.web.close(), upstreams.api.close(), upstreams.docs.close()]);
    },
  });
}

/** Forgets what the three upstreams have seen so far. */
export function forgetSeen(h: ThreeUpstreams): void {
  h.web.seen.length = 0;
  h.api.seen.length = 0;
  h.docs.seen.length = 0;
}
