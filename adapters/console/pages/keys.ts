import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import type { ApiKey, KeyEvent } from '../../../gen/svc/core/v1/keys';
import { SvcError, isSvcError } from '../../../core/edge';
import {
  asSession,
  callCore,
  done,
  formOf,
  isFormRefusal,
  langOf,
  noticeOf,
  seeOther,
  send,
  signedOf,
  statusOf,
  tr,
  type Core,
} from '../context';
import { field, type Form } from '../forms';
import { asciiDigits, parseAmount } from '../numbers';
import type { ConnectedApp } from '../../../gen/svc/core/v1/oauth';
import { ago, day, groupDigits, num, when } from '../format';
import { html, type Html } from '../html';
import { errorText, isMessageKey, t, type Locale, type MessageKey } from '../i18n';
import { page, type Notice, type Viewer } from '../layout';

function scopeLabel(l: Locale, scope: string): string {
  const key = `scope.${scope}`;
  return isMessageKey(key) ? t(l, key) : scope;
}

/** A key's own limit of calls in flight: the service's (unset), none (0) or its number. */
function concurrentText(l: Locale, limit: number | undefined): string {
  if (limit === undefined) return t(l, 'key.concurrentDefault');
  return limit === 0 ? t(l, 'key.concurrentNone') : String(limit);
}

function status(l: Locale, key: ApiKey, now: number): Html {
  if (key.revokedAt !== undefined) {
    return html`<span class="badge badge-off"
      >${t(l, 'keys.revokedOn')} <time datetime="${key.revokedAt.toISOString()}">${day(l, key.revokedAt)}</time></span
    >`;
  }
  if (key.expiresAt !== undefined) {
    const at = html`<time datetime="${key.expiresAt.toISOString()}">${when(l, key.expiresAt)}</time>`;
    if (key.expiresAt.getTime() <= now) return html`<span class="badge badge-off">${t(l, 'keys.expired')} ${at}</span>`;
    return html`<span class="badge badge-ok">${t(l, 'keys.active')}</span> <span class="hint">${t(l, 'keys.until')} ${at}</span>`;
  }
  return html`<span class="badge badge-ok">${t(l, 'keys.active')}</span>`;
}

/** What the key's lineage spent in a period, against its cap if it has one. */
function spend(l: Locale, spent: bigint, cap: bigint | undefined): Html {
  return cap === undefined
    ? html`${num(l, spent)} <span class="hint">${t(l, 'keys.noCap')}</span>`
    : html`${num(l, spent)} <span class="hint">${t(l, 'keys.of', { cap })}</span>`;
}

/** What the user typed into the create form, kept when the form is refused. */
export interface KeyFormValues {
  readonly name: string;
  readonly scope: string;
  readonly capDaily: string;
  readonly capMonthly: string;
  readonly capTotal: string;
  /** Allowed models, comma-separated; empty: every model. */
  readonly models: string;
  /** Allowed tools, comma-separated; empty: every tool. */
  readonly tools: string;
  readonly expiresOn: string;
}

export const EMPTY_KEY_FORM: KeyFormValues = {
  name: '',
  scope: 'all',
  capDaily: '',
  capMonthly: '',
  capTotal: '',
  models: '',
  tools: '',
  expiresOn: '',
};

/** An allowed list as its form field shows it: comma-separated, empty for every one. */
export function namesText(names: readonly string[]): string {
  return names.join(', ');
}

/** The roll form's choices of how long the old secret keeps working. */
export const GRACE_CHOICES: readonly (readonly [string, number, MessageKey])[] = [
  ['0', 0, 'grace.0'],
  ['1h', 3_600_000, 'grace.1h'],
  ['24h', 86_400_000, 'grace.24h'],
  ['7d', 7 * 86_400_000, 'grace.7d'],
];

function selected(on: boolean): Html {
  return on ? html` selected` : html``;
}

function active(key: ApiKey, now: number): boolean {
  return key.revokedAt === undefined && (key.expiresAt === undefined || key.expiresAt.getTime() > now);
}

function createForm(l: Locale, csrf: string, formId: string, v: KeyFormValues): Html {
  return html`<section class="panel" aria-labelledby="create-heading">
    <h2 id="create-heading">${t(l, 'keys.create')}</h2>
    <form class="inline" method="post" action="/console/keys">
      <input type="hidden" name="csrf_token" value="${csrf}" />
      <input type="hidden" name="form_id" value="${formId}" />
      <div class="field">
        <label for="name">${t(l, 'keys.label')} <span class="hint">${t(l, 'keys.labelHint')}</span></label>
        <input id="name" name="name" required maxlength="100" size="32" value="${v.name}" dir="auto" />
      </div>
      <div class="field">
        <label for="scope">${t(l, 'keys.access')}</label>
        <select id="scope" name="scope">
          ${(['all', 'chat', 'tools'] as const).map(
            (s) => html`<option value="${s}"${selected(v.scope === s)}>${scopeLabel(l, s)}</option>`,
          )}
        </select>
      </div>
      <div class="field">
        <label for="cap_daily">${t(l, 'keys.dailyCap')} <span class="hint">${t(l, 'keys.dailyHint')}</span></label>
        <input id="cap_daily" name="cap_daily" inputmode="numeric" size="10" value="${v.capDaily}" />
      </div>
      <div class="field">
        <label for="cap_monthly">${t(l, 'keys.monthlyCap')} <span class="hint">${t(l, 'keys.monthlyHint')}</span></label>
        <input id="cap_monthly" name="cap_monthly" inputmode="numeric" size="10" value="${v.capMonthly}" />
      </div>
      <div class="field">
        <label for="cap_total">${t(l, 'key.capTotal')} <span class="hint">${t(l, 'key.capTotalHint')}</span></label>
        <input id="cap_total" name="cap_total" inputmode="numeric" size="10" value="${v.capTotal}" />
      </div>
      <div class="field">
        <label for="models">${t(l, 'key.models')} <span class="hint">${t(l, 'key.namesHint')}</span></label>
        <input id="models" name="models" maxlength="2000" size="24" value="${v.models}" dir="ltr" />
      </div>
      <div class="field">
        <label for="tools">${t(l, 'key.tools')} <span class="hint">${t(l, 'key.namesHint')}</span></label>
        <input id="tools" name="tools" maxlength="2000" size="24" value="${v.tools}" dir="ltr" />
      </div>
      <div class="field">
        <label for="expires_on">${t(l, 'keys.expires')} <span class="hint">${t(l, 'keys.expiresHint')}</span></label>
        <input id="expires_on" name="expires_on" type="date" value="${v.expiresOn}" />
      </div>
      <button class="btn" type="submit">${t(l, 'keys.createSubmit')}</button>
    </form>
  </section>`;
}

/** The new secret, on the page a create or roll form redirected to; this page is its only showing. */
export function newKeyPanel(l: Locale, created: { key: ApiKey; secret: string }): Html {
  const [before, after] = t(l, 'keys.newKey').split('{name}');
  return html`<section class="panel" aria-labelledby="new-key-heading">
    <h2 id="new-key-heading">${before}<bdi>${created.key.name}</bdi>${after}</h2>
    <div class="alert alert-warn" role="status">
      <strong>${t(l, 'keys.copyNow')}</strong> ${t(l, 'keys.copyWhy')}
    </div>
    <div class="secret" dir="ltr">
      <code id="new-key" dir="ltr" data-testid="new-key">${created.secret}</code>
      <button class="btn" type="button" data-copy="new-key" data-copied="${l === 'fa' ? 'کپی شد' : 'Copied'}" hidden>${t(l, 'keys.copyKey')}</button>
    </div>
    <p class="hint">
      ${t(l, 'keys.useAs')} <code dir="ltr">Authorization: Bearer …</code> ${t(l, 'keys.useAsRest')}
      <a href="/console/connect">${t(l, 'nav.connect')}</a>.
    </p>
  </section>`;
}

/** Apps connected through OAuth (SPEC §8): each acts like a tools-only key until disconnected. */
function appsPanel(l: Locale, apps: readonly ConnectedApp[], csrf: string, now: number): Html {
  if (apps.length === 0) return html``;
  const rows = apps.map(
    (a) =>
      html`<tr>
        <td dir="auto">${a.clientName}</td>
        <td>${scopeLabel(l, a.scope)}</td>
        <td class="hide-narrow"><time datetime="${a.createdAt?.toISOString() ?? ''}">${when(l, a.createdAt)}</time></td>
        <td>${ago(a.lastUsedAt, now, l)}</td>
        <td class="num">
          <form class="inline" method="post" action="/console/apps/revoke">
            <input type="hidden" name="csrf_token" value="${csrf}" />
            <input type="hidden" name="grant_id" value="${a.grantId}" />
            <button class="btn btn-quiet btn-small" type="submit">
              ${t(l, 'keys.disconnect')}<span class="visually-hidden"> ${a.clientName}</span>
            </button>
          </form>
        </td>
      </tr>`,
  );
  return html`<section class="panel" aria-labelledby="apps-heading">
    <h2 id="apps-heading">${t(l, 'keys.apps')}</h2>
    <p class="hint">${t(l, 'keys.appsHint')}</p>
    <div class="table-wrap">
      <table data-testid="connected-apps">
        <thead>
          <tr>
            <th scope="col">${t(l, 'keys.app')}</th>
            <th scope="col">${t(l, 'keys.access')}</th>
            <th scope="col" class="hide-narrow">${t(l, 'keys.connected')}</th>
            <th scope="col">${t(l, 'keys.lastUsed')}</th>
            <th scope="col"><span class="visually-hidden">${t(l, 'keys.actions')}</span></th>
          </tr>
        </thead>
        <tbody>
          ${rows}
        </tbody>
      </table>
    </div>
  </section>`;
}

/** The API keys page: create, list, and the link to revoke each active key; the connected apps. */
export function keysPage(input: {
  viewer: Viewer;
  keys: readonly ApiKey[];
  apps?: readonly ConnectedApp[];
  now: number;
  notice?: Notice;
  created?: { key: ApiKey; secret: string };
  formId: string;
  form?: KeyFormValues;
}): Html {
  const l = input.viewer.locale;
  const rows = input.keys.map(
    (k) =>
      html`<tr>
        <td dir="auto">
          <a href="/console/keys/view?id=${encodeURIComponent(k.id)}"
            >${k.name === '' ? html`<span class="hint">${t(l, 'keys.noLabel')}</span>` : k.name}</a
          >
        </td>
        <td data-label="${t(l, 'keys.key')}" class="mono">${k.prefix}…${k.lastFour}</td>
        <td data-label="${t(l, 'keys.access')}">${scopeLabel(l, k.scope)}</td>
        <td data-label="${t(l, 'keys.spentToday')}" class="num">${spend(l, k.spentToday, k.capDaily)}</td>
        <td data-label="${t(l, 'keys.thisMonth')}" class="num">${spend(l, k.spentThisMonth, k.capMonthly)}</td>
        <td data-label="${t(l, 'keys.created')}" class="hide-narrow"><time datetime="${k.createdAt?.toISOString() ?? ''}">${when(l, k.createdAt)}</time></td>
        <td data-label="${t(l, 'keys.lastUsed')}">${ago(k.lastUsedAt, input.now, l)}</td>
        <td data-label="${t(l, 'keys.status')}">${status(l, k, input.now)}</td>
        <td class="num">
          ${
            active(k, input.now)
              ? html`<a class="btn btn-quiet btn-small" href="/console/keys/revoke?id=${encodeURIComponent(k.id)}"
                  >${t(l, 'keys.revoke')}<span class="visually-hidden"> ${k.name}</span></a
                >`
              : html``
          }
        </td>
      </tr>`,
  );
  return page({
    title: t(l, 'keys.title'),
    path: '/console/keys',
    viewer: input.viewer,
    lede: t(l, 'keys.lede'),
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`${input.created === undefined ? html`` : newKeyPanel(l, input.created)}
      ${createForm(l, input.viewer.csrfToken, input.formId, input.form ?? EMPTY_KEY_FORM)}
      <section class="panel" aria-labelledby="keys-heading">
        <h2 id="keys-heading">${t(l, 'keys.yours')}</h2>
        <div class="table-wrap">
          <table class="cards">
            <thead>
              <tr>
                <th scope="col">${t(l, 'keys.label')}</th>
                <th scope="col">${t(l, 'keys.key')}</th>
                <th scope="col">${t(l, 'keys.access')}</th>
                <th scope="col" class="num">${t(l, 'keys.spentToday')}</th>
                <th scope="col" class="num">${t(l, 'keys.thisMonth')}</th>
                <th scope="col" class="hide-narrow">${t(l, 'keys.created')}</th>
                <th scope="col">${t(l, 'keys.lastUsed')}</th>
                <th scope="col">${t(l, 'keys.status')}</th>
                <th scope="col"><span class="visually-hidden">${t(l, 'keys.actions')}</span></th>
              </tr>
            </thead>
            <tbody>
              ${
                rows.length === 0
                  ? html`<tr>
                      <td colspan="9" class="empty">${t(l, 'keys.none')}</td>
                    </tr>`
                  : rows
              }
            </tbody>
          </table>
        </div>
      </section>
      ${appsPanel(l, input.apps ?? [], input.viewer.csrfToken, input.now)}`,
  });
}

/** Asks before revoking: a plain page and form, so it works with a keyboard and without script. */
export function revokePage(input: { viewer: Viewer; key: ApiKey; notice?: Notice }): Html {
  const k = input.key;
  const l = input.viewer.locale;
  const [before, middle = '', after = ''] = t(l, 'revoke.ask').split(/\{name\}|\{key\}/);
  return page({
    title: t(l, 'revoke.title'),
    path: '/console/keys',
    viewer: input.viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel">
      <h2>${before}<bdi>${k.name}</bdi>${middle}<span class="mono">${k.prefix}…${k.lastFour}</span>${after}</h2>
      <p>${t(l, 'revoke.text')}</p>
      <form class="inline" method="post" action="/console/keys/revoke">
        <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
        <input type="hidden" name="key_id" value="${k.id}" />
        <button class="btn btn-danger" type="submit">${t(l, 'revoke.submit')}</button>
        <a class="btn btn-quiet" href="/console/keys">${t(l, 'revoke.cancel')}</a>
      </form>
    </section>`,
  });
}

function eventLabel(l: Locale, kind: string): string {
  const key = `event.${kind}`;
  return isMessageKey(key) ? t(l, key) : kind;
}

/** What the user typed into the caps form, kept when it is refused. */
export interface CapsFormValues {
  readonly capDaily: string;
  readonly capMonthly: string;
  readonly capTotal: string;
}

/** What the user typed into the label, expiry and allowed-lists form, kept when it is refused. */
export interface EditFormValues {
  readonly name: string;
  readonly expiresOn: string;
  readonly models: string;
  readonly tools: string;
}

/** One key: its caps (editable), roll and revoke, the keys rolled from or to it, and its activity. */
/** A live key's two forms: its label, expiry, models and tools; and its caps. */
function editForms(l: Locale, k: ApiKey, csrf: string, edit: EditFormValues, caps: CapsFormValues): Html {
  return html`<section class="panel" aria-labelledby="edit-heading">
              <h2 id="edit-heading">${t(l, 'key.editLimits')}</h2>
              <form class="inline" method="post" action="/console/keys/edit">
                <input type="hidden" name="csrf_token" value="${csrf}" />
                <input type="hidden" name="key_id" value="${k.id}" />
                <div class="field">
                  <label for="edit_name">${t(l, 'keys.label')}</label>
                  <input id="edit_name" name="name" required maxlength="100" size="28" value="${edit.name}" dir="auto" />
                </div>
                <div class="field">
                  <label for="edit_expires_on">${t(l, 'keys.expires')} <span class="hint">${t(l, 'keys.expiresHint')}</span></label>
                  <input id="edit_expires_on" name="expires_on" type="date" value="${edit.expiresOn}" />
                </div>
                <div class="field">
                  <label for="edit_models">${t(l, 'key.models')} <span class="hint">${t(l, 'key.namesHint')}</span></label>
                  <input id="edit_models" name="models" maxlength="2000" size="24" value="${edit.models}" dir="ltr" />
                </div>
                <div class="field">
                  <label for="edit_tools">${t(l, 'key.tools')} <span class="hint">${t(l, 'key.namesHint')}</span></label>
                  <input id="edit_tools" name="tools" maxlength="2000" size="24" value="${edit.tools}" dir="ltr" />
                </div>
                <button class="btn" type="submit">${t(l, 'key.save')}</button>
              </form>
            </section>
            <section class="panel" aria-labelledby="caps-heading">
              <h2 id="caps-heading">${t(l, 'key.caps')}</h2>
              <p class="hint">${t(l, 'key.capsHint')}</p>
              <form class="inline" method="post" action="/console/keys/caps">
                <input type="hidden" name="csrf_token" value="${csrf}" />
                <input type="hidden" name="key_id" value="${k.id}" />
                <div class="field">
                  <label for="edit_cap_daily">${t(l, 'keys.dailyCap')} <span class="hint">${t(l, 'key.capHint')}</span></label>
                  <input id="edit_cap_daily" name="cap_daily" inputmode="numeric" size="12" value="${caps.capDaily}" />
                </div>
                <div class="field">
                  <label for="edit_cap_monthly">${t(l, 'keys.monthlyCap')} <span class="hint">${t(l, 'key.capHint')}</span></label>
                  <input
                    id="edit_cap_monthly"
                    name="cap_monthly"
                    inputmode="numeric"
                    size="12"
                    value="${caps.capMonthly}"
                  />
                </div>
                <div class="field">
                  <label for="edit_cap_total">${t(l, 'key.capTotal')} <span class="hint">${t(l, 'key.capTotalHint')}</span></label>
                  <input id="edit_cap_total" name="cap_total" inputmode="numeric" size="12" value="${caps.capTotal}" />
                </div>
                <button class="btn" type="submit">${t(l, 'key.saveCaps')}</button>
              </form>
            </section>`;
}

export function keyPage(input: {
  viewer: Viewer;
  key: ApiKey;
  lineage: readonly ApiKey[];
  events: readonly KeyEvent[];
  now: number;
  formId: string;
  notice?: Notice;
  created?: { key: ApiKey; secret: string };
  caps?: CapsFormValues;
  edit?: EditFormValues;
}): Html {
  const k = input.key;
  const l = input.viewer.locale;
  // The expiry as the date field shows it: the UTC day the key stops at the end of.
  const edit = input.edit ?? {
    name: k.name,
    expiresOn: k.expiresAt === undefined ? '' : new Date(k.expiresAt.getTime() - 1).toISOString().slice(0, 10),
    models: namesText(k.allowedModels),
    tools: namesText(k.allowedTools),
  };
  const csrf = input.viewer.csrfToken;
  const live = active(k, input.now) && k.replacedBy === '';
  const caps = input.caps ?? {
    capDaily: k.capDaily === undefined ? '' : groupDigits(k.capDaily),
    capMonthly: k.capMonthly === undefined ? '' : groupDigits(k.capMonthly),
    capTotal: k.capTotal === undefined ? '' : groupDigits(k.capTotal),
  };
  const lineageRows = input.lineage.map(
    (s) => html`<tr>
      <td class="mono">${s.prefix}…${s.lastFour}</td>
      <td><time datetime="${s.createdAt?.toISOString() ?? ''}">${when(l, s.createdAt)}</time></td>
      <td>${ago(s.lastUsedAt, input.now, l)}</td>
      <td>${status(l, s, input.now)}</td>
    </tr>`,
  );
  const eventRows = input.events.map(
    (e) => html`<li>
      <time datetime="${e.createdAt?.toISOString() ?? ''}">${when(l, e.createdAt)}</time>
      <strong>${eventLabel(l, e.kind)}</strong>
      <span>${e.detail}</span>
    </li>`,
  );
  return page({
    title: k.name === '' ? t(l, 'key.untitled') : t(l, 'key.title', { name: k.name }),
    path: '/console/keys',
    viewer: input.viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`${input.created === undefined ? html`` : newKeyPanel(l, input.created)}
      <section class="panel" aria-labelledby="key-heading">
        <h2 id="key-heading"><bdi>${k.name}</bdi> <span class="mono">${k.prefix}…${k.lastFour}</span></h2>
        <dl class="facts">
          <dt>${t(l, 'keys.access')}</dt>
          <dd>${scopeLabel(l, k.scope)}</dd>
          <dt>${t(l, 'keys.status')}</dt>
          <dd data-testid="key-status">${status(l, k, input.now)}</dd>
          <dt>${t(l, 'keys.spentToday')}</dt>
          <dd>${spend(l, k.spentToday, k.capDaily)}</dd>
          <dt>${t(l, 'key.spentMonth')}</dt>
          <dd>${spend(l, k.spentThisMonth, k.capMonthly)}</dd>
          <dt>${t(l, 'key.spentTotal')}</dt>
          <dd>${spend(l, k.spentTotal, k.capTotal)}</dd>
          <dt>${t(l, 'key.models')}</dt>
          <dd data-testid="key-models">${k.allowedModels.length === 0 ? t(l, 'key.all') : namesText(k.allowedModels)}</dd>
          <dt>${t(l, 'key.tools')}</dt>
          <dd data-testid="key-tools">${k.allowedTools.length === 0 ? t(l, 'key.all') : namesText(k.allowedTools)}</dd>
          <dt>${t(l, 'key.concurrent')}</dt>
          <dd data-testid="key-concurrent">${concurrentText(l, k.concurrentLimit)}</dd>
          <dt>${t(l, 'keys.created')}</dt>
          <dd><time datetime="${k.createdAt?.toISOString() ?? ''}">${when(l, k.createdAt)}</time></dd>
          <dt>${t(l, 'keys.lastUsed')}</dt>
          <dd>${ago(k.lastUsedAt, input.now, l)}</dd>
        </dl>
      </section>
      ${
        k.revokedAt !== undefined
          ? html``
          : editForms(l, k, csrf, edit, caps)
      }
      ${
        live
          ? html`<section class="panel" aria-labelledby="roll-heading">
              <h2 id="roll-heading">${t(l, 'key.roll')}</h2>
              <p class="hint">${t(l, 'key.rollHint')}</p>
              <form class="inline" method="post" action="/console/keys/roll">
                <input type="hidden" name="csrf_token" value="${csrf}" />
                <input type="hidden" name="key_id" value="${k.id}" />
                <input type="hidden" name="form_id" value="${input.formId}" />
                <div class="field">
                  <label for="grace">${t(l, 'key.grace')}</label>
                  <select id="grace" name="grace">
                    ${GRACE_CHOICES.map(
                      ([value, , label]) => html`<option value="${value}"${selected(value === '24h')}>${t(l, label)}</option>`,
                    )}
                  </select>
                </div>
                <button class="btn" type="submit">${t(l, 'key.rollSubmit')}</button>
                <a class="btn btn-quiet" href="/console/keys/revoke?id=${encodeURIComponent(k.id)}">${t(l, 'key.revokeLink')}</a>
              </form>
            </section>`
          : html``
      }
      <section class="panel" aria-labelledby="lineage-heading">
        <h2 id="lineage-heading">${t(l, 'key.secrets')}</h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'key.secretsRegion')}">
          <table>
            <thead>
              <tr>
                <th scope="col">${t(l, 'keys.key')}</th>
                <th scope="col">${t(l, 'keys.created')}</th>
                <th scope="col">${t(l, 'keys.lastUsed')}</th>
                <th scope="col">${t(l, 'keys.status')}</th>
              </tr>
            </thead>
            <tbody>
              ${lineageRows}
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="activity-heading">
        <h2 id="activity-heading">${t(l, 'key.activity')}</h2>
        ${
          eventRows.length === 0
            ? html`<p class="hint">${t(l, 'key.noActivity')}</p>`
            : html`<ol class="activity" data-testid="key-activity">
                ${eventRows}
              </ol>`
        }
      </section>`,
  });
}

// ---- the pages and their forms (routed in ../app.ts) ----

type KeysCore = Pick<Core, 'keys' | 'console' | 'oauth'>;

/** A fresh id for a create or roll form: the core makes one key per id, however often it is posted. */
function newFormId(): string {
  return randomBytes(18).toString('base64url');
}

/**
 * The new secret a create or roll form made, if the page was reached by that form's redirect
 * (`?reveal=FORM_ID`) and it was not shown yet; otherwise a notice saying it will not be shown.
 */
async function revealed(
  ctx: Context,
  core: KeysCore,
): Promise<{ created?: { key: ApiKey; secret: string }; notice?: Notice }> {
  const formId = String(ctx.query['reveal'] ?? '');
  if (formId === '') return {};
  try {
    const { key, secret } = await callCore(asSession(ctx), (o) =>
      core.console.revealConsoleKey({ formId: formId.slice(0, 100) }, o),
    );
    if (key === undefined) throw new SvcError('internal', 'core returned no key');
    const again = ctx.query['again'] === '1';
    return {
      created: { key, secret },
      ...(again
        ? { notice: { kind: 'warn', text: tr(ctx, 'reveal.twice') } }
        : {}),
    };
  } catch (error) {
    if (!isSvcError(error) || error.code !== 'not_found') throw error;
    const again = ctx.query['again'] === '1';
    return {
      notice: again
        ? { kind: 'warn', text: tr(ctx, 'reveal.already') }
        : { kind: 'warn', ...errorText(langOf(ctx).locale, error) },
    };
  }
}

/** GET /console/keys: the create form, the keys, the connected apps (and a new secret, once). */
export async function showKeys(
  ctx: Context,
  core: KeysCore,
  extra: { notice?: Notice; form?: KeyFormValues; formId?: string; status?: number } = {},
): Promise<void> {
  const s = signedOf(ctx);
  const shown = extra.status === undefined ? await revealed(ctx, core) : {};
  const [{ keys: list }, { apps }] = await Promise.all([
    callCore(asSession(ctx), (o) => core.keys.listKeys({ accountId: '' }, o)),
    callCore(asSession(ctx), (o) => core.oauth.listConnectedApps({}, o)),
  ]);
  const n = extra.notice ?? shown.notice ?? done(ctx);
  send(
    ctx,
    extra.status ?? 200,
    keysPage({
      viewer: s.viewer,
      keys: list,
      apps,
      now: Date.now(),
      formId: extra.formId ?? newFormId(),
      ...(n === undefined ? {} : { notice: n }),
      ...(shown.created === undefined ? {} : { created: shown.created }),
      ...(extra.form === undefined ? {} : { form: extra.form }),
    }),
  );
}

/** An optional amount field: empty is undefined (no cap, or unchanged, as the form says). */
function amountField(form: Form, name: string, what: string): bigint | undefined {
  return parseAmount(field(form, name), name, what);
}

/** A comma-separated list of names (ASCII or Arabic commas); the core checks each one. */
function namesField(form: Form, name: string): string[] {
  return field(form, name)
    .split(/[,،]/)
    .map((n) => n.trim())
    .filter((n) => n !== '');
}

/** `YYYY-MM-DD` → the end of that UTC day; empty → no expiry. */
function expiryField(form: Form): Date | undefined {
  const text = asciiDigits(field(form, 'expires_on')).trim();
  if (text === '') return undefined;
  const day = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  const at = day === null ? NaN : Date.UTC(Number(day[1]), Number(day[2]) - 1, Number(day[3]) + 1);
  if (!Number.isFinite(at) || new Date(at - 1).toISOString().slice(0, 10) !== text)
    throw new SvcError('invalid_argument', 'The expiry must be a date, e.g. 2027-01-31, or empty.', {
      param: 'expires_on',
    });
  return new Date(at);
}

/** POST /console/keys: a new key, one per form id. */
export async function createKey(ctx: Context, core: KeysCore): Promise<void> {
  const form = formOf(ctx);
  const typed: KeyFormValues = {
    name: field(form, 'name').slice(0, 100),
    scope: field(form, 'scope'),
    capDaily: field(form, 'cap_daily').slice(0, 40),
    capMonthly: field(form, 'cap_monthly').slice(0, 40),
    capTotal: field(form, 'cap_total').slice(0, 40),
    models: field(form, 'models').slice(0, 2000),
    tools: field(form, 'tools').slice(0, 2000),
    expiresOn: field(form, 'expires_on').slice(0, 10),
  };
  const formId = field(form, 'form_id');
  try {
    const daily = amountField(form, 'cap_daily', 'The daily cap');
    const monthly = amountField(form, 'cap_monthly', 'The monthly cap');
    const total = amountField(form, 'cap_total', 'The total cap');
    const expiresAt = expiryField(form);
    const { replayed } = await callCore(asSession(ctx), (o) =>
      core.console.createConsoleKey(
        {
          formId,
          name: field(form, 'name'),
          scope: field(form, 'scope'),
          ...(daily === undefined ? {} : { capDaily: daily }),
          ...(monthly === undefined ? {} : { capMonthly: monthly }),
          ...(total === undefined ? {} : { capTotal: total }),
          allowedModels: namesField(form, 'models'),
          allowedTools: namesField(form, 'tools'),
          ...(expiresAt === undefined ? {} : { expiresAt }),
        },
        o,
      ),
    );
    // POST → redirect → GET: reloading the page the browser lands on posts nothing again.
    seeOther(ctx, `/console/keys?reveal=${encodeURIComponent(formId)}${replayed ? '&again=1' : ''}`);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    // The form comes back as it was typed (escaped), with its id, so the corrected form is still one key.
    const keepId = /^[A-Za-z0-9_-]{16,64}$/.test(formId) ? formId : newFormId();
    await showKeys(ctx, core, { notice: noticeOf(ctx, error), status: statusOf(error), form: typed, formId: keepId });
  }
}

/** GET /console/keys/view?id=: one key, its forms, its lineage and activity. */
export async function showKey(
  ctx: Context,
  core: KeysCore,
  extra: { keyId?: string; notice?: Notice; status?: number; caps?: CapsFormValues; edit?: EditFormValues } = {},
): Promise<void> {
  const s = signedOf(ctx);
  const shown = extra.status === undefined ? await revealed(ctx, core) : {};
  const keyId = extra.keyId ?? String(ctx.query['id'] ?? '').slice(0, 100);
  let detail;
  try {
    detail = await callCore(asSession(ctx), (o) => core.keys.getKey({ keyId }, o));
  } catch (error) {
    if (!isSvcError(error) || error.code !== 'not_found') throw error;
    return showKeys(ctx, core, { notice: noticeOf(ctx, error), status: 404 });
  }
  if (detail.key === undefined) throw new SvcError('internal', 'core returned no key');
  const n = extra.notice ?? shown.notice ?? done(ctx);
  send(
    ctx,
    extra.status ?? 200,
    keyPage({
      viewer: s.viewer,
      key: detail.key,
      lineage: detail.lineage,
      events: detail.events,
      now: Date.now(),
      formId: newFormId(),
      ...(n === undefined ? {} : { notice: n }),
      ...(shown.created === undefined ? {} : { created: shown.created }),
      ...(extra.caps === undefined ? {} : { caps: extra.caps }),
      ...(extra.edit === undefined ? {} : { edit: extra.edit }),
    }),
  );
}

/** POST /console/keys/caps. */
export async function updateCaps(ctx: Context, core: KeysCore): Promise<void> {
  const form = formOf(ctx);
  const keyId = field(form, 'key_id');
  const typed: CapsFormValues = {
    capDaily: field(form, 'cap_daily').slice(0, 40),
    capMonthly: field(form, 'cap_monthly').slice(0, 40),
    capTotal: field(form, 'cap_total').slice(0, 40),
  };
  try {
    const daily = amountField(form, 'cap_daily', 'The daily cap');
    const monthly = amountField(form, 'cap_monthly', 'The monthly cap');
    const total = amountField(form, 'cap_total', 'The total cap');
    await callCore(asSession(ctx), (o) =>
      core.keys.updateKeyCaps(
        {
          keyId,
          // An empty field is no cap, as on the create form.
          ...(daily === undefined ? { removeCapDaily: true } : { capDaily: daily, removeCapDaily: false }),
          ...(monthly === undefined ? { removeCapMonthly: true } : { capMonthly: monthly, removeCapMonthly: false }),
          ...(total === undefined ? { removeCapTotal: true } : { capTotal: total, removeCapTotal: false }),
        },
        o,
      ),
    );
    seeOther(ctx, `/console/keys/view?id=${encodeURIComponent(keyId)}&done=caps`);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showKey(ctx, core, { keyId, notice: noticeOf(ctx, error), status: statusOf(error), caps: typed });
  }
}

/** POST /console/keys/edit: label, expiry, models and tools. */
export async function editKey(ctx: Context, core: KeysCore): Promise<void> {
  const form = formOf(ctx);
  const keyId = field(form, 'key_id');
  const typed: EditFormValues = {
    name: field(form, 'name').slice(0, 100),
    expiresOn: field(form, 'expires_on').slice(0, 10),
    models: field(form, 'models').slice(0, 2000),
    tools: field(form, 'tools').slice(0, 2000),
  };
  try {
    const expiresAt = expiryField(form);
    await callCore(asSession(ctx), (o) =>
      core.keys.updateKey(
        {
          keyId,
          name: field(form, 'name'),
          // The form always shows the expiry: empty is "never".
          ...(expiresAt === undefined ? { removeExpiry: true } : { expiresAt }),
          // The form always shows both lists, so what it sends is the whole new list (empty: all).
          allowedModels: { names: namesField(form, 'models') },
          allowedTools: { names: namesField(form, 'tools') },
        },
        o,
      ),
    );
    seeOther(ctx, `/console/keys/view?id=${encodeURIComponent(keyId)}&done=edited`);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showKey(ctx, core, { keyId, notice: noticeOf(ctx, error), status: statusOf(error), edit: typed });
  }
}

/** POST /console/keys/roll: a new secret, the old one working for the grace chosen. */
export async function rollKey(ctx: Context, core: KeysCore): Promise<void> {
  const form = formOf(ctx);
  const keyId = field(form, 'key_id');
  const formId = field(form, 'form_id');
  try {
    const choice = GRACE_CHOICES.find(([value]) => value === field(form, 'grace'));
    if (choice === undefined)
      throw new SvcError('invalid_argument', 'Choose how long the old secret keeps working.', { param: 'grace' });
    const graceMs = choice[1];
    const { key, replayed } = await callCore(asSession(ctx), (o) =>
      core.console.rollConsoleKey(
        {
          keyId,
          formId,
          grace: { seconds: BigInt(graceMs / 1000), nanos: 0 },
        },
        o,
      ),
    );
    if (key === undefined) throw new SvcError('internal', 'core returned no key');
    seeOther(ctx, `/console/keys/view?id=${encodeURIComponent(key.id)}&reveal=${encodeURIComponent(formId)}${replayed ? '&again=1' : ''}`,);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showKey(ctx, core, { keyId, notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}

/** GET /console/keys/revoke?id=: the confirmation before a key is revoked. */
export async function confirmRevoke(ctx: Context, core: KeysCore): Promise<void> {
  const s = signedOf(ctx);
  const id = String(ctx.query['id'] ?? '');
  const { keys: list } = await callCore(asSession(ctx), (o) => core.keys.listKeys({ accountId: '' }, o));
  const key = list.find((k) => k.id === id && k.revokedAt === undefined);
  if (key === undefined) {
    return showKeys(ctx, core, {
      notice: { kind: 'error', text: 'There is no such active API key in your account.' },
      status: 404,
    });
  }
  send(ctx, 200, revokePage({ viewer: s.viewer, key }));
}

/** POST /console/keys/revoke. */
export async function revoke(ctx: Context, core: KeysCore): Promise<void> {
  const form = formOf(ctx);
  try {
    await callCore(asSession(ctx), (o) =>
      core.keys.revokeKey({ keyId: field(form, 'key_id') }, o),
    );
    seeOther(ctx, '/console/keys?done=revoked');
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showKeys(ctx, core, { notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}

/** POST /console/apps/revoke: a connected app loses its grant. */
export async function revokeApp(ctx: Context, core: KeysCore): Promise<void> {
  const form = formOf(ctx);
  try {
    await callCore(asSession(ctx), (o) =>
      core.oauth.revokeConnectedApp({ grantId: field(form, 'grant_id') }, o),
    );
    seeOther(ctx, '/console/keys?done=app_revoked');
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showKeys(ctx, core, { notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}
