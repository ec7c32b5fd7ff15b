import { sql, type Generated } from 'kysely';
import type { Logger } from 'pino';
import type { Store } from '../store/db';

/** An operator action on an account (migration 0022; the table keeps its first name). */
export interface AuditTable {
  seq: Generated<bigint>;
  account_id: string;
  /** account_created, top_up. */
  action: string;
  detail: string;
  created_at: bigint;
}

export type AuditTables = { console_audit: AuditTable };

export interface AuditEntry {
  readonly action: string;
  readonly detail: string;
  readonly createdAt: Date;
}

/**
 * The operator's actions on accounts (account creation with a console sign-in, top-ups), shown
 * on the operator's account page and logged for the operator's own log search.
 */
export function createAudit(deps: { store: Store; now: () => number; logger: Logger }) {
  const db = deps.store.db.withTables<AuditTables>();
  return {
    async record(accountId: string, action: string, detail: string): Promise<void> {
      deps.logger.info({ accountId, action, detail }, 'operator action');
      await db
        .insertInto('console_audit')
        .values({ account_id: accountId, action, detail: detail.slice(0, 400), created_at: BigInt(deps.now()) })
        .execute();
    },

    /**
     * Records the action unless one with the same `mark` (the tail of its detail, e.g. the
     * top-up's request id) is already recorded: a retried action is audited once.
     */
    async recordOnce(accountId: string, action: string, detail: string, mark: string): Promise<void> {
      // LIKE's own wildcards in the mark match themselves ("!" escapes, as MySQL keeps it).
      const pattern = `%${mark.replace(/[!%_]/g, (c) => `!${c}`)}`;
      const seen = await db
        .selectFrom('console_audit')
        .select('seq')
        .where('account_id', '=', accountId)
        .where('action', '=', action)
        .where('detail', 'like', sql<string>`${pattern} escape '!'`)
        .executeTakeFirst();
      if (seen !== undefined) return;
      await this.record(accountId, action, `${detail.slice(0, 400 - mark.length)}${mark}`);
    },

    /** The account's audit entries, newest first. */
    async list(accountId: string, limit: number): Promise<AuditEntry[]> {
      const rows = await db
        .selectFrom('console_audit')
        .select(['action', 'detail', 'created_at'])
        .where('account_id', '=', accountId)
        .orderBy('seq', 'desc')
        .limit(limit)
        .execute();
      return rows.map((a) => ({ action: a.action, detail: a.detail, createdAt: new Date(Number(a.created_at)) }));
    },
  };
}

export type Audit = ReturnType<typeof createAudit>;
