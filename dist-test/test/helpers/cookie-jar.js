/**
 * A minimal browser cookie store for fetch-driven tests: cookies are kept per
 * origin by name (Path and Domain are ignored, every cookie of an origin is
 * sent), and a Set-Cookie with `Max-Age<=0` or a past `Expires` deletes one.
 */
export class CookieJar {
    #origins = new Map();
    /** Applies the response's Set-Cookie headers to the cookies of `url`'s origin. */
    store(url, setCookies) {
        const cookies = this.#cookiesOf(url);
        for (const setCookie of setCookies) {
            const [pair = '', ...attributes] = setCookie.split(';');
            const separator = pair.indexOf('=');
            if (separator <= 0)
                continue;
            const name = pair.slice(0, separator).trim();
            if (isRemoval(attributes))
                cookies.delete(name);
            else
                cookies.set(name, pair.slice(separator + 1).trim());
        }
    }
    /** The Cookie header a browser would send to `url`, or undefined when there is none. */
    header(url) {
        const cookies = [...this.#cookiesOf(url)].map(([name, value]) => `${name}=${value}`);
        return cookies.length === 0 ? undefined : cookies.join('; ');
    }
    /** The value of one cookie of `url`'s origin. */
    get(url, name) {
        return this.#cookiesOf(url).get(name);
    }
    /**
     * A fetch that never follows redirects, sends this jar's cookies and stores
     * the cookies of the response.
     */
    async fetch(url, init = {}) {
        const headers = new Headers(init.headers);
        const cookie = this.header(url);
        if (cookie !== undefined)
            headers.set('cookie', cookie);
        const response = await fetch(url, { ...init, headers, redirect: 'manual' });
        this.store(url, response.headers.getSetCookie());
        return response;
    }
    #cookiesOf(url) {
        const origin = new URL(url).origin;
        let cookies = this.#origins.get(origin);
        if (cookies === undefined) {
            cookies = new Map();
            this.#origins.set(origin, cookies);
        }
        return cookies;
    }
}
function isRemoval(attributes) {
    return attributes.some((attribute) => {
        const [key = '', value = ''] = attribute.split('=', 2).map((part) => part.trim());
        if (key.toLowerCase() === 'max-age')
            return Number(value) <= 0;
        if (key.toLowerCase() === 'expires')
            return Date.parse(value) <= Date.now();
        return false;
    });
}
//# sourceMappingURL=cookie-jar.js.map