import { groupDigits } from './format';
import { html, type Html } from './html';

/** Who is signed in, as the page frame shows it. */
export interface Viewer {
  readonly accountName: string;
  readonly email: string;
  readonly operator: boolean;
  readonly csrfToken: string;
  /** Set while the available balance is below the threshold the user chose: every page warns. */
  readonly lowBalance?: { readonly available: bigint; readonly threshold: bigint };
}

export type Notice = { readonly kind: 'error' | 'ok' | 'warn'; readonly text: string } | undefined;

const USER_NAV = [
  ['/console/keys', 'API keys'],
  ['/console/usage', 'Usage'],
  ['/console/wallet', 'Wallet'],
  ['/console/prices', 'Prices'],
  ['/console/connect', 'Connect'],
  ['/console/account', 'Account'],
] as const;

const OPERATOR_NAV = [
  ['/console/accounts', 'Accounts'],
  ['/console/prices', 'Prices'],
  ['/console/connect', 'Connect'],
] as const;

function head(title: string): Html {
  return html`<!doctype html>
    <html lang="en" dir="ltr">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>${title} · svc console</title>
        <link rel="stylesheet" href="/console/assets/console.css" />
        <script src="/console/assets/console.js" defer></script>
      </head>
    </html>`;
}

export function notice(n: Notice): Html {
  if (n === undefined) return html``;
  // Errors interrupt (role=alert); confirmations are announced politely.
  return n.kind === 'error'
    ? html`<div class="alert alert-error" role="alert">${n.text}</div>`
    : html`<div class="alert alert-${n.kind}" role="status">${n.text}</div>`;
}

function lowBalanceBanner(viewer: Viewer): Html {
  const low = viewer.lowBalance;
  if (low === undefined) return html``;
  return html`<div class="alert alert-warn" role="status" data-testid="low-balance">
    <strong>Your balance is low:</strong> ${groupDigits(low.available)} toman available, below the
    ${groupDigits(low.threshold)} toman you asked to be warned at. Requests are refused once it cannot cover them.
    <a href="/console/wallet">Wallet</a>
  </div>`;
}

/** The signed-in frame: navigation, who is signed in, sign-out, and the page. */
export function page(input: {
  title: string;
  path: string;
  viewer: Viewer;
  lede?: string;
  notice?: Notice;
  actions?: Html;
  body: Html;
}): Html {
  const { viewer } = input;
  const nav = viewer.operator ? OPERATOR_NAV : USER_NAV;
  return html`${head(input.title)}
<body>
<a class="skip" href="#main">Skip to content</a>
<div class="shell">
  <header class="side">
    <a class="brand" href="/console/"><span class="brand-mark" aria-hidden="true">s</span>svc console</a>
    <nav class="nav" aria-label="Console">
      ${nav.map(([href, label]) => html`<a href="${href}" ${input.path === href ? html` aria-current="page"` : html``}>${label}</a>`)}
    </nav>
    <div class="side-foot">
      <div class="who">Signed in as<br><strong dir="auto">${viewer.operator ? 'Operator' : viewer.accountName}</strong>${viewer.email === '' ? html`` : html`<br /><span dir="auto">${viewer.email}</span>`}</div>
      <form method="post" action="/console/sign-out">
        <input type="hidden" name="csrf_token" value="${viewer.csrfToken}">
        <button class="link-button" type="submit">Sign out</button>
      </form>
    </div>
  </header>
  <main id="main" tabindex="-1">
    <div class="page-head">
      <div><h1>${input.title}</h1>${input.lede === undefined ? html`` : html`<p class="lede">${input.lede}</p>`}</div>
      ${input.actions ?? html``}
    </div>
    ${lowBalanceBanner(viewer)}
    ${notice(input.notice)}
    ${input.body}
  </main>
</div>
</body>
</html>`;
}

/** The frame of the sign-in page and of errors shown to someone not signed in. */
export function bare(title: string, body: Html): Html {
  return html`${head(title)}
<body>
<main id="main" class="auth">
  <div class="auth-card">
    <div class="brand"><span class="brand-mark" aria-hidden="true">s</span>svc console</div>
    ${body}
  </div>
</main>
</body>
</html>`;
}
