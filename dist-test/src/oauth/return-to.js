const MAX_LENGTH = 2048;
const MAX_DECODE_ROUNDS = 3;
/**
 * The local path the browser goes to after sign-in, or `/` for anything
 * that could leave the site (RFC 9700 §4.11, open redirectors): it must be a
 * single string starting with exactly one `/` (not `//` or `/\`), with no
 * backslash and no control character, raw or percent-encoded at any depth,
 * printable ASCII only (so it is always a valid Location header).
 * @example safeReturnTo('/orders?id=7') // '/orders?id=7'
 * @example safeReturnTo('//evil.example') // '/'
 */
export function safeReturnTo(value) {
    if (typeof value !== 'string' || value.length === 0 || value.length > MAX_LENGTH)
        return '/';
    if (!isSafeLocalPath(value, 0x21, 0x7e))
        return '/';
    let decoded = value;
    for (let round = 0; round < MAX_DECODE_ROUNDS; round += 1) {
        const next = decodeOnce(decoded);
        if (next === undefined)
            return '/';
        if (next === decoded)
            return value;
        if (!isSafeLocalPath(next, 0x20, 0x10ffff))
            return '/';
        decoded = next;
    }
    return '/';
}
/** Starts with one `/` not followed by `/` or `\`; no backslash; every character within [lowest, highest] and not DEL or a C1 control. */
function isSafeLocalPath(path, lowest, highest) {
    if (path[0] !== '/' || path[1] === '/' || path[1] === '\\')
        return false;
    for (let index = 0; index < path.length; index += 1) {
        const code = path.charCodeAt(index);
        if (code < lowest || code > highest || (code >= 0x7f && code <= 0x9f) || code === 0x5c)
            return false;
    }
    return true;
}
function decodeOnce(path) {
    try {
        return decodeURIComponent(path);
    }
    catch {
        return undefined;
    }
}
//# sourceMappingURL=return-to.js.map