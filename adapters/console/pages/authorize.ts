import type { OAuthClientView } from '../../../gen/svc/core/v1/oauth';
import { html, type Html } from '../html';
import { bare, type Viewer } from '../layout';

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
  const hidden = Object.entries(input.fields).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`,
  );
  return bare(
    'Connect an app',
    html`<div class="panel">
      <h1>Connect <bdi data-testid="client-name">${client.clientName}</bdi>?</h1>
      <p class="lede">
        This app asks to use the svc MCP tools as
        <strong dir="auto" data-testid="consent-account">${viewer.accountName}</strong
        >${viewer.email === '' ? html`` : html` (<span dir="auto">${viewer.email}</span>)`}.
      </p>
      <ul>
        <li>
          Scope <code data-testid="consent-scope">${input.scope}</code>: call the MCP tools (web search, maps,
          shopping). It cannot use the chat API, see your keys or change your account.
        </li>
        <li>Every tool call it makes is charged to this account's wallet, like a key limited to the MCP tools.</li>
        <li>You can disconnect it at any time on the API keys page.</li>
      </ul>
      <p class="hint">
        After you answer you go back to <span class="mono">${hostOf(input.redirectUri)}</span>. App id:
        <span class="mono">${client.clientId}</span>
      </p>
      <form method="post" action="/console/authorize">
        <input type="hidden" name="csrf_token" value="${viewer.csrfToken}" />
        ${hidden}
        <button class="btn" type="submit" name="decision" value="allow">Allow</button>
        <button class="btn btn-quiet" type="submit" name="decision" value="deny">Deny</button>
      </form>
    </div>`,
  );
}

/** A bad authorization request that cannot be sent back to the app (unknown app or address). */
export function authorizeErrorPage(text: string): Html {
  return bare(
    'Cannot connect this app',
    html`<div class="panel">
      <h1>Cannot connect this app</h1>
      <p role="alert">${text}</p>
      <p><a class="btn" href="/console/keys">Go to the console</a></p>
    </div>`,
  );
}
