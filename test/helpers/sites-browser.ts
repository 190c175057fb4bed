import type { Test } from 'tap';
import { httpSend, type RawResponse } from './http-request.js';
import { approveAtAuthorizationServer } from './sign-in.js';
import type { CookieJar } from './cookie-jar.js';

/**
 * A browser for tests of several sites (README "Several sites"): cookies per
 * host name (host-only, as the gateway sets them), every request sent to
 * 127.0.0.1 on `port` with the Host header the URL names, as a browser
 * resolving `*.localhost` to loopback would. `port` may be changed between
 * requests to play a load balancer in front of replicas.
 */
export class SitesBrowser {
  readonly cookies = new Map<string, Map<string, string>>();
  readonly setCookies: string[] = [];

  constructor(public port: string) {}

  async get(url: string, headers: Record<string, string> = {}): Promise<RawResponse> {
    const target = new URL(url);
    const jar = this.cookies.get(target.hostname);
    const cookie = jar === undefined || jar.size === 0 ? undefined : [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const answer = await httpSend(`http://127.0.0.1:${this.port}`, {
      path: `${target.pathname}${target.search}`,
      headers: { host: target.host, accept: 'text/html', 'sec-fetch-mode': 'navigate', ...(cookie === undefined ? {} : { cookie }), ...headers },
    });
    const set = answer.headers['set-cookie'] ?? [];
    this.setCookies.push(...set);
    for (const line of set) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      const byHost = this.cookies.get(target.hostname) ?? new Map<string, string>();
      this.cookies.set(target.hostname, byHost);
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(line)) byHost.delete(pair.slice(0, at));
      else byHost.set(pair.slice(0, at), pair.slice(at + 1));
    }
    return answer;
  }

  /** The session cookie's value on `host` (a host name), if any. */
  session(host: string): string | undefined {
    return this.cookies.get(host)?.get('session_id');
  }

  /**
   * From a site page without a session to the hand-off URL, through the
   * sign-in host (`signInOrigin`) and the AS (with `atAs`, the browser's
   * cookies there); asserts each step on `t`.
   */
  async signInThrough(t: Test, signInOrigin: string, start: string, user = 'alice', atAs?: CookieJar): Promise<URL> {
    const first = await this.get(start);
    t.equal(first.status, 302, 'the site sends the browser to sign in');
    const login = new URL(first.headers.location!);
    t.equal(login.origin, signInOrigin, 'on the sign-in host');
    t.equal(login.searchParams.get('returnTo'), start, 'coming back to the full site URL');
    const toAs = await this.get(login.href);
    t.equal(toAs.status, 302);
    const callback = await approveAtAuthorizationServer(new URL(toAs.headers.location!), user, atAs);
    const afterCallback = await this.get(callback.href);
    t.equal(afterCallback.status, 302, 'the callback');
    return new URL(afterCallback.headers.location!);
  }
}
