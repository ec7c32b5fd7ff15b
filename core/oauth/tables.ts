import type { Kysely } from 'kysely';
import type { Store } from '../store/db';
import type { Database } from '../store/schema';

/** Rows of migration 0011_oauth. Every token and code is stored as its SHA-256 (hex) only. */
export interface OAuthClientsTable {
  /** `oac_…` for a registered client; the document's URL for a Client ID Metadata Document. */
  client_id: string;
  client_name: string;
  /** JSON array of exact redirect URIs. */
  redirect_uris: string;
  /** 'dynamic' or 'metadata_document'. */
  registration: string;
  created_at: bigint;
}

export interface OAuthCodesTable {
  code_hash: string;
  client_id: string;
  account_id: string;
  redirect_uri: string;
  /** PKCE S256 challenge (base64url SHA-256 of the verifier). */
  code_challenge: string;
  scope: string;
  resource: string;
  expires_at: bigint;
  /** Set when exchanged; a second exchange revokes the grant it made. */
  used_at: bigint | null;
  grant_id: string | null;
  created_at: bigint;
}

export interface OAuthGrantsTable {
  /** `oag_…`: the "key id" of everything the grant's tokens do (usage, rate limits, traces). */
  id: string;
  account_id: string;
  client_id: string;
  scope: string;
  created_at: bigint;
  last_used_at: bigint | null;
  revoked_at: bigint | null;
}

export interface OAuthTokensTable {
  token_hash: string;
  grant_id: string;
  /** 'access' or 'refresh'. */
  kind: string;
  expires_at: bigint;
  /** Refresh tokens: set when rotated (used once) or revoked. */
  revoked_at: bigint | null;
  created_at: bigint;
}

// A type alias, not an interface: Kysely's withTables needs an index-signature-compatible shape.
export type OAuthTables = {
  oauth_clients: OAuthClientsTable;
  oauth_codes: OAuthCodesTable;
  oauth_grants: OAuthGrantsTable;
  oauth_tokens: OAuthTokensTable;
};

export type OAuthDb = Kysely<Database & OAuthTables>;

/** The store's query builder, aware of the OAuth tables (kept out of the shared schema). */
export function oauthDb(store: Store): OAuthDb {
  return store.db.withTables<OAuthTables>();
}
