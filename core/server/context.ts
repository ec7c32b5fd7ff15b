import { createHash, timingSafeEqual } from 'node:crypto';
import { newRequestId } from '../ids';
import { trace } from '@opentelemetry/api';
import type { CallContext, ServerMiddlewareCall } from 'nice-grpc-common';
import type { Authenticator } from '../auth/authenticator';
import type { RateLimiter, RateLimitState } from '../limits/rate-limiter';
import type { TokenLimiter } from '../limits/token-limiter';
import type { ConcurrencyLimiter, Slot } from '../limits/concurrency';
import { bearerToken, CLIENT_REQUEST_ID, SESSION_ID_METADATA, sessionToken } from '../auth/context';
import { SESSION_ID_RE } from '../chat/cache';
import type {
  Caller,
  CoreCallContext,
  Principal,
  RequireKeyOptions,
  SessionCaller,
  SessionResolver,
} from '../auth/types';
import { SvcError } from '../errors';
import { isWellFormedKey } from '../auth/key-format';
import { ACCESS_TOKEN_PREFIX, isWellFormedToken } from '../auth/token-format';
import { scopeCovers, type ApiSurface } from '../auth/scope';
import { tagTenant } from '../net/fair-queue';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,100}$/;

function sessionExpired(): SvcError {
  return new SvcError('session_expired', 'Your session has ended. Sign in again to continue.');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Builds `context.svc` for every call: request id, idempotency key, and authentication: lazy by
 * API key (with the per-key rate limit) or by the admin token compared in constant time, and by a
 * console session (`authorization: Session TOKEN`), resolved before the handler runs.
 */
export function createContextMiddleware(deps: {
  authenticator: Authenticator;
  adminToken: string | undefined;
  rateLimiter: RateLimiter;
  /** Model tokens per minute: its state goes in the headers of chat calls (the meter enforces it). */
  tokenLimiter?: TokenLimiter;
  /** Calls in flight per key and account; absent: no limit. */
  concurrency?: ConcurrencyLimiter;
  /** Console sessions; without it no session is known (every `Session` credential is refused). */
  sessions?: SessionResolver;
}) {
  const adminDigest = deps.adminToken === undefined || deps.adminToken === '' ? undefined : digest(deps.adminToken);

  function isAdmin(token: string | undefined): boolean {
    return adminDigest !== undefined && token !== undefined && timingSafeEqual(digest(token), adminDigest);
  }

  return async function* contextMiddleware<Req, Res>(
    call: ServerMiddlewareCall<Req, Res, { svc: CoreCallContext }>,
    context: CallContext,
  ): AsyncGenerator<Res, Res | void, undefined> {
    // The request id is the identity of the call's hold, charge and usage record, so the core
    // mints it for every call: an id the caller chose (an HTTP client's x-request-id, forwarded by
    // an adapter, or a gRPC caller's own) is only kept for correlation. Reusing one must never
    // make a second call collide with the first one's charge.
    const requestId = newRequestId();
    const stated = context.metadata.get(CLIENT_REQUEST_ID) ?? context.metadata.get('x-request-id');
    // A key pasted as an id would be kept in the usage records: such an id is dropped.
    const clientRequestId =
      typeof stated === 'string' && REQUEST_ID_RE.test(stated) && !/svc_[a-z]{2,3}_/.test(stated) ? stated : undefined;
    const idem = context.metadata.get('idempotency-key');
    const clientSession = context.metadata.get(SESSION_ID_METADATA);
    const authHeader = context.metadata.get('authorization');
    const token = bearerToken(typeof authHeader === 'string' ? authHeader : undefined);
    const sessionCredential = sessionToken(typeof authHeader === 'string' ? authHeader : undefined);
    let principal: Promise<Principal> | undefined;
    // A session is resolved now (one indexed read), so that the synchronous `requireAdmin` can
    // admit an operator session; its failure is kept and thrown by whichever check asks.
    let session: SessionCaller | undefined;
    let sessionError: unknown;
    if (sessionCredential !== undefined) {
      try {
        if (deps.sessions === undefined) throw sessionExpired();
        session = await deps.sessions.resolve(sessionCredential);
      } catch (error) {
        sessionError = error;
      }
    }
    const requireSession = (): SessionCaller => {
      if (session !== undefined) return session;
      throw sessionError ?? sessionExpired();
    };

    const authenticate = (): Promise<Principal> => {
      if (token === undefined) {
        return Promise.reject(
          new SvcError(
            'missing_api_key',
            "You didn't provide an API key. Send it as 'Authorization: Bearer svc_sk_...'.",
          ),
        );
      }
      principal ??= deps.authenticator.authenticate(token);
      return principal;
    };

    // One rate-limit token per call, taken once the key is known and allowed on this surface (a
    // refused call spends none); the state goes back in the response headers so the HTTP
    // adapters can send x-ratelimit-* like OpenAI does.
    let limited: Promise<void> | undefined;
    const setHeaders = (kind: 'requests' | 'tokens', state: RateLimitState): void => {
      if (state.limit <= 0) return;
      context.header.set(`x-ratelimit-limit-${kind}`, String(state.limit));
      context.header.set(`x-ratelimit-remaining-${kind}`, String(state.remaining));
      context.header.set(`x-ratelimit-reset-${kind}`, `${Math.max(1, Math.ceil(state.resetMs / 1000))}s`);
    };
    // The one read of the key's token budget in this call (Redis answers it in a round trip).
    let tokens: Promise<RateLimitState> | undefined;
    const tokenLimiter = deps.tokenLimiter;
    const tokenBudget =
      tokenLimiter === undefined
        ? undefined
        : (): Promise<RateLimitState> => (tokens ??= authenticate().then((p) => tokenLimiter.state(p.keyId)));
    const takeRateLimit = (p: Principal, surface: ApiSurface | undefined): Promise<void> => {
      limited ??= Promise.resolve(deps.rateLimiter.take(p.keyId)).then(async (state) => {
        setHeaders('requests', state);
        if (surface === 'chat' && tokenBudget !== undefined) setHeaders('tokens', await tokenBudget());
      });
      return limited;
    };

    // The call's in-flight slot, taken once (the first `requireKey` that asks) and given back
    // exactly once when the call ends, however it ends (the `finally` below).
    let slot: Promise<Slot> | undefined;
    const takeSlot = (p: Principal): Promise<Slot> => {
      const concurrency = deps.concurrency;
      if (concurrency === undefined) return Promise.resolve({ release: () => undefined });
      slot ??= Promise.resolve().then(() =>
        concurrency.acquire({ keyId: p.keyId, accountId: p.accountId, keyLimit: p.concurrentLimit }),
      );
      return slot;
    };

    const requireKey = async (options?: RequireKeyOptions): Promise<Principal> => {
      const p = await authenticate();
      const surface = options?.scope;
      if (surface !== undefined && !scopeCovers(p.scope, surface)) {
        const api = surface === 'chat' ? 'the chat API (chat completions, Responses, models)' : 'the MCP tools';
        throw new SvcError(
          'key_scope_denied',
          `This API key is limited to scope '${p.scope}' and cannot call ${api}. Use a key with scope '${surface}' or 'all'.`,
        );
      }
      await takeRateLimit(p, surface);
      // The call's upstream requests wait for connections in this account's line (fair queue).
      tagTenant(context.signal, p.accountId);
      if (options?.inFlight === true) await takeSlot(p);
      return p;
    };

    const svc: CoreCallContext = {
      requestId,
      clientRequestId,
      idempotencyKey: typeof idem === 'string' && idem !== '' ? idem : undefined,
      sessionId: typeof clientSession === 'string' && SESSION_ID_RE.test(clientSession) ? clientSession : undefined,
      requireKey,
      requireAdmin() {
        if (isAdmin(token)) return;
        if (sessionCredential !== undefined) {
          if (requireSession().role === 'operator') return;
          throw new SvcError('permission_denied', 'Only the operator can do this.');
        }
        // An API key is a known caller without the right (PERMISSION_DENIED); anything else is no
        // valid credential at all (UNAUTHENTICATED).
        if (token !== undefined && (isWellFormedKey(token) || isWellFormedToken(ACCESS_TOKEN_PREFIX, token)))
          throw new SvcError(
            'admin_required',
            'This call needs the operator admin token (SVC_ADMIN_TOKEN); an API key cannot make it',
          );
        throw new SvcError(
          'invalid_admin_token',
          'This call needs the operator admin token (SVC_ADMIN_TOKEN) as "authorization: Bearer TOKEN"',
        );
      },
      async requireKeyOrAdmin() {
        if (isAdmin(token)) return null;
        return authenticate();
      },
      async requireCaller(): Promise<Caller> {
        if (sessionCredential !== undefined) return requireSession();
        if (isAdmin(token)) return { kind: 'admin' };
        return { kind: 'key', principal: await authenticate() };
      },
      requireSession: () => Promise.resolve().then(requireSession),
      isSession: () => sessionCredential !== undefined,
      ...(tokenBudget !== undefined ? { tokenBudget } : {}),
    };
    // In the headers and the trailers: a call that fails may never send its headers, and the
    // adapters answer with this id whatever the outcome.
    context.header.set('x-request-id', requestId);
    context.trailer.set('x-request-id', requestId);
    // The same id as the response header and the ledger entry, so a trace can be found from either.
    const span = trace.getActiveSpan();
    span?.setAttribute('svc.request.id', requestId);
    if (clientRequestId !== undefined) span?.setAttribute('svc.client_request_id', clientRequestId);
    try {
      // Not `{ ...context, svc }`: a spread followed by a key the source lacks gives each object a
      // map of its own in V8's optimised code (docs/performance.md, "Memory, round five").
      return yield* call.next(call.request, Object.assign({}, context, { svc }));
    } finally {
      slot?.then(
        (s) => s.release(),
        () => undefined,
      );
    }
  };
}
