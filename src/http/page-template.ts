import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { LOGO_TYPES } from '../config/schema.js';
import type { PageName } from '../errors.js';

/**
 * The pages the gateway renders itself (README "Pages"): sign-in required,
 * signed out, sign-in did not complete, forbidden, could not reach the
 * application, service unavailable. One small template, inline CSS, no
 * script and no external asset, so the Content-Security-Policy sent with
 * them allows nothing but that one style (by its hash) and an inline logo.
 * Operators replace the template with `pages.dir` and brand it with
 * `pages.productName` and `pages.logo`.
 */

/** What one page says. */
export interface PageContent {
  page: PageName;
  title: string;
  message: string;
  /** One link (sign in, sign in again, sign out). */
  action?: { href: string; text: string };
  /** Extra `<head>` markup of the gateway's own (the strict-SameSite page's meta refresh). */
  head?: string;
  /** Shown small at the bottom ("HTTP 502"), for a support request. */
  status?: number;
}

/** `pages` of the configuration. */
export interface PagesSettings {
  dir?: string;
  productName: string;
  logo?: string;
}

/** A renderer built once at start-up, and the CSP that allows exactly what its pages use. */
export interface PageRenderer {
  render(content: PageContent): string;
  securityPolicy: string;
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ENTITIES[char]!);
}

/** The built-in template: readable at 200% zoom, high contrast, dark-mode aware, landmarks and one h1. */
export const DEFAULT_TEMPLATE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex">
{{head}}<title>{{title}} · {{productName}}</title>
<style>
:root{color-scheme:light dark;--fg:#1b1f24;--muted:#4a5360;--bg:#f5f6f8;--card:#fff;--line:#d5d9df;--accent:#0b57d0}
@media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--muted:#b4bac3;--bg:#15181c;--card:#1f2329;--line:#3a4048;--accent:#8ab4f8}}
*{box-sizing:border-box}
body{margin:0;min-height:100vh;display:flex;flex-direction:column;align-items:center;justify-content:center;padding:1.5rem;font:1rem/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;align-items:center;gap:.6rem;margin-bottom:1rem;color:var(--muted);font-weight:600}
header img{max-height:2.5rem;max-width:10rem}
main{width:100%;max-width:30rem;background:var(--card);border:1px solid var(--line);border-radius:12px;padding:2rem}
h1{margin:0 0 .75rem;font-size:1.5rem;line-height:1.25}
p{margin:0 0 1rem}
.action{display:inline-block;margin-top:.5rem;padding:.6rem 1.2rem;border-radius:8px;background:var(--accent);color:var(--card);text-decoration:none;font-weight:600}
.action:focus-visible{outline:3px solid var(--fg);outline-offset:3px}
footer{margin-top:1rem;font-size:.85rem;color:var(--muted)}
</style>
</head>
<body>
<header>{{logo}}<span>{{productName}}</span></header>
<main>
<h1>{{title}}</h1>
<p>{{message}}</p>
{{action}}
</main>
<footer>{{status}}</footer>
</body>
</html>
`;

const STYLE_ELEMENT = /<style>([\s\S]*?)<\/style>/g;
const PLACEHOLDER = /\{\{(head|title|productName|logo|message|action|status)\}\}/g;

/**
 * Loads the templates once (the built-in one, or `pages.dir/<page>.html`,
 * then `pages.dir/page.html`) and the logo, and computes the CSP from the
 * inline styles they hold.
 * @throws Error when a file in `pages.dir` or the logo cannot be read (`check` reports that first).
 * @example const pages = createPageRenderer({ productName: 'Acme' }); pages.render({ page: 'signed-out', title: 'Signed out', message: '…' })
 */
export function createPageRenderer(settings: PagesSettings): PageRenderer {
  const templates = new Map<PageName | 'page', string>();
  const fallback = settings.dir === undefined ? DEFAULT_TEMPLATE : readTemplate(join(settings.dir, 'page.html')) ?? DEFAULT_TEMPLATE;
  const names: PageName[] = ['sign-in-required', 'signed-out', 'sign-in-failed', 'forbidden', 'upstream-unreachable', 'unavailable', 'signed-in', 'refused'];
  for (const name of names) {
    templates.set(name, (settings.dir === undefined ? undefined : readTemplate(join(settings.dir, `${name}.html`))) ?? fallback);
  }
  const logo = settings.logo === undefined ? '' : `<img src="${logoDataUrl(settings.logo)}" alt="${escapeHtml(settings.productName)} logo">`;
  const productName = escapeHtml(settings.productName);
  const styleHashes = new Set<string>();
  for (const template of templates.values()) {
    for (const [, style] of template.matchAll(STYLE_ELEMENT)) styleHashes.add(`'sha256-${createHash('sha256').update(style!).digest('base64')}'`);
  }
  return {
    render(content) {
      const values: Record<string, string> = {
        head: content.head ?? '',
        title: escapeHtml(content.title),
        productName,
        logo,
        message: escapeHtml(content.message),
        action: content.action ? `<p><a class="action" href="${escapeHtml(content.action.href)}">${escapeHtml(content.action.text)}</a></p>` : '',
        status: content.status === undefined ? '' : `HTTP ${content.status}`,
      };
      return templates.get(content.page)!.replace(PLACEHOLDER, (_match, key: string) => values[key]!);
    },
    securityPolicy: securityPolicy([...styleHashes]),
  };
}

/**
 * Nothing may load but the template's own inline styles (each allowed by its
 * SHA-256, CSP Level 3 §8.2) and a `data:` logo; no script, no form, no
 * frame around the page, no base URL (CSP Level 3, `frame-ancestors` per
 * RFC 7034's successor).
 */
function securityPolicy(styleHashes: string[]): string {
  const styles = styleHashes.length === 0 ? "style-src 'none'" : `style-src ${styleHashes.join(' ')}`;
  return `default-src 'none'; ${styles}; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

function readTemplate(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`pages.dir: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

function logoDataUrl(path: string): string {
  const type = LOGO_TYPES[extname(path).toLowerCase()];
  if (type === undefined) throw new Error(`pages.logo: ${path} is not one of ${Object.keys(LOGO_TYPES).join(', ')}`);
  return `data:${type};base64,${readFileSync(path).toString('base64')}`;
}

/** Which page (the registry in src/errors.ts owns the list). */
export type { PageName };
