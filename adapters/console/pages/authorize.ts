import type { Context } from 'koa';
import type { AuthorizationParams, OAuthClientView } from '../../../gen/svc/core/v1/oauth';
import { SvcError } from '../../../core/edge';
import { publicBaseUrl } from '../../http/public-url';
import {
  AUTHORIZE_FIELDS,
  SessionEnded,
  allowFormTargets,
  asSession,
  callCore,
  formOf,
  isFormRefusal,
  langOf,
  refusal,
  seeOther,
  send,
  setSigned,
  statusOf,
  type ConsoleDeps,
  type Signed,
} from '../context';
import { field } from '../forms';
import { clearSession, loadSession } from '../session';
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

// ---- the consent page and its answer (routed in ../app.ts; the core decides, see adapters/oauth) ----

type AuthorizeDeps = Pick<ConsoleDeps, 'core' | 'publicUrl'>;

/** The CSP source that lets a form's redirect reach `uri`: its origin, or its scheme for an app scheme. */
function formTarget(uri: string): string {
  const url = new URL(uri);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
}

function authorizeFields(source: (name: string) => string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of AUTHORIZE_FIELDS) {
    const value = source(name).slice(0, 2000);
    if (value !== '') out[name] = value;
  }
  return out;
}

function paramsOf(fields: Record<string, string>): AuthorizationParams {
  return {
    clientId: fields['client_id'] ?? '',
    redirectUri: fields['redirect_uri'] ?? '',
    responseType: fields['response_type'] ?? '',
    scope: fields['scope'] ?? '',
    codeChallenge: fields['code_challenge'] ?? '',
    codeChallengeMethod: fields['code_challenge_method'] ?? '',
    resource: fields['resource'] ?? '',
  };
}

/** The authorization response (RFC 6749 §4.1.2, with `iss` of RFC 9207) at the app's redirect URI. */
function backToApp(
  ctx: Context,
  deps: AuthorizeDeps, redirectUri: string,
  state: string | undefined,
  answer: Record<string, string>,
): void {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(answer)) url.searchParams.set(name, value);
  if (state !== undefined) url.searchParams.set('state', state);
  url.searchParams.set('iss', publicBaseUrl(ctx, deps.publicUrl));
  seeOther(ctx, url.href);
}

/** Checks the request with the core: the app and redirect URI it names, or a page saying why not. */
async function checkAuthorize(ctx: Context, deps: AuthorizeDeps, fields: Record<string, string>) {
  try {
    const check = await callCore(asSession(ctx), (o) =>
      deps.core.oauth.checkAuthorization({ params: paramsOf(fields) }, o),
    );
    if (check.client === undefined) throw new SvcError('internal', 'core returned no client');
    return {
      ...check,
      client: check.client,
      redirectUri: fields['redirect_uri'] ?? check.client.redirectUris[0] ?? '',
    };
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    send(ctx, statusOf(error), authorizeErrorPage(langOf(ctx), ...refusal(ctx, error)));
    return undefined;
  }
}

/**
 * RFC 8707: a token is only ever for this server's MCP endpoint. Another `resource` is a page
 * here (never a redirect to the app, RFC 9700 §4.11.2); true when it was refused.
 */
function refusedResource(ctx: Context, deps: AuthorizeDeps, fields: Record<string, string>): boolean {
  const resource = fields['resource'];
  if (resource === undefined || resource === `${publicBaseUrl(ctx, deps.publicUrl)}/v1/mcp`) return false;
  send(
    ctx,
    400,
    authorizeErrorPage(langOf(ctx), 'This server issues tokens only for its MCP endpoint (…/v1/mcp).', 'invalid_target'),
  );
  return true;
}

/** GET /console/authorize: an app asks for access; the consent page (or sign-in first). */
export async function showAuthorize(ctx: Context, deps: AuthorizeDeps): Promise<void> {
  const fields = authorizeFields((name) => String(ctx.query[name] ?? ''));
  let s: Signed;
  try {
    s = await loadSession(ctx, deps.core);
  } catch (error) {
    if (!(error instanceof SessionEnded)) throw error;
    if (error.hadSession) clearSession(ctx);
    seeOther(ctx, `/console/sign-in?next=${encodeURIComponent(`/console/authorize?${new URLSearchParams(fields).toString()}`)}`);
    return;
  }
  setSigned(ctx, s);
  const check = await checkAuthorize(ctx, deps, fields);
  if (check === undefined) return;
  // No automatic redirect to a URI the person never approved (RFC 9700 §4.11.2): anyone may
  // register a client with any https redirect URI, so a bad request is shown here, on svc, and
  // only the person's own answer on the consent page ever sends the browser to the app.
  if (!check.ok)
    return send(ctx, 400, authorizeErrorPage(langOf(ctx), check.errorDescription, check.oauthError));
  if (refusedResource(ctx, deps, fields)) return;
  // The consent form's answer is a redirect to the app: the page's form-action must allow it.
  allowFormTargets(ctx, [formTarget(check.redirectUri)]);
  send(
    ctx,
    200,
    consentPage({
      viewer: s.viewer,
      client: check.client,
      scope: check.scope,
      redirectUri: check.redirectUri,
      fields,
    }),
  );
}

/** POST /console/authorize: the person's answer, sent back to the app. */
export async function answerAuthorize(ctx: Context, deps: AuthorizeDeps): Promise<void> {
  const form = formOf(ctx);
  const fields = authorizeFields((name) => field(form, name));
  if (field(form, 'decision') !== 'allow') {
    const check = await checkAuthorize(ctx, deps, fields);
    if (check === undefined) return;
    return backToApp(ctx, deps, check.redirectUri, fields['state'], {
      error: 'access_denied',
      error_description: 'The account owner denied the request.',
    });
  }
  if (refusedResource(ctx, deps, fields)) return;
  try {
    const { code } = await callCore(asSession(ctx), (o) =>
      deps.core.oauth.approveAuthorization({ params: paramsOf(fields) }, o),
    );
    const check = await checkAuthorize(ctx, deps, fields);
    if (check === undefined) return;
    backToApp(ctx, deps, check.redirectUri, fields['state'], { code });
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    send(ctx, statusOf(error), authorizeErrorPage(langOf(ctx), ...refusal(ctx, error)));
  }
}
