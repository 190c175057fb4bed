import { isIP } from 'node:net';

/**
 * Whether a URL hostname names this machine: `localhost`, 127.0.0.0/8 or [::1].
 * Only these may use plain http for the authorization server.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '0:0:0:0:0:0:0:1';
}
