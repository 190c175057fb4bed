import { existsSync } from 'node:fs';
import type { Scenario } from '../scenario.js';

const MODULE = '/usr/lib/apache2/modules/mod_auth_openidc.so';
const BINARY = '/usr/sbin/apache2';

/**
 * Apache + mod_auth_openidc as a second baseline, from Debian's apache2 and
 * libapache2-mod-auth-openidc. Not installed on the machines this bench has
 * run on so far, so it reports why it was skipped.
 */
export const apache: Scenario = async () => {
  const installed = existsSync(BINARY) && existsSync(MODULE);
  const skipped = installed
    ? 'skipped: apache2 and mod_auth_openidc are installed, but this bench does not drive them yet'
    : 'skipped: apache2/mod_auth_openidc not installed';
  return {
    rows: [{ scenario: 'Apache + mod_auth_openidc', metric: 'hot path req/s', baseline: '', gatehouse: '', ratio: '', target: '', met: undefined }],
    checks: [],
    data: { installed },
    skipped,
  };
};
