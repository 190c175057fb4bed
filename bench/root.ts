import { fileURLToPath } from 'node:url';

/** The repository's root, from the compiled bench (dist-bench/bench/). */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
