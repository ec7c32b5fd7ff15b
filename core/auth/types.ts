import type { ApiSurface, KeyScope } from './scope';

/** Who is calling: the owner of a valid API key. */
export interface Principal {
  readonly accountId: string;
  readonly keyId: string;
  /** What the key may call. */
  readonly scope: KeyScope;
  /** The `manage` scope: may list, revoke, roll and cap the account's keys over the API. */
  readonly manage: boolean;
  /** Shared by a key and the keys rolled from it; spend caps count per lineage. */
  readonly lineageId: string;
  /** Whether the lineage has spend caps (then every hold checks them in its transaction). */
  readonly capped: boolean;
  /** Model ids the key may use; absent or null: every model (see `requireModel`). */
  readonly allowedModels?: readonly string[] | null;
  /** Tool names the key may use; absent or null: every tool (see `requireTool`). */
  readonly allowedTools?: readonly string[] | null;
  /** The key's own limit of calls in flight; absent or null: `limits.concurrent_per_key`; 0: none. */
  readonly concurrentLimit?: number | null;
}

/**
 * A signed-in console session (the console adapter sends its token as `authorization: Session
 * TOKEN`). A user session acts on its own account only; an operator session acts like the admin
 * token, and has no account of its own.
 */
export interface SessionCaller {
  readonly kind: 'session';
  /** The session's stored identity (the SHA-256 of its token); never the token itself. */
  readonly sessionId: string;
  readonly role: 'user' | 'operator';
  /** The user's account; null for an operator session. */
  readonly accountId: string | null;
  readonly expiresAt: Date;
}

/** Who is calling: the operator's admin token, an API key (or OAuth access token), or a console session. */
export type Caller = { readonly kind: 'admin' } | { readonly kind: 'key'; readonly principal: Principal } | SessionCaller;

/** Resolves a console session token; throws `session_expired` for an unknown or ended one. */
export interface SessionResolver {
  resolve(token: string): Promise<SessionCaller>;
}

/** What a handler needs of the caller's key. */
export interface RequireKeyOptions {
  /** The part of the service the call belongs to; a key whose scope does not cover it is refused (`key_scope_denied`). */
  readonly scope?: ApiSurface;
  /**
   * A call that runs work for the key (chat, Responses, embeddings, a tool call): takes one of the
   * key's and the account's in-flight slots (`limits.concurrent_per_*`) after the rate limit and
   * before any hold, given back when the call ends (core/limits/concurrency.ts).
   */
  readonly inFlight?: boolean;
}

/**
 * What every gRPC handler gets besides nice-grpc's CallContext. Authentication is resolved
 * lazily, so each handler states what it needs.
 */
export interface CoreCallContext {
  /**
   * Minted by the core for every call: the identity of its hold, charge and usage record, and the
   * `x-request-id` its caller answers with. Never chosen by a client.
   */
  readonly requestId: string;
  /** The id the client gave its request (`x-client-request-id` / `x-request-id`), for correlation only. */
  readonly clientRequestId: string | undefined;
  /** From `idempotency-key` metadata, when present. */
  readonly idempotencyKey: string | undefined;
  /**
   * The client's session id (`x-svc-session-id` metadata: Claude Code's `X-Claude-Code-Session-Id`,
   * Codex's `session_id`, forwarded by the adapters), when well-formed. Only a cache routing hint
   * (SPEC §13): it decides no identity and no money.
   */
  readonly sessionId: string | undefined;
  /** The API key's principal; throws missing_api_key / invalid_api_key, and key_scope_denied outside the key's scope. */
  requireKey(options?: RequireKeyOptions): Promise<Principal>;
  /** Throws admin_required unless the call carries SVC_ADMIN_TOKEN or comes from an operator session. */
  requireAdmin(): void;
  /** The admin (null) or a key's principal; throws when neither (a console session is neither). */
  requireKeyOrAdmin(): Promise<Principal | null>;
  /**
   * Whoever the call's credential names: the admin token, an API key (no scope or rate-limit check:
   * for the account services) or a console session; throws when the call carries none that is valid.
   */
  requireCaller(): Promise<Caller>;
  /** The console session the call carries; throws `session_expired` for anything else. */
  requireSession(): Promise<SessionCaller>;
  /** Whether the call carries a console session credential (valid or not: `requireSession` says). */
  isSession(): boolean;
  /**
   * The key's tokens-per-minute budget, read once per call and shared by the call's
   * `x-ratelimit-*-tokens` headers and the admission of its first model turn; absent when the core
   * has no token limiter. Authenticates like `requireKey`.
   */
  tokenBudget?(): Promise<{ readonly limit: number; readonly remaining: number; readonly resetMs: number }>;
}
