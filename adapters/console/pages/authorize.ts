import type { OAuthClientView } from '../../../gen/svc/core/v1/oauth';
import { html, type Html } from '../html';
import { t } from '../i18n';
import { bare, detailOf, type Lang, type Viewer } from '../layout';

/** The authorization request's parameters, carried through the consent form unchanged. */
export type AuthorizeFields = Readonly<Record<string, string>>;

function hostOf(uri: string): string {
  try {
    const url = new URL(uri);
    return url.host === '' ? url.protocol : url.host;
  } catch {
    return uri;
  }
}

/**
 * The consent page: which app, which account and wallet, which scope. Allow and Deny post the
 * request back with the session's CSRF token; nothing is granted by merely opening the page.
 */
export function consentPage(input: {
  viewer: Viewer;
  client: OAuthClientView;
  scope: string;
  redirectUri: string;
  fields: AuthorizeFields;
}): Html {
  const { viewer, client } = input;
  const l = viewer.locale;
  const hidden = Object.entries(input.fields).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`,
  );
  const [before, after] = t(l, 'authorize.heading').split('{app}');
  return bare(
    viewer,
    t(l, 'authorize.title'),
    html`<div class="panel">
      <h1>${before}<bdi data-testid="client-name">${client.clientName}</bdi>${after}</h1>
      <p class="lede">
        ${t(l, 'authorize.asks')}
        <strong dir="auto" data-testid="consent-account">${viewer.accountName}</strong
        >${viewer.email === '' ? html`` : html` (<span dir="ltr">${viewer.email}</span>)`}.
      </p>
      <ul>
        <li>
          ${t(l, 'authorize.scope')} <code dir="ltr" data-testid="consent-scope">${input.scope}</code>${t(l, 'authorize.scopeText')}
        </li>
        <li>${t(l, 'authorize.charged')}</li>
        <li>${t(l, 'authorize.disconnect')}</li>
      </ul>
      <p class="hint">
        ${t(l, 'authorize.back')} <span class="mono">${hostOf(input.redirectUri)}</span>. ${t(l, 'authorize.appId')}
        <span class="mono">${client.clientId}</span>
      </p>
      <form method="post" action="/console/authorize">
        <input type="hidden" name="csrf_token" value="${viewer.csrfToken}" />
        ${hidden}
        <button class="btn" type="submit" name="decision" value="allow">${t(l, 'authorize.allow')}</button>
        <button class="btn btn-quiet" type="submit" name="decision" value="deny">${t(l, 'authorize.deny')}</button>
      </form>
    </div>`,
  );
}

/** A bad authorization request that cannot be sent back to the app (unknown app or address). */
export function authorizeErrorPage(lang: Lang, text: string, detail?: string): Html {
  const l = lang.locale;
  return bare(
    lang,
    t(l, 'authorize.cannot'),
    html`<div class="panel">
      <h1>${t(l, 'authorize.cannot')}</h1>
      <p role="alert">${text}${detailOf(detail)}</p>
      <p><a class="btn" href="/console/keys">${t(l, 'authorize.toConsole')}</a></p>
    </div>`,
  );
}
