import type { Generated, Kysely } from 'kysely';
import type { AuditTables } from '../accounts/audit';
import type { KeyEventTables } from '../keys/events';
import type { Store } from '../store/db';
import type { Database } from '../store/schema';

/** Rows of migration 0002_console. */
export interface ConsoleCredentialsTable {
  account_id: string;
  email: string;
  /** `scrypt$N$r$p$SALT$HASH` (base64url). */
  password_hash: string;
  created_at: bigint;
  updated_at: bigint;
}

export interface ConsoleSessionsTable {
  /** SHA-256 (hex) of the session token; the token itself is never stored. */
  token_hash: string;
  account_id: string | null;
  /** 1 for an operator session (signed in with SVC_ADMIN_TOKEN), else 0. */
  operator: number | bigint;
  csrf_token: string;
  created_at: bigint;
  expires_at: bigint;
  /** Operator sessions: HMAC-SHA256 (hex) of the session under the admin token it was opened with (0007). */
  operator_binding: string | null;
}

export interface ConsoleSignInFailuresTable {
  seq: Generated<bigint>;
  /** `email:ADDRESS`, `ip:ADDRESS` or `operator:ADDRESS`. */
  subject: string;
  created_at: bigint;
}

/** A submitted key form (migration 0022): one key per form, its secret sealed until shown once. */
export interface ConsoleKeyFormsTable {
  account_id: string;
  /** The form's random id, made when the page was rendered. */
  form_id: string;
  /** The session that submitted it: only that session may see the secret. */
  session_hash: string;
  /** Null while the first submission is still making the key. */
  key_id: string | null;
  /** AES-256-GCM under a key derived from the session token (base64url iv|tag|data); null once shown. */
  sealed: string | null;
  created_at: bigint;
}

/** An account's console settings (migration 0022). */
export interface ConsoleSettingsTable {
  account_id: string;
  /** Credits; every page warns while the available balance is below it. Null: no warning. */
  low_balance_threshold: bigint | null;
  updated_at: bigint;
}

// A type alias, not an interface: Kysely's withTables needs an index-signature-compatible shape.
export type ConsoleTables = KeyEventTables & AuditTables & {
  console_credentials: ConsoleCredentialsTable;
  console_sessions: ConsoleSessionsTable;
  console_sign_in_failures: ConsoleSignInFailuresTable;
  console_key_forms: ConsoleKeyFormsTable;
  console_settings: ConsoleSettingsTable;
};

export type ConsoleDb = Kysely<Database & ConsoleTables>;

/** The store's query builder, aware of the console's tables (kept out of the shared schema). */
export function consoleDb(store: Store): ConsoleDb {
  return store.db.withTables<ConsoleTables>();
}
