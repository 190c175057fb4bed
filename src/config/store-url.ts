/**
 * The Redis forms of `session.store` (README, "Run several replicas"):
 *
 *   redis://[[USER]:PASSWORD@]HOST:PORT[/DB]                           one server
 *   redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER[/DB]  Sentinel: the sentinels, then the master's name
 *   redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]           Cluster: some of its nodes
 *
 * `rediss` instead of `redis` for TLS. The WHATWG URL parser refuses a
 * comma-separated host list, so the multi-host forms are split here; the
 * credentials are percent-decoded as in a URL (RFC 3986 §3.2.1).
 */
export interface RedisTarget {
  mode: 'single' | 'sentinel' | 'cluster';
  tls: boolean;
  username?: string;
  password?: string;
  nodes: Array<{ host: string; port: number }>;
  /** Sentinel: the monitored master's name. */
  master?: string;
  /** Single server and Sentinel; a Cluster has only database 0. */
  database: number;
}

const SCHEME = /^(rediss?)(\+(sentinel|cluster))?:\/\//;
const NODE = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/;
/** Redis's and Sentinel's default ports, for a node given without one. */
const DEFAULT_PORT = { single: 6379, sentinel: 26379, cluster: 6379 } as const;

/** Whether `url` uses one of the Redis schemes (valid or not). */
export function isRedisUrl(url: string): boolean {
  return SCHEME.test(url);
}

/** Parses a Redis store URL; throws an Error whose message says what is wrong (never the password). */
export function parseRedisUrl(url: string): RedisTarget {
  const scheme = SCHEME.exec(url);
  if (!scheme) throw new Error('not a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL');
  const mode = (scheme[3] ?? 'single') as RedisTarget['mode'];
  const rest = url.slice(scheme[0].length);
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '' : rest.slice(slash + 1);
  if (/[?#]/.test(rest)) throw new Error('must not have a query or fragment');
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? undefined : authority.slice(0, at);
  const hosts = at < 0 ? authority : authority.slice(at + 1);
  const target: RedisTarget = { mode, tls: scheme[1] === 'rediss', nodes: [], database: 0 };
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    const username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon));
    const password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1));
    if (username) target.username = username;
    if (password) target.password = password;
  }
  for (const node of hosts.split(',')) {
    const match = NODE.exec(node);
    if (!match) throw new Error('every node must be HOST:PORT');
    const port = match[2] === undefined ? DEFAULT_PORT[mode] : Number(match[2]);
    if (port < 1 || port > 65535) throw new Error('a port must be 1-65535');
    target.nodes.push({ host: match[1]!.replace(/^\[|\]$/g, ''), port });
  }
  if (mode === 'single' && target.nodes.length !== 1) throw new Error('redis:// names one server; use redis+sentinel:// or redis+cluster:// for several');
  const segments = path === '' ? [] : path.split('/');
  if (mode === 'sentinel') {
    const [master, database, ...extra] = segments;
    if (!master) throw new Error("redis+sentinel:// needs the master's name: redis+sentinel://HOST:PORT,HOST:PORT/MASTER[/DB]");
    target.master = decode(master);
    if (database !== undefined) target.database = parseDatabase(database);
    if (extra.length > 0) throw new Error('path must be /MASTER[/DB]');
  } else if (mode === 'cluster') {
    if (segments.length > 0) throw new Error('redis+cluster:// takes no path: a Cluster has database 0 only');
  } else {
    const [database, ...extra] = segments;
    if (database !== undefined && database !== '') target.database = parseDatabase(database);
    if (extra.length > 0) throw new Error('path must be /DB');
  }
  return target;
}

/** The URL with its password replaced by `[redacted]` (for `check` and logs); any form, parsable or not. */
export function redactRedisPassword(url: string, redacted: string): string {
  const scheme = SCHEME.exec(url);
  if (!scheme) return url;
  const rest = url.slice(scheme[0].length);
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const at = authority.lastIndexOf('@');
  if (at < 0) return url;
  const userinfo = authority.slice(0, at);
  const colon = userinfo.indexOf(':');
  if (colon < 0 || colon === userinfo.length - 1) return url;
  return `${scheme[0]}${userinfo.slice(0, colon)}:${redacted}${rest.slice(at)}`;
}

function parseDatabase(text: string): number {
  if (!/^\d{1,2}$/.test(text)) throw new Error('the database must be a number');
  return Number(text);
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new Error('bad percent-encoding in the credentials or master name');
  }
}

/**
 * Where a store is, for a log line: its URL without user-info, query or
 * fragment. Everything up to the URL's last `@` goes first, so a password
 * holding raw `@`, `:`, `/`, `?` or `#` is dropped whole, whatever a URL
 * parser would make of it: `redis://u:p@ss@host:6379/0` -> `redis://host:6379/0`.
 */
export function storeEndpoint(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? '';
  const at = url.lastIndexOf('@');
  const rest = at < scheme.length ? url.slice(scheme.length) : url.slice(at + 1);
  return `${scheme}${rest.replace(/[?#].*$/s, '')}`;
}
