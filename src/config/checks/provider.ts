import { isLoopbackHost } from '../loopback.js';
import { inspectClientKey } from '../client-key.js';
import { parseUrl, type Rule } from './rule.js';

const PROVIDER_URL_KEYS = [
  'issuer',
  'authorizationEndpoint',
  'tokenEndpoint',
  'userinfoEndpoint',
  'revocationEndpoint',
  'endSessionEndpoint',
  'postLogoutRedirectUri',
] as const;

/** `provider`: the authorization server's endpoints and how the gateway authenticates to it. */
export const PROVIDER_RULES: readonly Rule[] = [
  {
    reads: [],
    check({ provider }) {
      const problems: string[] = [];
      for (const key of PROVIDER_URL_KEYS) {
        const value = provider[key];
        if (value === undefined) continue;
        const url = parseUrl(value);
        if (!url || !['http:', 'https:'].includes(url.protocol)) problems.push(`provider.${key}: must be an absolute http(s) URL`);
        // postLogoutRedirectUri is where the browser lands, not the authorization server.
        else if (key !== 'postLogoutRedirectUri' && url.protocol !== 'https:' && !isLoopbackHost(url.hostname)) {
          problems.push(`provider.${key}: must use https (http is allowed only on localhost, 127.0.0.0/8 and [::1])`);
        }
      }
      return problems;
    },
  },
  {
    reads: ['provider.authorizationEndpoint', 'provider.tokenEndpoint'],
    check({ provider }) {
      if (provider.issuer !== undefined || (provider.authorizationEndpoint !== undefined && provider.tokenEndpoint !== undefined)) return [];
      return ['provider.issuer: required (or give provider.authorizationEndpoint and provider.tokenEndpoint for a server without discovery)'];
    },
  },
  {
    reads: ['provider.issuer'],
    check({ provider }) {
      if (provider.issuer !== undefined || provider.userinfoEndpoint !== undefined) return [];
      return ['provider.userinfoEndpoint: required without provider.issuer (the user is identified through userinfo)'];
    },
  },
  {
    reads: ['provider.clientAuthMethod'],
    check({ provider: { clientAuthMethod: method, clientSecret, privateKey } }) {
      if ((method === 'client_secret_post' || method === 'client_secret_basic') && clientSecret === undefined) {
        return [`provider.clientSecret: required with clientAuthMethod ${method}`];
      }
      if (method === 'private_key_jwt' && privateKey === undefined) {
        return ['provider.privateKey: required with clientAuthMethod private_key_jwt (a PKCS#8 PEM private key)'];
      }
      if (method === 'private_key_jwt') {
        const inspected = inspectClientKey(privateKey!);
        // The key itself is never quoted: only what kind of key it is.
        if ('problem' in inspected) return [`provider.privateKey: ${inspected.problem}`];
      }
      return [];
    },
  },
  {
    reads: ['provider.issuer'],
    check({ provider }) {
      // Only discovery names the PAR endpoint (RFC 9126 §5); explicit endpoints have no key for it.
      if (provider.pushedAuthorization !== 'required' || provider.issuer !== undefined) return [];
      return ['provider.pushedAuthorization: required needs provider.issuer (the endpoint comes from discovery)'];
    },
  },
];
