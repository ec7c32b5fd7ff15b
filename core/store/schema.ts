import type { Generated } from 'kysely';

/**
 * Row shapes of the database, shared by SQLite and MySQL. Integers that can exceed 2^53 or hold
 * money are `bigint`; timestamps are Unix milliseconds stored as BIGINT and read as `bigint`
 * (both drivers are configured to return exact integers).
 */
export interface AccountsTable {
  id: string;
  name: string;
  created_at: bigint;
  /** The account's own margin over dollar prices, exact decimal text (since 0045); null: none. */
  margin?: string | null;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  key_hash: string;
  prefix: string;
  last_four: string;
  created_at: bigint;
  last_used_at: bigint | null;
  revoked_at: bigint | null;
  /** 'all', 'chat' or 'tools' (see core/keys/scope.ts). */
  scope: string;
  /** Unix ms after which the key is refused; null: never. */
  expires_at: bigint | null;
  /** Shared by a key and every key rolled from it; null only in rows written before 0003. */
  lineage_id: string | null;
  /** The key this one was rolled to, if any. */
  replaced_by: string | null;
  /** 1: the key may manage the account's keys (the `manage` scope); 0 for every key before 0006. */
  can_manage: number;
  /** The models the key may use, a JSON array of model ids; null: every model (since 0023). */
  allowed_models: string | null;
  /** The tools the key may use, a JSON array of tool names; null: every tool (since 0023). */
  allowed_tools: string | null;
  /** The key's own limit of calls in flight; null: limits.concurrent_per_key (since 0048). */
  concurrent_limit: number | null;
}

export interface WalletsTable {
  account_id: string;
  balance: bigint;
  held: bigint;
  currency: string;
  updated_at: bigint;
}

export type LedgerKind = 'topup' | 'charge' | 'refund' | 'adjustment';

export interface LedgerEntriesTable {
  /** Auto-incremented; the order of the ledger. */
  seq: Generated<bigint>;
  account_id: string;
  kind: LedgerKind;
  amount: bigint;
  balance_after: bigint;
  request_id: string;
  reference: string;
  created_at: bigint;
}

export type HoldStatusName = 'held' | 'settled' | 'released' | 'expired';

export interface HoldsTable {
  id: string;
  account_id: string;
  request_id: string;
  amount: bigint;
  status: HoldStatusName;
  settled_amount: bigint | null;
  expires_at: bigint;
  created_at: bigint;
  /** The capped key lineage whose spend counters this hold reserved in; null when uncapped. */
  lineage_id: string | null;
  /** The id the client gave the call the hold is for (correlation only); null when none. */
  client_request_id: string | null;
}

/** A key lineage that has (or had) spend caps. Null cap: no limit for that period. */
export interface KeyLineagesTable {
  lineage_id: string;
  account_id: string;
  cap_daily: bigint | null;
  cap_monthly: bigint | null;
  /** Credits the lineage may ever spend; null: no total cap (since 0023). */
  cap_total: bigint | null;
  updated_at: bigint;
}

/** What a capped lineage spent and holds in one UTC period ('d:YYYY-MM-DD', 'm:YYYY-MM'), or ever ('t:all'). */
export interface KeySpendTable {
  lineage_id: string;
  period: string;
  spent: bigint;
  held: bigint;
}

export interface UsageRecordsTable {
  request_id: string;
  /** What the call was priced at, JSON (since 0045; SPEC §15); null in older rows. */
  pricing?: string | null;
  /** The id the client gave (x-client-request-id / x-request-id), for correlation; null when none. */
  client_request_id: string | null;
  account_id: string;
  key_id: string;
  /** 'chat', 'responses' or 'tool'. */
  kind: string;
  /** Model id or tool name. */
  resource: string;
  provider: string;
  /**
   * Every input token, of which `cached_tokens` were cache reads and `cache_write_tokens` cache
   * writes; `cache_write_1h_tokens` of those writes went to the one-hour cache (the rest are
   * five-minute writes). Uncached input = input − read − write (SPEC §13: five counts apart).
   */
  input_tokens: bigint;
  output_tokens: bigint;
  cached_tokens: Generated<bigint>;
  cache_write_tokens: Generated<bigint>;
  cache_write_1h_tokens: Generated<bigint>;
  /** What the cache reads saved: read × (input_per_1m − cached_input_per_1m), in millionths of a credit. */
  cache_saved_micro: Generated<bigint>;
  /** A media call's units (SPEC §14): images made, speech characters, transcribed seconds, rerank searches. */
  media_units: Generated<bigint>;
  /** A token-billed image call's input image tokens among `input_tokens` (SPEC §14; since 0049_pricing_image_input_tokens). */
  image_input_tokens: Generated<bigint>;
  cost: bigint;
  /** 'ok', 'empty', 'error', 'refused', 'cancelled'. */
  status: string;
  error_code: string | null;
  latency_ms: bigint;
  created_at: bigint;
}

export interface StoredResponsesTable {
  id: string;
  account_id: string;
  /** The Response object as JSON. */
  body: string;
  /** The full conversation (input items plus output items) as JSON, for previous_response_id. */
  conversation: string;
  created_at: bigint;
}

/** Keys svc made for itself (`purpose` e.g. "compaction"); `secret` is base64. */
export interface ServerKeysTable {
  purpose: string;
  id: string;
  secret: string;
  created_at: bigint;
}

export interface IdempotencyRecordsTable {
  account_id: string;
  idem_key: string;
  body_hash: string;
  /** 'pending' while the first request runs, then 'done'. */
  state: string;
  status_code: bigint;
  response: string | null;
  created_at: bigint;
  /** While 'pending': until when its core is known to run it (extended while it runs); null before 0006. */
  lease_until: bigint | null;
}

export type PaymentState = 'pending' | 'paid' | 'failed' | 'expired';

/** A wallet top-up through a payment gateway (SPEC §12); `amount` in toman (= credits). */
export interface PaymentsTable {
  id: string;
  account_id: string;
  /** 'zarinpal' or 'zibal'. */
  gateway: string;
  amount: bigint;
  state: PaymentState;
  /** The gateway's session: ZarinPal's authority, Zibal's trackId; null until the gateway gave one. */
  reference: string | null;
  /** The gateway's receipt number (ZarinPal ref_id, Zibal refNumber) once paid. */
  receipt: string | null;
  /** The masked card the payer used, as the gateway reported it. */
  card_pan: string | null;
  /** Why it failed or expired, in plain words (for the payer and the operator). */
  failure: string | null;
  /** Until when one replica holds the claim to verify it; null or past: free. */
  lease_until: bigint | null;
  verify_attempts: number;
  created_at: bigint;
  updated_at: bigint;
  paid_at: bigint | null;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  wallets: WalletsTable;
  ledger_entries: LedgerEntriesTable;
  holds: HoldsTable;
  usage_records: UsageRecordsTable;
  stored_responses: StoredResponsesTable;
  server_keys: ServerKeysTable;
  idempotency_records: IdempotencyRecordsTable;
  key_lineages: KeyLineagesTable;
  key_spend: KeySpendTable;
  payments: PaymentsTable;
}
