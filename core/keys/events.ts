import type { Generated } from 'kysely';
import type { Store } from '../store/db';
import type { ApiKeyView } from './service';

/**
 * What was done to a key lineage from the console (migration 0022; the table keeps its first
 * name): written by KeyService when a console session changes a key, and by the console's key
 * forms when they create or roll one.
 */
export interface KeyEventsTable {
  seq: Generated<bigint>;
  account_id: string;
  lineage_id: string;
  key_id: string;
  /** created, edited, caps, rolled or revoked. */
  kind: string;
  detail: string;
  created_at: bigint;
}

export type KeyEventTables = { console_key_events: KeyEventsTable };

export interface KeyEvent {
  readonly keyId: string;
  readonly kind: string;
  readonly detail: string;
  readonly createdAt: Date;
}

export type KeyEventKind = 'created' | 'edited' | 'caps' | 'rolled' | 'revoked';

/** A key's own limit of calls in flight as its activity line says it. */
function describeConcurrent(value: number | null): string {
  return value === null ? 'the default' : value === 0 ? 'no limit' : String(value);
}

function describeCap(value: bigint | null): string {
  return value === null ? 'no cap' : `${value.toLocaleString('en-US')} toman`;
}

/** An allowed list as the activity list says it, short enough for its 400-character detail. */
function describeNames(names: readonly string[] | null): string {
  if (names === null) return 'all';
  const text = names.join(', ');
  return text.length <= 90 ? text : `${text.slice(0, 89)}…`;
}

const when = (d: Date | null): string => (d === null ? 'never' : d.toISOString());

/** A new key, as its activity list's first line says it. */
export function createdDetail(k: ApiKeyView): string {
  return [
    `access ${k.scope}`,
    `daily cap ${describeCap(k.capDaily)}`,
    `monthly cap ${describeCap(k.capMonthly)}`,
    `total cap ${describeCap(k.capTotal)}`,
    `models ${describeNames(k.allowedModels)}`,
    `tools ${describeNames(k.allowedTools)}`,
    k.expiresAt === null ? 'no expiry' : `expires ${k.expiresAt.toISOString()}`,
  ].join('; ');
}

/** A roll, as the activity list says it. */
export function rolledDetail(key: ApiKeyView, previous: ApiKeyView): string {
  return `new key ${key.prefix}…${key.lastFour}; the old key ${previous.prefix}…${previous.lastFour} works until ${previous.expiresAt?.toISOString() ?? 'now'}`;
}

/** What a caps change did; empty when nothing changed. */
export function capsDetail(before: ApiKeyView, after: ApiKeyView): string {
  const said: string[] = [];
  if (after.capDaily !== before.capDaily)
    said.push(`daily cap ${describeCap(before.capDaily)} → ${describeCap(after.capDaily)}`);
  if (after.capMonthly !== before.capMonthly)
    said.push(`monthly cap ${describeCap(before.capMonthly)} → ${describeCap(after.capMonthly)}`);
  if (after.capTotal !== before.capTotal)
    said.push(`total cap ${describeCap(before.capTotal)} → ${describeCap(after.capTotal)}`);
  return said.join('; ');
}

/** What an edit (label, expiry, allowed models and tools) did; empty when nothing changed. */
export function editDetail(before: ApiKeyView, after: ApiKeyView): string {
  const said: string[] = [];
  if (after.name !== before.name) said.push(`label “${before.name}” → “${after.name}”`);
  if (when(after.expiresAt) !== when(before.expiresAt))
    said.push(`expiry ${when(before.expiresAt)} → ${when(after.expiresAt)}`);
  if (describeNames(after.allowedModels) !== describeNames(before.allowedModels))
    said.push(`models ${describeNames(before.allowedModels)} → ${describeNames(after.allowedModels)}`);
  if (describeNames(after.allowedTools) !== describeNames(before.allowedTools))
    said.push(`tools ${describeNames(before.allowedTools)} → ${describeNames(after.allowedTools)}`);
  if (after.concurrentLimit !== before.concurrentLimit)
    said.push(
      `calls at once ${describeConcurrent(before.concurrentLimit)} → ${describeConcurrent(after.concurrentLimit)}`,
    );
  return said.join('; ');
}

/** The activity list of key lineages. */
export function createKeyEvents(deps: { store: Store; now: () => number }) {
  const db = deps.store.db.withTables<KeyEventTables>();
  return {
    /** Adds a line to the key lineage's activity list (the key is the one it happened to). */
    async record(key: ApiKeyView, kind: KeyEventKind, detail: string): Promise<void> {
      await db
        .insertInto('console_key_events')
        .values({
          account_id: key.accountId,
          lineage_id: key.lineageId,
          key_id: key.id,
          kind,
          detail: detail.slice(0, 400),
          created_at: BigInt(deps.now()),
        })
        .execute();
    },

    /** The lineage's activity, newest first (at most 200 lines). */
    async list(accountId: string, lineageId: string): Promise<KeyEvent[]> {
      const rows = await db
        .selectFrom('console_key_events')
        .select(['key_id', 'kind', 'detail', 'created_at'])
        .where('account_id', '=', accountId)
        .where('lineage_id', '=', lineageId)
        .orderBy('seq', 'desc')
        .limit(200)
        .execute();
      return rows.map((r) => ({
        keyId: r.key_id,
        kind: r.kind,
        detail: r.detail,
        createdAt: new Date(Number(r.created_at)),
      }));
    },
  };
}

export type KeyEvents = ReturnType<typeof createKeyEvents>;
