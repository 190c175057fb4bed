import { statSync } from 'node:fs';
import { extname } from 'node:path';
import { LOGO_MAX_BYTES, LOGO_TYPES } from '../schema.js';
import type { Rule } from './rule.js';

/** `pages`: the operator's template directory and logo, read at start-up. */
export const PAGE_RULES: readonly Rule[] = [
  {
    reads: [],
    check({ pages }) {
      const problems: string[] = [];
      if (pages.dir !== undefined) {
        const stat = statOf(pages.dir);
        if (stat === undefined) problems.push(`pages.dir: ${pages.dir} does not exist or cannot be read`);
        else if (!stat.isDirectory()) problems.push(`pages.dir: ${pages.dir} is not a directory`);
      }
      if (pages.logo !== undefined) {
        const stat = statOf(pages.logo);
        if (LOGO_TYPES[extname(pages.logo).toLowerCase()] === undefined) {
          problems.push(`pages.logo: must be an image file ending in ${Object.keys(LOGO_TYPES).join(', ')}`);
        } else if (stat === undefined || !stat.isFile()) problems.push(`pages.logo: ${pages.logo} does not exist or is not a file`);
        else if (stat.size > LOGO_MAX_BYTES) problems.push(`pages.logo: ${stat.size} bytes, at most ${LOGO_MAX_BYTES} (it is inlined into every page)`);
      }
      return problems;
    },
  },
];

function statOf(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}
