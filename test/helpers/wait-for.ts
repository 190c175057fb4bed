/**
 * Polls `condition` until it holds, for what a test must wait on without an
 * event (a token expiring at a real AS, a health check noticing an outage).
 * Throws after `timeoutMs` naming what it waited for.
 * @example await waitFor('the access token to expire at the AS', async () => !(await introspect(...)).active);
 */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 30_000, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
