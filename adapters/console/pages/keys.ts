import type { ApiKey } from '../../../gen/svc/core/v1/keys';
import type { ConnectedApp } from '../../../gen/svc/core/v1/oauth';
import type { ConsoleKeyEvent } from '../../../gen/svc/core/v1/console';
import { ago, groupDigits, utc } from '../format';
import { html, type Html } from '../html';
import { page, type Notice, type Viewer } from '../layout';

const SCOPE_LABELS: Readonly<Record<string, string>> = {
  all: 'Chat API and tools',
  chat: 'Chat API only',
  tools: 'MCP tools only',
};

function status(key: ApiKey, now: number): Html {
  if (key.revokedAt !== undefined) {
    return html`<span class="badge badge-off"
      >Revoked <time datetime="${key.revokedAt.toISOString()}">${utc(key.revokedAt).slice(0, 10)}</time></span
    >`;
  }
  if (key.expiresAt !== undefined) {
    const at = html`<time datetime="${key.expiresAt.toISOString()}">${utc(key.expiresAt)}</time>`;
    if (key.expiresAt.getTime() <= now) return html`<span class="badge badge-off">Expired ${at}</span>`;
    return html`<span class="badge badge-ok">Active</span> <span class="hint">until ${at}</span>`;
  }
  return html`<span class="badge badge-ok">Active</span>`;
}

/** What the key's lineage spent in a period, against its cap if it has one. */
function spend(spent: bigint, cap: bigint | undefined): Html {
  return cap === undefined
    ? html`${groupDigits(spent)} <span class="hint">no cap</span>`
    : html`${groupDigits(spent)} <span class="hint">of ${groupDigits(cap)}</span>`;
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
export const GRACE_CHOICES: readonly (readonly [string, number, string])[] = [
  ['0', 0, 'Stop the old key now'],
  ['1h', 3_600_000, '1 hour'],
  ['24h', 86_400_000, '24 hours'],
  ['7d', 7 * 86_400_000, '7 days'],
];

function selected(on: boolean): Html {
  return on ? html` selected` : html``;
}

function active(key: ApiKey, now: number): boolean {
  return key.revokedAt === undefined && (key.expiresAt === undefined || key.expiresAt.getTime() > now);
}

function createForm(csrf: string, formId: string, v: KeyFormValues): Html {
  return html`<section class="panel" aria-labelledby="create-heading">
    <h2 id="create-heading">Create a key</h2>
    <form class="inline" method="post" action="/console/keys">
      <input type="hidden" name="csrf_token" value="${csrf}" />
      <input type="hidden" name="form_id" value="${formId}" />
      <div class="field">
        <label for="name">Label <span class="hint">what or who uses it, e.g. “laptop” or “staging”</span></label>
        <input id="name" name="name" required maxlength="100" size="32" value="${v.name}" dir="auto" />
      </div>
      <div class="field">
        <label for="scope">Access</label>
        <select id="scope" name="scope">
          ${(['all', 'chat', 'tools'] as const).map(
            (s) => html`<option value="${s}"${selected(v.scope === s)}>${SCOPE_LABELS[s] ?? s}</option>`,
          )}
        </select>
      </div>
      <div class="field">
        <label for="cap_daily">Daily cap <span class="hint">toman per UTC day; empty: no cap</span></label>
        <input id="cap_daily" name="cap_daily" inputmode="numeric" size="10" value="${v.capDaily}" />
      </div>
      <div class="field">
        <label for="cap_monthly">Monthly cap <span class="hint">toman per UTC month; empty: no cap</span></label>
        <input id="cap_monthly" name="cap_monthly" inputmode="numeric" size="10" value="${v.capMonthly}" />
      </div>
      <div class="field">
        <label for="cap_total">Total cap <span class="hint">toman ever; empty: no cap</span></label>
        <input id="cap_total" name="cap_total" inputmode="numeric" size="10" value="${v.capTotal}" />
      </div>
      <div class="field">
        <label for="models">Models <span class="hint">comma-separated; empty: all</span></label>
        <input id="models" name="models" maxlength="2000" size="24" value="${v.models}" dir="ltr" />
      </div>
      <div class="field">
        <label for="tools">Tools <span class="hint">comma-separated; empty: all</span></label>
        <input id="tools" name="tools" maxlength="2000" size="24" value="${v.tools}" dir="ltr" />
      </div>
      <div class="field">
        <label for="expires_on">Expires <span class="hint">end of this day (UTC); empty: never</span></label>
        <input id="expires_on" name="expires_on" type="date" value="${v.expiresOn}" />
      </div>
      <button class="btn" type="submit">Create key</button>
    </form>
  </section>`;
}

/** The new secret, on the page a create or roll form redirected to; this page is its only showing. */
export function newKeyPanel(created: { key: ApiKey; secret: string }): Html {
  return html`<section class="panel" aria-labelledby="new-key-heading">
    <h2 id="new-key-heading">Your new key “<bdi>${created.key.name}</bdi>”</h2>
    <div class="alert alert-warn" role="status">
      <strong>Copy this key now. It will not be shown again.</strong> svc keeps only a fingerprint of it; if you lose
      it, roll it or create a new one.
    </div>
    <div class="secret">
      <code id="new-key" data-testid="new-key">${created.secret}</code>
      <button class="btn" type="button" data-copy="new-key" hidden>Copy key</button>
    </div>
    <p class="hint">
      Use it as <code>Authorization: Bearer …</code> for the OpenAI-compatible API and the MCP server: see
      <a href="/console/connect">Connect</a>.
    </p>
  </section>`;
}

/** Apps connected through OAuth (SPEC §8): each acts like a tools-only key until disconnected. */
function appsPanel(apps: readonly ConnectedApp[], csrf: string, now: number): Html {
  if (apps.length === 0) return html``;
  const rows = apps.map(
    (a) =>
      html`<tr>
        <td dir="auto">${a.clientName}</td>
        <td>${SCOPE_LABELS[a.scope] ?? a.scope}</td>
        <td class="hide-narrow"><time datetime="${a.createdAt?.toISOString() ?? ''}">${utc(a.createdAt)}</time></td>
        <td>${ago(a.lastUsedAt, now)}</td>
        <td class="num">
          <form class="inline" method="post" action="/console/apps/revoke">
            <input type="hidden" name="csrf_token" value="${csrf}" />
            <input type="hidden" name="grant_id" value="${a.grantId}" />
            <button class="btn btn-quiet btn-small" type="submit">
              Disconnect<span class="visually-hidden"> ${a.clientName}</span>
            </button>
          </form>
        </td>
      </tr>`,
  );
  return html`<section class="panel" aria-labelledby="apps-heading">
    <h2 id="apps-heading">Connected apps</h2>
    <p class="hint">
      Apps you allowed to use the MCP tools by signing in (OAuth). Their calls are charged to your wallet.
    </p>
    <div class="table-wrap">
      <table data-testid="connected-apps">
        <thead>
          <tr>
            <th scope="col">App</th>
            <th scope="col">Access</th>
            <th scope="col" class="hide-narrow">Connected</th>
            <th scope="col">Last used</th>
            <th scope="col"><span class="visually-hidden">Actions</span></th>
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
  const rows = input.keys.map(
    (k) =>
      html`<tr>
        <td dir="auto">
          <a href="/console/keys/view?id=${encodeURIComponent(k.id)}"
            >${k.name === '' ? html`<span class="hint">(no label)</span>` : k.name}</a
          >
        </td>
        <td data-label="Key" class="mono">${k.prefix}…${k.lastFour}</td>
        <td data-label="Access">${SCOPE_LABELS[k.scope] ?? k.scope}</td>
        <td data-label="Spent today" class="num">${spend(k.spentToday, k.capDaily)}</td>
        <td data-label="This month" class="num">${spend(k.spentThisMonth, k.capMonthly)}</td>
        <td data-label="Created" class="hide-narrow"><time datetime="${k.createdAt?.toISOString() ?? ''}">${utc(k.createdAt)}</time></td>
        <td data-label="Last used">${ago(k.lastUsedAt, input.now)}</td>
        <td data-label="Status">${status(k, input.now)}</td>
        <td class="num">
          ${
            active(k, input.now)
              ? html`<a class="btn btn-quiet btn-small" href="/console/keys/revoke?id=${encodeURIComponent(k.id)}"
                  >Revoke<span class="visually-hidden"> ${k.name}</span></a
                >`
              : html``
          }
        </td>
      </tr>`,
  );
  return page({
    title: 'API keys',
    path: '/console/keys',
    viewer: input.viewer,
    lede: 'A key works for both the OpenAI-compatible API and the MCP tools unless you limit it to one. Charges go to your wallet; a daily or monthly cap limits what one key (and the keys rolled from it) may spend.',
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`${input.created === undefined ? html`` : newKeyPanel(input.created)}
      ${createForm(input.viewer.csrfToken, input.formId, input.form ?? EMPTY_KEY_FORM)}
      <section class="panel" aria-labelledby="keys-heading">
        <h2 id="keys-heading">Your keys</h2>
        <div class="table-wrap">
          <table class="cards">
            <thead>
              <tr>
                <th scope="col">Label</th>
                <th scope="col">Key</th>
                <th scope="col">Access</th>
                <th scope="col" class="num">Spent today</th>
                <th scope="col" class="num">This month</th>
                <th scope="col" class="hide-narrow">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col"><span class="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              ${
                rows.length === 0
                  ? html`<tr>
                      <td colspan="9" class="empty">No keys yet. Create one above.</td>
                    </tr>`
                  : rows
              }
            </tbody>
          </table>
        </div>
      </section>
      ${appsPanel(input.apps ?? [], input.viewer.csrfToken, input.now)}`,
  });
}

/** Asks before revoking: a plain page and form, so it works with a keyboard and without script. */
export function revokePage(input: { viewer: Viewer; key: ApiKey; notice?: Notice }): Html {
  const k = input.key;
  return page({
    title: 'Revoke key',
    path: '/console/keys',
    viewer: input.viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel">
      <h2>Revoke “<bdi>${k.name}</bdi>” (<span class="mono">${k.prefix}…${k.lastFour}</span>)?</h2>
      <p>
        Every request made with this key will be refused from now on. This cannot be undone; you can create a new key at
        any time.
      </p>
      <form class="inline" method="post" action="/console/keys/revoke">
        <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
        <input type="hidden" name="key_id" value="${k.id}" />
        <button class="btn btn-danger" type="submit">Revoke key</button>
        <a class="btn btn-quiet" href="/console/keys">Cancel</a>
      </form>
    </section>`,
  });
}

const EVENT_LABELS: Readonly<Record<string, string>> = {
  created: 'Created',
  edited: 'Edited',
  caps: 'Caps changed',
  rolled: 'Rolled',
  revoked: 'Revoked',
};

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
export function keyPage(input: {
  viewer: Viewer;
  key: ApiKey;
  lineage: readonly ApiKey[];
  events: readonly ConsoleKeyEvent[];
  now: number;
  formId: string;
  notice?: Notice;
  created?: { key: ApiKey; secret: string };
  caps?: CapsFormValues;
  edit?: EditFormValues;
}): Html {
  const k = input.key;
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
    (l) => html`<tr>
      <td class="mono">${l.prefix}…${l.lastFour}</td>
      <td><time datetime="${l.createdAt?.toISOString() ?? ''}">${utc(l.createdAt)}</time></td>
      <td>${ago(l.lastUsedAt, input.now)}</td>
      <td>${status(l, input.now)}</td>
    </tr>`,
  );
  const eventRows = input.events.map(
    (e) => html`<li>
      <time datetime="${e.createdAt?.toISOString() ?? ''}">${utc(e.createdAt)}</time>
      <strong>${EVENT_LABELS[e.kind] ?? e.kind}</strong>
      <span>${e.detail}</span>
    </li>`,
  );
  return page({
    title: k.name === '' ? 'API key' : `Key “${k.name}”`,
    path: '/console/keys',
    viewer: input.viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`${input.created === undefined ? html`` : newKeyPanel(input.created)}
      <section class="panel" aria-labelledby="key-heading">
        <h2 id="key-heading"><bdi>${k.name}</bdi> <span class="mono">${k.prefix}…${k.lastFour}</span></h2>
        <dl class="facts">
          <dt>Access</dt>
          <dd>${SCOPE_LABELS[k.scope] ?? k.scope}</dd>
          <dt>Status</dt>
          <dd data-testid="key-status">${status(k, input.now)}</dd>
          <dt>Spent today</dt>
          <dd>${spend(k.spentToday, k.capDaily)}</dd>
          <dt>Spent this month</dt>
          <dd>${spend(k.spentThisMonth, k.capMonthly)}</dd>
          <dt>Spent in total</dt>
          <dd>${spend(k.spentTotal, k.capTotal)}</dd>
          <dt>Models</dt>
          <dd data-testid="key-models">${k.allowedModels.length === 0 ? 'All' : namesText(k.allowedModels)}</dd>
          <dt>Tools</dt>
          <dd data-testid="key-tools">${k.allowedTools.length === 0 ? 'All' : namesText(k.allowedTools)}</dd>
          <dt>Created</dt>
          <dd><time datetime="${k.createdAt?.toISOString() ?? ''}">${utc(k.createdAt)}</time></dd>
          <dt>Last used</dt>
          <dd>${ago(k.lastUsedAt, input.now)}</dd>
        </dl>
      </section>
      ${
        k.revokedAt !== undefined
          ? html``
          : html`<section class="panel" aria-labelledby="edit-heading">
              <h2 id="edit-heading">Label, expiry, models and tools</h2>
              <form class="inline" method="post" action="/console/keys/edit">
                <input type="hidden" name="csrf_token" value="${csrf}" />
                <input type="hidden" name="key_id" value="${k.id}" />
                <div class="field">
                  <label for="edit_name">Label</label>
                  <input id="edit_name" name="name" required maxlength="100" size="28" value="${edit.name}" dir="auto" />
                </div>
                <div class="field">
                  <label for="edit_expires_on">Expires <span class="hint">end of this day (UTC); empty: never</span></label>
                  <input id="edit_expires_on" name="expires_on" type="date" value="${edit.expiresOn}" />
                </div>
                <div class="field">
                  <label for="edit_models">Models <span class="hint">comma-separated; empty: all</span></label>
                  <input id="edit_models" name="models" maxlength="2000" size="24" value="${edit.models}" dir="ltr" />
                </div>
                <div class="field">
                  <label for="edit_tools">Tools <span class="hint">comma-separated; empty: all</span></label>
                  <input id="edit_tools" name="tools" maxlength="2000" size="24" value="${edit.tools}" dir="ltr" />
                </div>
                <button class="btn" type="submit">Save</button>
              </form>
            </section>
            <section class="panel" aria-labelledby="caps-heading">
              <h2 id="caps-heading">Spend caps</h2>
              <p class="hint">
                Caps belong to this key and every key rolled from or to it. A cap below what was already spent stops new
                spending at once.
              </p>
              <form class="inline" method="post" action="/console/keys/caps">
                <input type="hidden" name="csrf_token" value="${csrf}" />
                <input type="hidden" name="key_id" value="${k.id}" />
                <div class="field">
                  <label for="edit_cap_daily">Daily cap <span class="hint">toman; empty: no cap</span></label>
                  <input id="edit_cap_daily" name="cap_daily" inputmode="numeric" size="12" value="${caps.capDaily}" />
                </div>
                <div class="field">
                  <label for="edit_cap_monthly">Monthly cap <span class="hint">toman; empty: no cap</span></label>
                  <input
                    id="edit_cap_monthly"
                    name="cap_monthly"
                    inputmode="numeric"
                    size="12"
                    value="${caps.capMonthly}"
                  />
                </div>
                <div class="field">
                  <label for="edit_cap_total">Total cap <span class="hint">toman ever; empty: no cap</span></label>
                  <input id="edit_cap_total" name="cap_total" inputmode="numeric" size="12" value="${caps.capTotal}" />
                </div>
                <button class="btn" type="submit">Save caps</button>
              </form>
            </section>`
      }
      ${
        live
          ? html`<section class="panel" aria-labelledby="roll-heading">
              <h2 id="roll-heading">Roll or revoke</h2>
              <p class="hint">
                Rolling issues a new secret for this key (same label, access and caps) and shows it once; the old secret
                keeps working for the time you choose, so you can update where it is used.
              </p>
              <form class="inline" method="post" action="/console/keys/roll">
                <input type="hidden" name="csrf_token" value="${csrf}" />
                <input type="hidden" name="key_id" value="${k.id}" />
                <input type="hidden" name="form_id" value="${input.formId}" />
                <div class="field">
                  <label for="grace">Old secret keeps working for</label>
                  <select id="grace" name="grace">
                    ${GRACE_CHOICES.map(
                      ([value, , label]) => html`<option value="${value}"${selected(value === '24h')}>${label}</option>`,
                    )}
                  </select>
                </div>
                <button class="btn" type="submit">Roll key</button>
                <a class="btn btn-quiet" href="/console/keys/revoke?id=${encodeURIComponent(k.id)}">Revoke…</a>
              </form>
            </section>`
          : html``
      }
      <section class="panel" aria-labelledby="lineage-heading">
        <h2 id="lineage-heading">Secrets of this key</h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Secrets of this key, scrollable">
          <table>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              ${lineageRows}
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="activity-heading">
        <h2 id="activity-heading">Activity</h2>
        ${
          eventRows.length === 0
            ? html`<p class="hint">Nothing was changed from the console yet.</p>`
            : html`<ol class="activity" data-testid="key-activity">
                ${eventRows}
              </ol>`
        }
      </section>`,
  });
}
