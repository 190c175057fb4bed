/** One Set-Cookie header, parsed: its value and its attributes (names lower-cased; flags map to ''). */
export interface SetCookie {
  name: string;
  value: string;
  attributes: Map<string, string>;
}

/**
 * The Set-Cookie of `response` for cookie `name`, or undefined. Throws when
 * there are several for one name: a browser would keep only the last, and a
 * test should say which it means.
 * @example const session = findSetCookie(response, 'session_id');
 */
export function findSetCookie(response: Response | readonly string[], name: string): SetCookie | undefined {
  const headers = Array.isArray(response) ? response : (response as Response).headers.getSetCookie();
  const found = (headers as readonly string[]).map(parseSetCookie).filter((cookie) => cookie.name === name);
  if (found.length > 1) throw new Error(`${found.length} Set-Cookie headers for ${name}`);
  return found[0];
}

export function parseSetCookie(header: string): SetCookie {
  const [pair = '', ...rest] = header.split(';');
  const separator = pair.indexOf('=');
  const attributes = new Map<string, string>();
  for (const attribute of rest) {
    const equals = attribute.indexOf('=');
    const key = (equals < 0 ? attribute : attribute.slice(0, equals)).trim().toLowerCase();
    attributes.set(key, equals < 0 ? '' : attribute.slice(equals + 1).trim());
  }
  return { name: pair.slice(0, separator).trim(), value: pair.slice(separator + 1).trim(), attributes };
}

/** Whether a Set-Cookie deletes its cookie (Max-Age <= 0 or Expires in the past). */
export function isDeletion(cookie: SetCookie): boolean {
  const maxAge = cookie.attributes.get('max-age');
  const expires = cookie.attributes.get('expires');
  return (maxAge !== undefined && Number(maxAge) <= 0) || (expires !== undefined && Date.parse(expires) <= Date.now());
}
