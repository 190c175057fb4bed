import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { problemsOf, withKeys } from './config-helpers.js';

/** README "Pages": `pages.dir`, `pages.productName` and `pages.logo` are checked before start-up. */
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-pages-config-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const logo = join(dir, 'logo.svg');
writeFileSync(logo, '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>');
const big = join(dir, 'big.png');
writeFileSync(big, Buffer.alloc(64 * 1024 + 1));
const notDir = join(dir, 'file.txt');
writeFileSync(notDir, 'x');

t.test('defaults: the built-in template, product name gatehouse, no logo', async (t) => {
  t.strictSame(loadConfig(withKeys({}), {}).pages, { productName: 'gatehouse' });
});

t.test('a readable directory and a small image are accepted', async (t) => {
  t.strictSame(loadConfig(withKeys({ pages: { dir, productName: 'Acme Orders', logo } }), {}).pages, { dir, productName: 'Acme Orders', logo });
});

t.test('a missing or wrong directory or logo is refused, naming the key', async (t) => {
  t.strictSame(problemsOf(withKeys({ pages: { dir: join(dir, 'nope') } })), [`pages.dir: ${join(dir, 'nope')} does not exist or cannot be read`]);
  t.strictSame(problemsOf(withKeys({ pages: { dir: notDir } })), [`pages.dir: ${notDir} is not a directory`]);
  t.strictSame(problemsOf(withKeys({ pages: { logo: join(dir, 'missing.png') } })), [`pages.logo: ${join(dir, 'missing.png')} does not exist or is not a file`]);
  t.strictSame(problemsOf(withKeys({ pages: { logo: notDir } })), ['pages.logo: must be an image file ending in .png, .svg, .jpg, .jpeg, .gif, .webp']);
  t.strictSame(problemsOf(withKeys({ pages: { logo: big } })), ['pages.logo: 65537 bytes, at most 65536 (it is inlined into every page)']);
  t.strictSame(problemsOf(withKeys({ pages: { productName: '' } })), ['pages.productName: must be a non-empty string']);
  t.strictSame(problemsOf(withKeys({ pages: { productname: 'x' } })), ['pages.productname: unknown key; did you mean pages.productName?']);
});
