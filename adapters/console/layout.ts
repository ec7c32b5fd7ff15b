import { toman } from './format';
import { html, type Html } from './html';
import { t, type Locale, type MessageKey } from './i18n';

/** The reader's language and where they are, for the language switch to come back to. */
export interface Lang {
  readonly locale: Locale;
  /** This page's address (`/console/...`), to return to after switching language. */
  readonly here: string;
}

/** Who is signed in, as the page frame shows it. */
export interface Viewer extends Lang {
  readonly accountName: string;
  readonly email: string;
  readonly operator: boolean;
  readonly csrfToken: string;
  /** Set while the available balance is below the threshold the user chose: every page warns. */
  readonly lowBalance?: { readonly available: bigint; readonly threshold: bigint };
}

export type Notice =
  | {
      readonly kind: 'error' | 'ok' | 'warn';
      readonly text: string;
      /** The core's own English words, shown after a translated refusal. */
      readonly detail?: string;
    }
  | undefined;

/** The core's English words after a translated refusal, marked as English for screen readers. */
export function detailOf(detail: string | undefined): Html {
  return detail === undefined ? html`` : html`<br /><span class="detail" lang="en" dir="ltr">${detail}</span>`;
}

const USER_NAV: readonly (readonly [string, MessageKey])[] = [
  ['/console/keys', 'nav.keys'],
  ['/console/usage', 'nav.usage'],
  ['/console/wallet', 'nav.wallet'],
  ['/console/prices', 'nav.prices'],
  ['/console/connect', 'nav.connect'],
  ['/console/account', 'nav.account'],
];

const OPERATOR_NAV: readonly (readonly [string, MessageKey])[] = [
  ['/console/accounts', 'nav.accounts'],
  ['/console/pricing', 'nav.pricing'],
  ['/console/prices', 'nav.prices'],
  ['/console/connect', 'nav.connect'],
];

/**
 * English / فارسی as two links to `/console/lang`, a GET that only sets the language cookie and
 * comes back here: a UI preference, so no form and no CSRF token are needed (and it works signed out).
 */
export function languageSwitch(lang: Lang): Html {
  const link = (to: Locale, label: string, htmlLang: string): Html =>
    lang.locale === to
      ? html`<a href="/console/lang?to=${to}&amp;back=${encodeURIComponent(lang.here)}" lang="${htmlLang}" aria-current="true">${label}</a>`
      : html`<a href="/console/lang?to=${to}&amp;back=${encodeURIComponent(lang.here)}" lang="${htmlLang}" hreflang="${htmlLang}">${label}</a>`;
  return html`<nav class="lang" aria-label="${t(lang.locale, 'lang.switch')} / Language">
    ${link('en', t(lang.locale, 'lang.en'), 'en')}<span aria-hidden="true"> · </span>${link('fa', t(lang.locale, 'lang.fa'), 'fa')}
  </nav>`;
}

function head(title: string, locale: Locale): Html {
  return html`<!doctype html>
    <html lang="${locale}" dir="${locale === 'fa' ? 'rtl' : 'ltr'}">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>${title} · ${t(locale, 'frame.brand')}</title>
        <link rel="stylesheet" href="/console/assets/console.css" />
        <script src="/console/assets/console.js" defer></script>
      </head>
    </html>`;
}

export function notice(n: Notice): Html {
  if (n === undefined) return html``;
  // Errors interrupt (role=alert); confirmations are announced politely.
  return n.kind === 'error'
    ? html`<div class="alert alert-error" role="alert">${n.text}${detailOf(n.detail)}</div>`
    : html`<div class="alert alert-${n.kind}" role="status">${n.text}${detailOf(n.detail)}</div>`;
}

function lowBalanceBanner(viewer: Viewer): Html {
  const low = viewer.lowBalance;
  if (low === undefined) return html``;
  const l = viewer.locale;
  return html`<div class="alert alert-warn" role="status" data-testid="low-balance">
    <strong>${t(l, 'low.title')}</strong>
    ${t(l, 'low.text', { available: toman(low.available, l), threshold: toman(low.threshold, l) })}
    <a href="/console/wallet#topup">${t(l, 'low.topUp')}</a>
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
  const l = viewer.locale;
  const nav = viewer.operator ? OPERATOR_NAV : USER_NAV;
  return html`${head(input.title, l)}
<body>
<a class="skip" href="#main">${t(l, 'frame.skip')}</a>
<div class="shell">
  <header class="side">
    <a class="brand" href="/console/"><span class="brand-mark" aria-hidden="true">s</span>${t(l, 'frame.brand')}</a>
    <nav class="nav" aria-label="${t(l, 'frame.nav')}">
      ${nav.map(([href, label]) => html`<a href="${href}" ${input.path === href ? html` aria-current="page"` : html``}>${t(l, label)}</a>`)}
    </nav>
    <div class="side-foot">
      <div class="who">${t(l, 'frame.signedInAs')}<br><strong dir="auto">${viewer.operator ? t(l, 'frame.operator') : viewer.accountName}</strong>${viewer.email === '' ? html`` : html`<br /><span dir="ltr">${viewer.email}</span>`}</div>
      <form method="post" action="/console/sign-out">
        <input type="hidden" name="csrf_token" value="${viewer.csrfToken}">
        <button class="link-button" type="submit">${t(l, 'frame.signOut')}</button>
      </form>
      ${languageSwitch(viewer)}
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
    <p class="fine">${t(l, 'frame.times')}</p>
  </main>
</div>
</body>
</html>`;
}

/** The frame of the sign-in page and of errors shown to someone not signed in. */
export function bare(lang: Lang, title: string, body: Html): Html {
  return html`${head(title, lang.locale)}
<body>
<main id="main" class="auth">
  <div class="auth-card">
    <div class="brand"><span class="brand-mark" aria-hidden="true">s</span>${t(lang.locale, 'frame.brand')}</div>
    ${languageSwitch(lang)}
    ${body}
  </div>
</main>
</body>
</html>`;
}
