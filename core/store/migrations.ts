import { sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

// One set of migrations for SQLite and MySQL: only types and syntax both understand.
// Indexed text columns are VARCHAR with a length (MySQL cannot index TEXT without one).
const initial: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('accounts')
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('name', 'varchar(200)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull().references('accounts.id'))
      .addColumn('name', 'varchar(200)', (c) => c.notNull())
      .addColumn('key_hash', 'char(64)', (c) => c.notNull().unique())
      .addColumn('prefix', 'varchar(20)', (c) => c.notNull())
      .addColumn('last_four', 'varchar(4)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('last_used_at', 'bigint')
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();

    await db.schema
      .createTable('wallets')
      .addColumn('account_id', 'varchar(40)', (c) => c.primaryKey().references('accounts.id'))
      .addColumn('balance', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('held', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('currency', 'varchar(10)', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('ledger_entries')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('kind', 'varchar(16)', (c) => c.notNull())
      .addColumn('amount', 'bigint', (c) => c.notNull())
      .addColumn('balance_after', 'bigint', (c) => c.notNull())
      .addColumn('request_id', 'varchar(100)', (c) => c.notNull())
      .addColumn('reference', 'varchar(200)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('ledger_account_seq').on('ledger_entries').columns(['account_id', 'seq']).execute();
    // Exactly once: one entry of each kind per request id and account.
    await db.schema
      .createIndex('ledger_once')
      .on('ledger_entries')
      .columns(['account_id', 'request_id', 'kind'])
      .unique()
      .execute();

    await db.schema
      .createTable('holds')
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('request_id', 'varchar(100)', (c) => c.notNull())
      .addColumn('amount', 'bigint', (c) => c.notNull())
      .addColumn('status', 'varchar(10)', (c) => c.notNull())
      .addColumn('settled_amount', 'bigint')
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('holds_request').on('holds').columns(['account_id', 'request_id']).unique().execute();
    await db.schema.createIndex('holds_expiry').on('holds').columns(['status', 'expires_at']).execute();

    await db.schema
      .createTable('usage_records')
      .addColumn('request_id', 'varchar(100)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('key_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('kind', 'varchar(16)', (c) => c.notNull())
      .addColumn('resource', 'varchar(100)', (c) => c.notNull())
      .addColumn('provider', 'varchar(40)', (c) => c.notNull())
      .addColumn('input_tokens', 'bigint', (c) => c.notNull())
      .addColumn('output_tokens', 'bigint', (c) => c.notNull())
      .addColumn('cost', 'bigint', (c) => c.notNull())
      .addColumn('status', 'varchar(16)', (c) => c.notNull())
      .addColumn('error_code', 'varchar(40)')
      .addColumn('latency_ms', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('usage_account_time')
      .on('usage_records')
      .columns(['account_id', 'created_at'])
      .execute();

    await db.schema
      .createTable('stored_responses')
      .addColumn('id', 'varchar(80)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('body', sql`mediumtext`, (c) => c.notNull())
      .addColumn('conversation', sql`mediumtext`, (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('idempotency_records')
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('idem_key', 'varchar(255)', (c) => c.notNull())
      .addColumn('body_hash', 'char(64)', (c) => c.notNull())
      .addColumn('state', 'varchar(10)', (c) => c.notNull())
      .addColumn('status_code', 'bigint', (c) => c.notNull())
      .addColumn('response', sql`mediumtext`)
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('idempotency_pk', ['account_id', 'idem_key'])
      .execute();
  },
};

// The web console: a sign-in per account, sessions (only the token's SHA-256 is stored), and
// failed sign-in attempts, counted per email and per client address to rate-limit guessing.
const consoleTables: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('console_credentials')
      .addColumn('account_id', 'varchar(40)', (c) => c.primaryKey().references('accounts.id'))
      .addColumn('email', 'varchar(254)', (c) => c.notNull().unique())
      .addColumn('password_hash', 'varchar(200)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('console_sessions')
      .addColumn('token_hash', 'char(64)', (c) => c.primaryKey())
      // Null for an operator session.
      .addColumn('account_id', 'varchar(40)')
      .addColumn('operator', 'integer', (c) => c.notNull())
      .addColumn('csrf_token', 'varchar(64)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('console_sessions_account').on('console_sessions').column('account_id').execute();

    await db.schema
      .createTable('console_sign_in_failures')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('subject', 'varchar(300)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('console_failures_subject')
      .on('console_sign_in_failures')
      .columns(['subject', 'created_at'])
      .execute();
  },
};

// Per-key controls (issue 9): a scope, an expiry, and the lineage a rolled key shares with the key
// it replaced, so that spend can later be capped per lineage rather than per key (rolling a key
// must never reset its cap). SQLite adds one column per ALTER TABLE, hence one statement each.
const keyControls: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('api_keys')
      .addColumn('scope', 'varchar(10)', (c) => c.notNull().defaultTo('all'))
      .execute();
    await db.schema.alterTable('api_keys').addColumn('expires_at', 'bigint').execute();
    await db.schema.alterTable('api_keys').addColumn('lineage_id', 'varchar(40)').execute();
    await db.schema.alterTable('api_keys').addColumn('replaced_by', 'varchar(40)').execute();
    // Every existing key starts its own lineage.
    await sql`UPDATE api_keys SET lineage_id = id WHERE lineage_id IS NULL`.execute(db);
    await db.schema.createIndex('api_keys_lineage').on('api_keys').column('lineage_id').execute();
  },
};

// Per-key spend caps (issue 9): caps live on the lineage, so a rolled key keeps them and its spend.
// A lineage has a row here only once it was given a cap (a key never capped costs nothing on the
// hot path); `key_spend` counts what a capped lineage spent and holds per UTC day ('d:2026-11-22')
// and month ('m:2026-11'); a hold remembers its lineage so that settle, release and the reaper move
// its credits in the period it was placed in.
const keyCaps: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('key_lineages')
      .addColumn('lineage_id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('cap_daily', 'bigint')
      .addColumn('cap_monthly', 'bigint')
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('key_spend')
      .addColumn('lineage_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('period', 'varchar(12)', (c) => c.notNull())
      .addColumn('spent', 'bigint', (c) => c.notNull())
      .addColumn('held', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('key_spend_pk', ['lineage_id', 'period'])
      .execute();
    await db.schema.alterTable('holds').addColumn('lineage_id', 'varchar(40)').execute();
  },
};

// Usage records per account (issue 20): the request id was the table's key across all accounts,
// so two accounts' calls under one id kept only the first record. The key is now (account,
// request id), and the id the client gave its request is kept beside svc's own for lookups
// (issue 13: a client's id never identifies a charge). SQLite cannot change a primary key in
// place, so the table is rebuilt the same way on both databases.
const usagePerAccount: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('usage_records_v2')
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('request_id', 'varchar(100)', (c) => c.notNull())
      .addColumn('client_request_id', 'varchar(100)')
      .addColumn('key_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('kind', 'varchar(16)', (c) => c.notNull())
      .addColumn('resource', 'varchar(100)', (c) => c.notNull())
      .addColumn('provider', 'varchar(40)', (c) => c.notNull())
      .addColumn('input_tokens', 'bigint', (c) => c.notNull())
      .addColumn('output_tokens', 'bigint', (c) => c.notNull())
      .addColumn('cost', 'bigint', (c) => c.notNull())
      .addColumn('status', 'varchar(16)', (c) => c.notNull())
      .addColumn('error_code', 'varchar(40)')
      .addColumn('latency_ms', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('usage_records_pk', ['account_id', 'request_id'])
      .execute();
    const columns = sql.raw(
      'account_id, request_id, key_id, kind, resource, provider, input_tokens, output_tokens, cost, status, error_code, latency_ms, created_at',
    );
    await sql`INSERT INTO usage_records_v2 (${columns}) SELECT ${columns} FROM usage_records`.execute(db);
    await db.schema.dropTable('usage_records').execute();
    await db.schema.alterTable('usage_records_v2').renameTo('usage_records').execute();
    await db.schema
      .createIndex('usage_account_time')
      .on('usage_records')
      .columns(['account_id', 'created_at'])
      .execute();
    await db.schema
      .createIndex('usage_client_request')
      .on('usage_records')
      .columns(['account_id', 'client_request_id'])
      .execute();
    // On the hold too: it is written before any upstream is called, so every charge (even one
    // whose usage record a crash kept from being written) can be traced to the client's id.
    await db.schema.alterTable('holds').addColumn('client_request_id', 'varchar(100)').execute();
  },
};

// Issue 20 (red team). `can_manage`: whether a key may manage the account's keys (every existing
// key starts without). `lease_until`: until when the first request of an Idempotency-Key is known
// to be alive (its core extends it while it runs), so a key whose first request died with its
// core is free again once the lease runs out, not after 24 hours.
const securityControls: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('api_keys')
      .addColumn('can_manage', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('idempotency_records').addColumn('lease_until', 'bigint').execute();
  },
};

// Operator console sessions (issue 20): a keyed digest of the admin token each was opened with,
// so that a session ends when SVC_ADMIN_TOKEN changes or is removed. Null for account sessions;
// operator sessions opened before this migration have none and end at once.
const consoleOperatorBinding: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('console_sessions').addColumn('operator_binding', 'varchar(64)').execute();
  },
};

// OAuth 2.1 for MCP clients without a static key (issue 16): registered clients, single-use
// authorization codes, grants (one per consent; the "key id" of what its tokens do) and their
// access and refresh tokens. Codes and tokens are kept as SHA-256 digests only.
const oauth: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('oauth_clients')
      .addColumn('client_id', 'varchar(255)', (c) => c.primaryKey())
      .addColumn('client_name', 'varchar(200)', (c) => c.notNull())
      .addColumn('redirect_uris', 'text', (c) => c.notNull())
      .addColumn('registration', 'varchar(20)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('oauth_codes')
      .addColumn('code_hash', 'char(64)', (c) => c.primaryKey())
      .addColumn('client_id', 'varchar(255)', (c) => c.notNull())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('redirect_uri', 'text', (c) => c.notNull())
      .addColumn('code_challenge', 'varchar(128)', (c) => c.notNull())
      .addColumn('scope', 'varchar(100)', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('used_at', 'bigint')
      .addColumn('grant_id', 'varchar(40)')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('oauth_grants')
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('client_id', 'varchar(255)', (c) => c.notNull())
      .addColumn('scope', 'varchar(100)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('last_used_at', 'bigint')
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('oauth_grants_account').on('oauth_grants').column('account_id').execute();
    await db.schema
      .createTable('oauth_tokens')
      .addColumn('token_hash', 'char(64)', (c) => c.primaryKey())
      .addColumn('grant_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('kind', 'varchar(10)', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('revoked_at', 'bigint')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('oauth_tokens_grant').on('oauth_tokens').column('grant_id').execute();
    await db.schema.createIndex('oauth_tokens_expiry').on('oauth_tokens').column('expires_at').execute();
  },
};

// Prices that follow the upstream's usage (issue 15): the cache reads and cache writes among a
// call's input tokens, priced apart (SPEC §6), kept on its usage record. Rows from before are 0.
const usageCacheTokens: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('usage_records')
      .addColumn('cached_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('usage_records')
      .addColumn('cache_write_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};

// The console's key forms (issue 22): each submitted create or roll form, by its random id, so a
// form posted twice (a double click, a reload, a second tab) makes one key; and the new secret,
// sealed under the session that made it, until the page the form redirects to shows it once.
// The key activity list: what was done to each key lineage from the console, and when. The
// account's console settings (the low-balance warning threshold).
const consoleKeyForms: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('console_key_forms')
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('form_id', 'varchar(64)', (c) => c.notNull())
      .addColumn('session_hash', 'char(64)', (c) => c.notNull())
      .addColumn('key_id', 'varchar(40)')
      .addColumn('sealed', 'varchar(400)')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('console_key_forms_pk', ['account_id', 'form_id'])
      .execute();
    await db.schema
      .createTable('console_key_events')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('lineage_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('key_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('kind', 'varchar(20)', (c) => c.notNull())
      .addColumn('detail', 'varchar(400)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    // Per-account console settings: the balance below which every page warns.
    await db.schema
      .createTable('console_settings')
      .addColumn('account_id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('low_balance_threshold', 'bigint')
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .execute();
    // What the operator did from the console (accounts created, wallets topped up), for audit.
    await db.schema
      .createTable('console_audit')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('action', 'varchar(40)', (c) => c.notNull())
      .addColumn('detail', 'varchar(400)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('console_audit_account').on('console_audit').column('account_id').execute();
    await db.schema
      .createIndex('console_key_events_lineage')
      .on('console_key_events')
      .columns(['account_id', 'lineage_id'])
      .execute();
  },
};

// Key limits (issue 22): a total spend cap per key lineage beside the day and month caps, counted
// in the lineage's 't:all' key_spend row under the same wallet-row lock; and the models and tools
// a key may use (null: all). Every lineage capped before this migration gets its total counter
// now, from what its keys spent and hold, so a total cap set later counts its whole history.
const keyLimits: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('key_lineages').addColumn('cap_total', 'bigint').execute();
    await db.schema.alterTable('api_keys').addColumn('allowed_models', 'varchar(2000)').execute();
    await db.schema.alterTable('api_keys').addColumn('allowed_tools', 'varchar(2000)').execute();
    await sql`
      insert into key_spend (lineage_id, period, spent, held)
      select l.lineage_id, 't:all',
        coalesce((select sum(u.cost) from usage_records u inner join api_keys k on k.id = u.key_id
          where k.lineage_id = l.lineage_id and u.account_id = l.account_id), 0),
        coalesce((select sum(h.amount) from holds h where h.lineage_id = l.lineage_id and h.status = 'held'), 0)
      from key_lineages l`.execute(db);
  },
};

// Keys svc generates for itself on first use (the compaction seal, core/chat/responses/seal.ts):
// one row per key, the newest of a purpose seals, every one still opens.
const serverKeys: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('server_keys')
      .addColumn('purpose', 'varchar(40)', (c) => c.notNull())
      .addColumn('id', 'varchar(40)', (c) => c.notNull())
      .addColumn('secret', 'varchar(200)', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('server_keys_pk', ['purpose', 'id'])
      .execute();
  },
};

// Payments (issue 34, SPEC §12): a wallet top-up through a payment gateway. `reference` is the
// gateway's session (ZarinPal authority, Zibal trackId), unique per gateway, so a reference
// credits at most one payment; so is `receipt` (ZarinPal ref_id, Zibal refNumber). `lease_until`
// is the claim of the one replica verifying it now (the return and the reconciler race for it);
// the credit itself is guarded by `state` and by the ledger's unique (account, request id, kind).
const payments: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('payments')
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('account_id', 'varchar(40)', (c) => c.notNull())
      .addColumn('gateway', 'varchar(20)', (c) => c.notNull())
      .addColumn('amount', 'bigint', (c) => c.notNull())
      .addColumn('state', 'varchar(10)', (c) => c.notNull())
      .addColumn('reference', 'varchar(100)')
      .addColumn('receipt', 'varchar(100)')
      .addColumn('card_pan', 'varchar(40)')
      .addColumn('failure', 'varchar(300)')
      .addColumn('lease_until', 'bigint')
      .addColumn('verify_attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addColumn('paid_at', 'bigint')
      .execute();
    await db.schema
      .createIndex('payments_reference')
      .on('payments')
      .columns(['gateway', 'reference'])
      .unique()
      .execute();
    await db.schema.createIndex('payments_receipt').on('payments').columns(['gateway', 'receipt']).unique().execute();
    await db.schema.createIndex('payments_account').on('payments').columns(['account_id', 'created_at']).execute();
    await db.schema.createIndex('payments_state').on('payments').columns(['state', 'created_at']).execute();
  },
};

// The sweep of unused dynamically registered OAuth clients (core/oauth/service.ts) reads clients
// by registration and age, and the grants and live codes of each: indexed, so that open
// registration at its limits never makes the sweep scan the tables (issue 31).
const oauthSweepIndexes: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createIndex('oauth_clients_registration_age')
      .on('oauth_clients')
      .columns(['registration', 'created_at'])
      .execute();
    await db.schema.createIndex('oauth_grants_client').on('oauth_grants').column('client_id').execute();
    await db.schema.createIndex('oauth_codes_client').on('oauth_codes').columns(['client_id', 'expires_at']).execute();
  },
};

// Every cache tier billed (issue 42, SPEC §13): the one-hour writes among a call's cache writes
// (priced at cache_write_1h_per_1m), and what its cache reads saved against the input price, in
// millionths of a credit (priced when charged, so a later price change does not rewrite history).
// Rows from before are 0: their writes were all billed as five-minute writes.
const usageCacheTiers: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('usage_records')
      .addColumn('cache_write_1h_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('usage_records')
      .addColumn('cache_saved_micro', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};

// The media calls of SPEC §14 (issue 44): what each was billed by, in the unit of its kind
// (images made, speech characters, transcribed seconds, rerank searches; 0 for chat and tools).
const usageMediaUnits: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('usage_records')
      .addColumn('media_units', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};

// A key's own limit of calls in flight (issue 48); null: limits.concurrent_per_key.
const keyConcurrency: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('api_keys').addColumn('concurrent_limit', 'integer').execute();
  },
};

// Prices from the dollar (issue 45, SPEC §15): every exchange rate set (toman per US dollar), the
// newest in force; an account's own margin (exact decimal text, e.g. "0.1"; null: the model's or
// the default); each usage record's prices.
const priceRates: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('price_rates')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('rate', 'bigint', (c) => c.notNull())
      .addColumn('set_at', 'bigint', (c) => c.notNull())
      .addColumn('by', 'varchar(200)', (c) => c.notNull())
      .execute();
    await db.schema.alterTable('accounts').addColumn('margin', 'varchar(20)').execute();
    // What each call was priced at (JSON: credit prices, and for a dollar-priced model the dollar
    // prices, rate and margin behind them); null in rows from before.
    await db.schema.alterTable('usage_records').addColumn('pricing', 'varchar(2000)').execute();
  },
};

// Token-billed image models price their input images apart (issue 45, SPEC §14: image_input_per_1m):
// each usage record keeps the input image tokens among its input tokens, so the margin report
// prices them at the record's dollar price. Rows from before are 0.
const usageImageInputTokens: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('usage_records')
      .addColumn('image_input_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};

/** Migrations in order. Add new ones at the end; never edit one that has shipped. */
export const migrations: Readonly<Record<string, Migration>> = {
  '0001_initial': initial,
  '0002_console': consoleTables,
  '0003_key_controls': keyControls,
  '0004_key_caps': keyCaps,
  '0005_usage_per_account': usagePerAccount,
  '0006_security_controls': securityControls,
  '0007_console_operator_binding': consoleOperatorBinding,
  '0011_oauth': oauth,
  '0015_usage_cache_tokens': usageCacheTokens,
  '0022_console_key_forms': consoleKeyForms,
  '0023_key_limits': keyLimits,
  '0032_server_keys': serverKeys,
  '0034_payments': payments,
  '0036_oauth_sweep_indexes': oauthSweepIndexes,
  '0042_usage_cache_tiers': usageCacheTiers,
  '0044_usage_media_units': usageMediaUnits,
  '0048_key_concurrency': keyConcurrency,
  '0049_price_rates': priceRates,
  // Sorts after 0049_price_rates ("pric_e_" < "pric_i_").
  '0049_pricing_image_input_tokens': usageImageInputTokens,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: () => Promise.resolve({ ...migrations }),
};
