import { when } from './format';
import { html, type Html } from './html';
import { isMessageKey, t, type Locale } from './i18n';

/** One audit entry as the console shows it. */
export interface AuditEntryView {
  readonly createdAt?: Date | undefined;
  readonly action: string;
  readonly detail: string;
}

/** An audit action in the viewer's words (`audit.ACTION`), or the action as stored when it has none. */
export function auditLabel(l: Locale, action: string): string {
  const key = `audit.${action}`;
  return isMessageKey(key) ? t(l, key) : action;
}

/** An audit log, newest first as given: when, what, and its detail; "nothing yet" when empty. */
export function auditList(l: Locale, entries: readonly AuditEntryView[], testId: string): Html {
  return html`<ul class="activity" data-testid="${testId}">
    ${
      entries.length === 0
        ? html`<li class="hint">${t(l, 'acc.noAudit')}</li>`
        : entries.map(
            (x) =>
              html`<li>
                <time datetime="${x.createdAt?.toISOString() ?? ''}">${when(l, x.createdAt)}</time>
                <strong>${auditLabel(l, x.action)}</strong>
                <span dir="auto">${x.detail}</span>
              </li>`,
          )
    }
  </ul>`;
}
