import { signIn } from '../test/helpers/sign-in.js';

/**
 * Signs `count` users in for real (gateway /login, the AS's login form,
 * /callback), `concurrency` at a time, and returns their session cookies in
 * order. User names are `${prefix}-${i}`.
 */
export async function signInUsers(gatewayUrl: string, prefix: string, count: number, concurrency = 8): Promise<string[]> {
  const cookies: string[] = new Array<string>(count);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      cookies[i] = (await signIn(gatewayUrl, { user: `${prefix}-${i}` })).cookie;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return cookies;
}

/** One GET with a cookie; throws unless it answers `status` (a bench that measures 401s measures nothing). */
export async function expectStatus(url: string, cookie: string | undefined, status = 200): Promise<void> {
  const response = await fetch(url, { headers: cookie === undefined ? {} : { cookie } });
  const body = await response.text();
  if (response.status !== status) throw new Error(`GET ${url} answered ${response.status}, expected ${status}: ${body.slice(0, 200)}`);
}
