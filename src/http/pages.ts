/**
 * The few HTML pages the gateway itself renders. No scripts and no styles,
 * so PAGE_SECURITY_POLICY can forbid everything.
 */

/** CSP of every gateway page: nothing may load, frame it or be posted from it. */
export const PAGE_SECURITY_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ENTITIES[char]!);
}

function page(title: string, body: string, head = ''): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="referrer" content="no-referrer">${head}<title>${escapeHtml(title)}</title></head>
<body>
<main>
<h1>${escapeHtml(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

/** A page that states a problem and offers one link. */
export function messagePage(title: string, message: string, link?: { href: string; text: string }): string {
  const action = link ? `<p><a href="${escapeHtml(link.href)}">${escapeHtml(link.text)}</a></p>` : '';
  return page(title, `<p>${escapeHtml(message)}</p>\n${action}`);
}

/**
 * After sign-in with SameSite=Strict cookies: the browser arrived through a
 * redirect chain that began on the authorization server's site, so it would
 * not send the new Strict cookie on a redirect. A page on our own site that
 * navigates onward makes that next request same-site.
 */
export function continuePage(target: string): string {
  const href = escapeHtml(target);
  return page('Signed in', `<p><a href="${href}">Continue</a></p>`, `<meta http-equiv="refresh" content="0;url=${href}">`);
}
