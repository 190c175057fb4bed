import { isUtf8 } from 'node:buffer';

/** A request path the gateway accepts, as it routes it and as the upstream receives it (README "Routes", the path rule). */
export interface NormalPath {
  ok: true;
  /**
   * What the upstream receives: percent-encoded unreserved characters
   * decoded (`/%61dmin` -> `/admin`, RFC 3986 §6.2.2.2), every other
   * escape kept with upper-case hex digits (§6.2.2.1), `;` parameters kept.
   */
  path: string;
  /**
   * What the route table matches: `path` without each segment's `;`
   * parameters (`/admin;x=1/panel` -> `/admin/panel`, as Java servers read
   * it) and with a run of `/` taken as one (as nginx and Tomcat merge them).
   */
  match: string;
}

/** A path the gateway refuses with 400, and why (the reason names no part of the path). */
export interface PathRefusal {
  ok: false;
  reason: string;
}

/** How many decodings deep an encoded `/`, `\` or dot segment is looked for (`%25252F` is three). */
const MAX_DECODINGS = 8;

const SLASH = 0x2f;
const BACKSLASH = 0x5c;
const PERCENT = 0x25;
const SEMICOLON = 0x3b;
const DOT = 0x2e;

/**
 * The path rule (README "Routes"), for every way a path reaches the gateway:
 * a proxied request, a WebSocket upgrade and forward-auth's original
 * request. A path an upstream could read differently from the gateway is
 * refused, never guessed at: an encoded `/` or `\` (`%2F`, `%5C`, after any
 * number of decodings: a WSGI or PHP upstream decodes `%2F` into a segment
 * boundary), a `.` or `..` segment raw or encoded (`/assets/%2e%2e/admin`),
 * a backslash (IIS and some Windows stacks read it as `/`), a space, control
 * or non-ASCII character, invalid percent-encoding or bytes that are not
 * UTF-8. `raw` is the path alone, without the query.
 *
 * A path that holds none of `%`, `;`, `\`, `//` or `/.` is normal as it is:
 * that check is one pass over the characters and allocates only the answer.
 * @example normalPath('/%61dmin;jsessionid=1/x') // { ok: true, path: '/admin;jsessionid=1/x', match: '/admin/x' }
 * @example normalPath('/admin%2Fpanel') // { ok: false, reason: 'an encoded "/" or "\\"' }
 */
export function normalPath(raw: string): NormalPath | PathRefusal {
  if (raw.charCodeAt(0) !== SLASH) return refused('the request target is not a path');
  let plain = true;
  for (let index = 0; index < raw.length; index += 1) {
    const code = raw.charCodeAt(index);
    if (code <= 0x20 || code >= 0x7f) return refused('the path holds a space, a control or a non-ASCII character');
    if (code === PERCENT || code === SEMICOLON || code === BACKSLASH) plain = false;
    else if (code === SLASH && index + 1 < raw.length) {
      const next = raw.charCodeAt(index + 1);
      if (next === SLASH || next === DOT) plain = false;
    }
  }
  if (plain) return { ok: true, path: raw, match: raw };
  return normalise(raw);
}

function normalise(raw: string): NormalPath | PathRefusal {
  if (raw.includes('\\')) return refused('the path holds a backslash');
  // One decoding: unreserved characters become themselves, every other escape stays (upper-case).
  let path = '';
  const bytes: number[] = [];
  for (let index = 0; index < raw.length; index += 1) {
    const code = raw.charCodeAt(index);
    if (code !== PERCENT) {
      path += raw[index];
      bytes.push(code);
      continue;
    }
    const byte = hexByte(raw, index + 1);
    if (byte < 0) return refused('invalid percent-encoding in the path');
    if (byte === SLASH || byte === BACKSLASH) return refused('the path holds an encoded "/" or "\\"');
    path += isUnreserved(byte) ? String.fromCharCode(byte) : `%${raw.slice(index + 1, index + 3).toUpperCase()}`;
    bytes.push(byte);
    index += 2;
  }
  const decoded = Buffer.from(bytes);
  if (!isUtf8(decoded)) return refused('the path is not UTF-8 once decoded');
  if (hasDotSegment(path)) return refused('the path holds a "." or ".." segment');
  // Deeper decodings: an upstream (or a framework behind it) that decodes again must not find a new "/", "\" or dot segment.
  let level = decoded.toString('latin1');
  for (let depth = 1; depth < MAX_DECODINGS; depth += 1) {
    if (level.includes('\\') || ENCODED_SEPARATOR.test(level)) return refused('the path holds an encoded "/" or "\\"');
    if (hasDotSegment(level)) return refused('the path holds a "." or ".." segment');
    const next = level.replace(ESCAPE, decodeEscape);
    if (next === level) break;
    level = next;
  }
  return { ok: true, path, match: matchForm(path) };
}

const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const ENCODED_SEPARATOR = /%(?:2f|5c)/i;

function decodeEscape(_escape: string, hex: string): string {
  return String.fromCharCode(Number.parseInt(hex, 16));
}

/** The byte `%XY` at `at` names, or -1 when `XY` are not two hex digits. */
function hexByte(text: string, at: number): number {
  if (at + 2 > text.length) return -1;
  const high = hexValue(text.charCodeAt(at));
  const low = hexValue(text.charCodeAt(at + 1));
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  if (code >= 0x41 && code <= 0x46) return code - 0x37;
  if (code >= 0x61 && code <= 0x66) return code - 0x57;
  return -1;
}

/** RFC 3986 §2.3: ALPHA, DIGIT, `-`, `.`, `_`, `~`. */
function isUnreserved(byte: number): boolean {
  return (
    (byte >= 0x41 && byte <= 0x5a) ||
    (byte >= 0x61 && byte <= 0x7a) ||
    (byte >= 0x30 && byte <= 0x39) ||
    byte === 0x2d ||
    byte === DOT ||
    byte === 0x5f ||
    byte === 0x7e
  );
}

/** Whether a segment, its `;` parameters aside (`..;x` is `..` to Tomcat), is `.` or `..`. */
function hasDotSegment(path: string): boolean {
  for (const segment of path.split('/')) {
    const name = withoutParameters(segment);
    if (name === '.' || name === '..') return true;
  }
  return false;
}

function withoutParameters(segment: string): string {
  const semicolon = segment.indexOf(';');
  return semicolon < 0 ? segment : segment.slice(0, semicolon);
}

/** `path` without `;` parameters, empty segments dropped (a trailing `/` kept). */
function matchForm(path: string): string {
  const segments = path.split('/').map(withoutParameters);
  const trailing = segments.length > 1 && segments[segments.length - 1] === '';
  const names = segments.filter((name) => name !== '');
  return `/${names.join('/')}${trailing && names.length > 0 ? '/' : ''}`;
}

/**
 * `path` after its first `count` segments as the route table counted them
 * (segments empty once their `;` parameters are removed do not count): what
 * a route with `stripPrefix` sends upstream. Always starts with `/`.
 * @example pathAfterSegments('/api;v=2/orders/7', 1) // '/orders/7'
 */
export function pathAfterSegments(path: string, count: number): string {
  let index = 0;
  let seen = 0;
  while (seen < count && index < path.length) {
    // path[index] is '/': read the segment after it.
    const end = path.indexOf('/', index + 1);
    const segmentEnd = end < 0 ? path.length : end;
    const segment = path.slice(index + 1, segmentEnd);
    if (withoutParameters(segment) !== '') seen += 1;
    index = segmentEnd;
  }
  const rest = path.slice(index);
  return rest === '' ? '/' : rest;
}

function refused(reason: string): PathRefusal {
  return { ok: false, reason };
}
