import type { CookieSerializeOptions } from '@fastify/cookie';
import type { FastifyReply } from 'fastify';
import { cookieIsSecure, type Config } from '../config/schema.js';

/** How long after a sign-in a browser without the session cookie is taken to have refused it. */
const SIGNED_IN_MARKER_SECONDS = 60;

/**
 * The gateway's cookies and their attributes, computed once from config.
 * The session cookie holds only the random session id; the login cookie
 * holds the sealed pending logins.
 */
export class GatewayCookies {
  readonly sessionName: string;
  readonly loginName: string;
  /** Set by the callback for a minute: a browser that carries it but no session cookie refused the session cookie (no redirect loop, README "What the browser sees"). */
  readonly signedInName: string;
  /**
   * Provider name -> the name of the sign-in host's session cookie of that
   * provider (README "Several identity providers"): the default provider's is
   * `sessionName`, a named one's `sessionName.NAME`, so the sign-in host keeps
   * one session per provider and a sign-in at one never replaces the other's.
   */
  readonly #sessionNames: ReadonlyMap<string, string>;
  readonly #session: CookieSerializeOptions;
  readonly #login: CookieSerializeOptions;
  readonly #cleared: CookieSerializeOptions;
  readonly #loginCleared: CookieSerializeOptions;
  readonly #signedIn: CookieSerializeOptions;
  readonly #signedInCleared: CookieSerializeOptions;

  /** @param pendingLoginTtlMs how long a pending login lives (src/oauth/pending-login.ts): the login cookie's lifetime. */
  constructor(config: Config, pendingLoginTtlMs: number) {
    const secure = cookieIsSecure(config);
    const maxAge = config.session.cookieMaxAge;
    this.sessionName = config.session.cookieName;
    this.#sessionNames = new Map([['default', this.sessionName], ...Object.keys(config.providers ?? {}).map((name): [string, string] => [name, `${this.sessionName}.${name}`])]);
    // Keeps the session cookie's prefix: a __Host- login cookie is also host-only, Secure and Path=/.
    this.loginName = `${config.session.cookieName}_login`;
    this.#session = { httpOnly: true, path: '/', secure, sameSite: config.session.cookieSameSite, ...(maxAge > 0 ? { maxAge } : {}) };
    // Lax whatever the session cookie says: the callback arrives as a top-level
    // navigation from the AS's site, which Strict would not carry (RFC 6265bis §5.6.7.1).
    this.#login = { httpOnly: true, path: '/', secure, sameSite: 'lax', maxAge: pendingLoginTtlMs / 1000 };
    this.signedInName = `${config.session.cookieName}_signed_in`;
    this.#signedIn = { httpOnly: true, path: '/', secure, sameSite: 'lax', maxAge: SIGNED_IN_MARKER_SECONDS };
    this.#signedInCleared = { ...this.#signedIn, maxAge: 0, expires: new Date(0) };
    this.#cleared = { ...this.#session, maxAge: 0, expires: new Date(0) };
    this.#loginCleared = { ...this.#login, maxAge: 0, expires: new Date(0) };
  }

  /** Sets the session cookie; `provider`: the sign-in host's cookie of that provider's session (default: the default provider's). */
  setSession(reply: FastifyReply, sessionId: string, provider = 'default'): void {
    reply.setCookie(this.sessionNameOf(provider), sessionId, this.#session);
  }

  /** The sign-in host's session cookie name for `provider`'s session: `sessionName` for the default provider. */
  sessionNameOf(provider: string): string {
    return this.#sessionNames.get(provider) ?? this.sessionName;
  }

  /** Every provider's session cookie name, the default provider's first. */
  get sessionNames(): IterableIterator<[string, string]> {
    return this.#sessionNames.entries();
  }

  /** Marks this browser as just signed in (the callback), or unmarks it (sign-out). */
  setSignedIn(reply: FastifyReply, signedIn: boolean): void {
    reply.setCookie(this.signedInName, signedIn ? '1' : '', signedIn ? this.#signedIn : this.#signedInCleared);
  }

  clearSession(reply: FastifyReply, provider = 'default'): void {
    reply.setCookie(this.sessionNameOf(provider), '', this.#cleared);
  }

  /** Sets the login cookie, or deletes it when no pending login remains. */
  setLogin(reply: FastifyReply, value: string | undefined): void {
    if (value === undefined) reply.setCookie(this.loginName, '', this.#loginCleared);
    else reply.setCookie(this.loginName, value, this.#login);
  }

  /** A Cookie header without the gateway's own cookies (README "How it works"), or undefined when nothing remains. */
  stripOwn(header: string): string | undefined {
    const kept = header
      .split(';')
      .map((pair) => pair.trim())
      .filter((pair) => pair.length > 0 && !this.isOwn(cookieName(pair)));
    return kept.length > 0 ? kept.join('; ') : undefined;
  }

  /** Upstream Set-Cookie values minus any that would overwrite a gateway cookie (README "How it works"). */
  filterSetCookie(values: string | string[]): string[] {
    const list = Array.isArray(values) ? values : [values];
    return list.filter((value) => !this.isOwn(cookieName(value)));
  }

  isOwn(name: string): boolean {
    return name === this.sessionName || name === this.loginName || name === this.signedInName || (this.#sessionNames.size > 1 && this.#isProviderSession(name));
  }

  #isProviderSession(name: string): boolean {
    for (const own of this.#sessionNames.values()) if (own === name) return true;
    return false;
  }
}

/** The name in `name=value…` (the whole text when it has no `=`). */
function cookieName(pair: string): string {
  const end = pair.indexOf('=');
  return (end < 0 ? pair : pair.slice(0, end)).trim();
}
