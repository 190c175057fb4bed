import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page, type Request, type Response } from 'playwright-core';
import type { Test } from 'tap';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it). No browser is ever downloaded. */
export const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // A container's /dev/shm is often 64 MiB, too small for Chromium (Debian's launcher means to add this, but can miscount).
  '--disable-dev-shm-usage',
  // Only loopback exists for the browser: oidc-provider's pages @import a web font from the internet.
  // *.localhost too (RFC 6761): Chromium resolves those names to loopback itself (README "Several sites").
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE *.localhost, EXCLUDE 127.0.0.1',
];
/** Gitignored. */
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
/** Per action or wait; a slow CI machine shared with other test files needs headroom. */
const TIMEOUT_MS = 20_000;

/**
 * Launches Chromium with a fresh profile for one test file; closed (and the
 * profile removed) by t's teardown, after a screenshot and the page's HTML
 * were saved if t failed.
 * @example const { context, page } = await openBrowser(t);
 */
export async function openBrowser(t: Test): Promise<{ context: BrowserContext; page: Page }> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install -y chromium), as .ci/run does`);
  const profile = mkdtempSync(join(tmpdir(), 'gatehouse-e2e-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS }).catch((err: unknown) => {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  });
  context.setDefaultTimeout(TIMEOUT_MS);
  const page = context.pages()[0] ?? (await context.newPage());
  t.teardown(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  keepEvidenceOnFailure(t, page);
  return { context, page };
}

/**
 * When t fails, saves `page` as a screenshot and as HTML under
 * test-artifacts/ and prints both paths. Call it in each subtest, so the
 * evidence shows the page as the failing subtest left it.
 */
export function keepEvidenceOnFailure(t: Test, page: Page): void {
  t.teardown(async () => {
    if (t.passing() || page.isClosed()) return;
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = basename(process.argv[1] ?? 'e2e').replace(/\.test\.ts$/, '');
    const base = join(ARTIFACTS, `${file}-${t.name.replace(/[^A-Za-z0-9]+/g, '-').slice(0, 60)}-${Date.now()}`);
    const saved: string[] = [];
    try {
      await page.screenshot({ path: `${base}.png`, fullPage: true, timeout: 5_000 });
      saved.push(`${base}.png`);
    } catch (err) {
      t.comment(`no screenshot: ${(err as Error).message}`);
    }
    try {
      writeFileSync(`${base}.html`, `<!-- ${page.url()} -->\n${await page.content()}`);
      saved.push(`${base}.html`);
    } catch (err) {
      t.comment(`no HTML: ${(err as Error).message}`);
    }
    for (const path of saved) t.comment(`failure evidence: ${path}`);
    console.error(saved.map((path) => `failure evidence: ${path}`).join('\n'));
  });
}

/** One response the browser received, as text to search. */
export interface SeenResponse {
  url: string;
  status: number;
  /** Every header line, Set-Cookie included. */
  headers: string;
  /** Empty for a redirect (browsers keep no body of one); undefined if it could not be read. */
  body: string | undefined;
}

/**
 * Records every response any page of the context receives, headers and body.
 * `settled()` waits until every body has been read.
 */
export function recordResponses(context: BrowserContext): { seen: SeenResponse[]; settled(): Promise<void> } {
  const seen: SeenResponse[] = [];
  const reading: Array<Promise<void>> = [];
  context.on('response', (response: Response) => {
    reading.push(
      (async () => {
        const status = response.status();
        const headers = (await response.headersArray()).map(({ name, value }) => `${name}: ${value}`).join('\n');
        let body: string | undefined = '';
        if (status < 300 || status >= 400) body = await response.text().catch(() => undefined);
        seen.push({ url: response.url(), status, headers, body });
      })(),
    );
  });
  return { seen, settled: async () => void (await Promise.all(reading)) };
}

/**
 * On the AS's login page (oidc-provider devInteractions): fills `login` and
 * `password` and submits. Any password is accepted; the login becomes `sub`.
 */
export async function submitLoginForm(page: Page, user: string): Promise<void> {
  await page.locator('input[name="login"]').fill(user);
  await page.locator('input[name="password"]').fill('any password');
  await page.locator('button[type="submit"]').click();
}

/**
 * The whole sign-in as a user does it: open `path` (the gateway sends the
 * browser on to the AS, README "What the browser sees"), sign in at the AS, land back on `path`.
 * Throws if any step does not happen (the tests that prove each step assert
 * them one by one).
 */
export async function signInThroughBrowser(page: Page, gatewayUrl: string, path: string, user: string): Promise<void> {
  const first = await page.goto(`${gatewayUrl}${path}`);
  const gatewayAnswer = await firstOfChain(first!).response();
  if (gatewayAnswer?.status() !== 302) throw new Error(`${path} answered ${gatewayAnswer?.status()} before sign-in, not 302`);
  await page.locator('input[name="login"]').waitFor();
  await submitLoginForm(page, user);
  await page.waitForURL(`${gatewayUrl}${path}`);
  await upstreamCall(page, 'me');
}

/** The request a navigation began with, before the redirects that led to `response`. */
export function firstOfChain(response: Response): Request {
  let request = response.request();
  for (let earlier = request.redirectedFrom(); earlier !== null; earlier = request.redirectedFrom()) request = earlier;
  return request;
}

/**
 * What one of the upstream page's `<pre>` panes shows once its fetch() has
 * answered: `#me` (GET /api/me, on load) or `#echoed` (POST /api/echo, on the button).
 */
export async function upstreamCall(page: Page, id: 'me' | 'echoed'): Promise<{ status: number; body: Record<string, unknown> }> {
  const pane = page.locator(`#${id}`);
  await pane.filter({ hasText: /^\d{3}\s/ }).waitFor();
  const [status, ...rest] = (await pane.textContent())!.split('\n');
  return { status: Number(status), body: JSON.parse(rest.join('\n')) as Record<string, unknown> };
}

/** Every bearer token the upstream was sent, in order. */
export function bearersSeenUpstream(received: Array<{ headers: { authorization?: string } }>): string[] {
  return received.flatMap(({ headers }) => /^Bearer (\S+)$/i.exec(headers.authorization ?? '')?.slice(1) ?? []);
}
