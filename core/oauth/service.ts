import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { DEFAULT_OAUTH } from '../config/defaults';
import { SvcError } from '../errors';
import { newId } from '../ids';
import { hashKey } from '../auth/key-format';
import type { Store } from '../store/db';
import {
  CODE_PREFIX,
  generateToken,
  isWellFormedToken,
  REFRESH_TOKEN_PREFIX,
  ACCESS_TOKEN_PREFIX,
} from '../auth/token-format';
import { OAUTH_SCOPE, oauthError, type OAuthErrorCode } from './oauth-error';
import type { GuardedFetchOptions } from '../net/guarded-fetch';
import { isDocumentClientId, loadClientDocument, type DocumentFetcher } from './metadata-document';
import { checkRedirectUris, redirectMatches } from './redirect';
import { oauthDb, type OAuthDb } from './tables';

export interface OAuthClient {
  readonly clientId: string;
  readonly clientName: string;
  readonly redirectUris: readonly string[];
  readonly registration: 'dynamic' | 'metadata_document';
  readonly createdAt: Date;
}

export interface AuthorizationParams {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly responseType: string;
  readonly scope: string;
  readonly codeChallenge: string;
  readonly codeChallengeMethod: string;
  readonly resource: string;
}

/** What the consent page needs, or the error to send back to the (trusted) redirect URI. */
export interface AuthorizationCheck {
  readonly client: OAuthClient;
  readonly scope: string;
  readonly error?: { readonly code: OAuthErrorCode; readonly description: string };
}

export interface TokenRequest {
  readonly grantType: string;
  readonly code: string;
  readonly redirectUri: string;
  readonly clientId: string;
  readonly codeVerifier: string;
  readonly refreshToken: string;
  readonly resource: string;
}

export interface TokenPair {
  readonly accessToken: string;
  readonly refreshToken: string;
  readonly expiresIn: number;
  readonly scope: string;
}

export interface ConnectedApp {
  readonly grantId: string;
  readonly clientId: string;
  readonly clientName: string;
  readonly scope: string;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | undefined;
}

export interface OAuthDeps {
  readonly store: Store;
  readonly logger: Logger;
  readonly now: () => number;
  /** Called with a grant's id when it is revoked, so the authenticator drops its cached tokens. */
  readonly onRevoke?: (grantId: string) => void;
  /** Authorization code lifetime (default 60 s: the client exchanges it at once). */
  readonly codeTtlMs?: number;
  /** Access token lifetime (default 1 hour). */
  readonly accessTtlMs?: number;
  /** Refresh token lifetime (default 30 days; each rotation starts a new one). */
  readonly refreshTtlMs?: number;
  /** How long a fetched Client ID Metadata Document is trusted (default 1 hour). */
  readonly documentTtlMs?: number;
  /**
   * Test setups only (`oauth.insecure_metadata_documents`): fetch metadata documents over http and
   * from loopback or private addresses. Never in production: it reopens SSRF.
   */
  readonly insecureMetadataDocuments?: boolean;
  readonly fetchDocument?: DocumentFetcher;
  /** Tests: the guarded fetcher's options (a resolver, a shorter deadline). */
  readonly documentFetchOptions?: GuardedFetchOptions;
  /** Open registration's limits (`oauth.registrations_*`); see DEFAULT_REGISTRATION_LIMITS. */
  readonly registrationLimits?: RegistrationLimits;
}

/** How many anonymous client registrations are accepted (each process counts its own). */
export interface RegistrationLimits {
  /** From one client address per hour. */
  readonly perAddressPerHour: number;
  /** From everyone together per minute: the small global budget. */
  readonly perMinute: number;
}

export const DEFAULT_REGISTRATION_LIMITS: RegistrationLimits = {
  perAddressPerHour: DEFAULT_OAUTH.registrationsPerAddressPerHour,
  perMinute: DEFAULT_OAUTH.registrationsPerMinute,
};

/** A dynamically registered client that has no grant this long after it registered is deleted. */
export const UNUSED_CLIENT_TTL_MS = 86_400_000;
/** Client addresses remembered at most (the oldest are forgotten beyond it). */
const MAX_TRACKED_ADDRESSES = 10_000;

const CHALLENGE_RE = /^[A-Za-z0-9_-]{43}$/;
const VERIFIER_RE = /^[A-Za-z0-9._~-]{43,128}$/;

function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

function sameText(a: string, b: string): boolean {
  const d = (v: string): Buffer => createHash('sha256').update(v).digest();
  return timingSafeEqual(d(a), d(b));
}

function clientOf(row: {
  client_id: string;
  client_name: string;
  redirect_uris: string;
  registration: string;
  created_at: bigint;
}): OAuthClient {
  return {
    clientId: row.client_id,
    clientName: row.client_name,
    redirectUris: JSON.parse(row.redirect_uris) as string[],
    registration: row.registration === 'metadata_document' ? 'metadata_document' : 'dynamic',
    createdAt: new Date(Number(row.created_at)),
  };
}

/** A name to show on the consent page: no control or format characters (bidi overrides included). */
function cleanName(name: string, fallback: string): string {
  const clean = name
    .replace(/[\p{Cc}\p{Cf}]/gu, '')
    .trim()
    .slice(0, 100);
  return clean === '' ? fallback : clean;
}

function scopeOf(requested: string): string | undefined {
  const words = requested.split(' ').filter((w) => w !== '');
  if (words.length === 0) return OAUTH_SCOPE;
  return words.every((w) => w === OAUTH_SCOPE) ? OAUTH_SCOPE : undefined;
}

/**
 * The authorization server's decisions (SPEC §8): client registration, consent, single-use PKCE
 * codes, access and refresh tokens with rotation, revocation. Only digests of codes and tokens
 * are stored; a token acts for its account like a `tools`-scoped key (see `lookupAccessToken`).
 */
export function createOAuthService(deps: OAuthDeps) {
  const db: OAuthDb = oauthDb(deps.store);
  const { now, logger } = deps;
  const codeTtl = deps.codeTtlMs ?? 60_000;
  const accessTtl = deps.accessTtlMs ?? 3_600_000;
  const refreshTtl = deps.refreshTtlMs ?? 30 * 86_400_000;
  const documentTtl = deps.documentTtlMs ?? 3_600_000;
  const insecureDocuments = deps.insecureMetadataDocuments === true;
  const registrationGate = createRegistrationGate(deps.registrationLimits ?? DEFAULT_REGISTRATION_LIMITS);
  let lastSweep = 0;

  async function findClient(clientId: string): Promise<OAuthClient | undefined> {
    if (clientId === '' || clientId.length > 255) return undefined;
    const row = await db.selectFrom('oauth_clients').selectAll().where('client_id', '=', clientId).executeTakeFirst();
    if (!isDocumentClientId(clientId, insecureDocuments)) return row === undefined ? undefined : clientOf(row);
    if (row !== undefined && Number(row.created_at) > now() - documentTtl) return clientOf(row);
    // A Client ID Metadata Document: (re)read, then kept for the consent page and later requests.
    const doc = await loadClientDocument(clientId, {
      insecure: insecureDocuments,
      logger,
      ...(deps.fetchDocument === undefined ? {} : { fetch: deps.fetchDocument }),
      ...(deps.documentFetchOptions === undefined ? {} : { fetchOptions: deps.documentFetchOptions }),
    });
    const fresh = {
      client_id: clientId,
      client_name: cleanName(doc.clientName, new URL(clientId).host),
      redirect_uris: JSON.stringify(doc.redirectUris),
      registration: 'metadata_document',
      created_at: BigInt(now()),
    };
    await db.transaction().execute(async (trx) => {
      await trx.deleteFrom('oauth_clients').where('client_id', '=', clientId).execute();
      await trx.insertInto('oauth_clients').values(fresh).execute();
    });
    return clientOf(fresh);
  }

  /**
   * Deletes dynamically registered clients that got no grant within a day (and have no code being
   * exchanged), at most once a minute: open registration must not grow the table without bound.
   */
  async function sweepUnusedClients(at: number): Promise<void> {
    if (at - lastSweep < 60_000) return;
    lastSweep = at;
    await db
      .deleteFrom('oauth_clients')
      .where('registration', '=', 'dynamic')
      .where('created_at', '<', BigInt(at - UNUSED_CLIENT_TTL_MS))
      .where('client_id', 'not in', db.selectFrom('oauth_grants').select('client_id'))
      .where(
        'client_id',
        'not in',
        db.selectFrom('oauth_codes').select('client_id').where('expires_at', '>', BigInt(at)),
      )
      .execute();
  }

  async function revokeGrant(grantId: string): Promise<void> {
    const at = BigInt(now());
    await db.transaction().execute(async (trx) => {
      await trx
        .updateTable('oauth_grants')
        .set({ revoked_at: at })
        .where('id', '=', grantId)
        .where('revoked_at', 'is', null)
        .execute();
      await trx
        .updateTable('oauth_tokens')
        .set({ revoked_at: at })
        .where('grant_id', '=', grantId)
        .where('revoked_at', 'is', null)
        .execute();
    });
    deps.onRevoke?.(grantId);
  }

  /** A new access and refresh token for a grant, written with `trx`. */
  async function issue(trx: OAuthDb, grantId: string, scope: string): Promise<TokenPair> {
    const at = now();
    const accessToken = generateToken(ACCESS_TOKEN_PREFIX);
    const refreshToken = generateToken(REFRESH_TOKEN_PREFIX);
    await trx
      .insertInto('oauth_tokens')
      .values([
        {
          token_hash: hashKey(accessToken),
          grant_id: grantId,
          kind: 'access',
          expires_at: BigInt(at + accessTtl),
          revoked_at: null,
          created_at: BigInt(at),
        },
        {
          token_hash: hashKey(refreshToken),
          grant_id: grantId,
          kind: 'refresh',
          expires_at: BigInt(at + refreshTtl),
          revoked_at: null,
          created_at: BigInt(at),
        },
      ])
      .execute();
    // Tokens a day past their expiry are swept here rather than by a timer (a refused token reads
    // the same whether its row is gone or expired).
    await trx
      .deleteFrom('oauth_tokens')
      .where('expires_at', '<', BigInt(at - 86_400_000))
      .execute();
    return { accessToken, refreshToken, expiresIn: Math.floor(accessTtl / 1000), scope };
  }

  async function checkAuthorization(params: AuthorizationParams): Promise<AuthorizationCheck> {
    const client = await findClient(params.clientId);
    // Until the client and its redirect URI are known, an error must not be sent to the URI
    // (an open redirector): the page shows it instead.
    if (client === undefined)
      throw oauthError(
        'invalid_client',
        'This app is not registered with this service (unknown client_id).',
        'client_id',
      );
    if (params.redirectUri === '' && client.redirectUris.length !== 1)
      throw oauthError('invalid_request', 'The request names no redirect_uri.', 'redirect_uri');
    const redirectUri = params.redirectUri === '' ? (client.redirectUris[0] ?? '') : params.redirectUri;
    if (!client.redirectUris.some((registered) => redirectMatches(registered, redirectUri)))
      throw oauthError(
        'invalid_request',
        'The redirect_uri is not one this app registered, so the sign-in cannot go back to it.',
        'redirect_uri',
      );
    const fail = (code: OAuthErrorCode, description: string): AuthorizationCheck => ({
      client,
      scope: OAUTH_SCOPE,
      error: { code, description },
    });
    if (params.responseType !== 'code')
      return fail('unsupported_response_type', "Only response_type 'code' is supported.");
    if (params.codeChallenge === '' || params.codeChallengeMethod !== 'S256')
      return fail('invalid_request', 'PKCE is required: send code_challenge with code_challenge_method S256.');
    if (!CHALLENGE_RE.test(params.codeChallenge))
      return fail('invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier.');
    const scope = scopeOf(params.scope);
    if (scope === undefined) return fail('invalid_scope', `The only scope is '${OAUTH_SCOPE}'.`);
    return { client, scope };
  }

  return {
    findClient,

    async registerClient(input: {
      redirectUris: readonly string[];
      clientName: string;
      tokenEndpointAuthMethod: string;
      grantTypes: readonly string[];
      responseTypes: readonly string[];
      scope: string;
      /** The caller's address, as the adapter that saw its socket states it (see core/auth/client-address.ts). */
      clientAddress: string;
    }): Promise<OAuthClient> {
      const uris = checkRedirectUris(input.redirectUris);
      const method = input.tokenEndpointAuthMethod;
      if (method !== '' && method !== 'none')
        throw oauthError(
          'invalid_client_metadata',
          "Only public clients are supported: token_endpoint_auth_method must be 'none' (PKCE protects the code).",
          'token_endpoint_auth_method',
        );
      const grants = input.grantTypes.filter((g) => g !== 'authorization_code' && g !== 'refresh_token');
      if (grants.length > 0)
        throw oauthError(
          'invalid_client_metadata',
          `Unsupported grant_types: ${grants.join(', ').slice(0, 100)} (supported: authorization_code, refresh_token).`,
          'grant_types',
        );
      if (input.responseTypes.some((r) => r !== 'code'))
        throw oauthError('invalid_client_metadata', "The only response_types value is 'code'.", 'response_types');
      if (input.scope !== '' && scopeOf(input.scope) === undefined)
        throw oauthError('invalid_client_metadata', `The only scope is '${OAUTH_SCOPE}'.`, 'scope');
      const name = cleanName(input.clientName, 'Unnamed app');
      // Registration needs no credential (RFC 7591 open registration), so it is bounded per
      // client address and, apart from that, by a small budget for everyone.
      const at = now();
      registrationGate.admit(input.clientAddress.trim().slice(0, 100) || 'unknown', at);
      await sweepUnusedClients(at);
      const row = {
        client_id: newId('oac'),
        client_name: name,
        redirect_uris: JSON.stringify(uris),
        registration: 'dynamic',
        created_at: BigInt(at),
      };
      await db.insertInto('oauth_clients').values(row).execute();
      logger.info({ clientId: row.client_id }, 'oauth client registered');
      return clientOf(row);
    },

    checkAuthorization,

    /** The signed-in account's consent: a code for the client (after the same checks as the page). */
    async approve(accountId: string, params: AuthorizationParams): Promise<string> {
      const check = await checkAuthorization(params);
      if (check.error !== undefined) throw oauthError(check.error.code, check.error.description);
      const code = generateToken(CODE_PREFIX);
      const at = now();
      await db
        .insertInto('oauth_codes')
        .values({
          code_hash: hashKey(code),
          client_id: check.client.clientId,
          account_id: accountId,
          redirect_uri: params.redirectUri === '' ? (check.client.redirectUris[0] ?? '') : params.redirectUri,
          code_challenge: params.codeChallenge,
          scope: check.scope,
          resource: params.resource,
          expires_at: BigInt(at + codeTtl),
          used_at: null,
          grant_id: null,
          created_at: BigInt(at),
        })
        .execute();
      // Old codes are swept here rather than by a timer: consents are rare.
      await db
        .deleteFrom('oauth_codes')
        .where('expires_at', '<', BigInt(at - 86_400_000))
        .execute();
      return code;
    },

    async exchange(request: TokenRequest): Promise<TokenPair> {
      if (request.grantType === 'authorization_code') return exchangeCode(request);
      if (request.grantType === 'refresh_token') return refresh(request);
      if (request.grantType === '') throw oauthError('invalid_request', 'grant_type is required.', 'grant_type');
      throw oauthError(
        'unsupported_grant_type',
        'Supported grant types: authorization_code, refresh_token.',
        'grant_type',
      );
    },

    async revokeToken(token: string, clientId: string): Promise<void> {
      const access = isWellFormedToken(ACCESS_TOKEN_PREFIX, token);
      if (!access && !isWellFormedToken(REFRESH_TOKEN_PREFIX, token)) return;
      const row = await db
        .selectFrom('oauth_tokens as t')
        .innerJoin('oauth_grants as g', 'g.id', 't.grant_id')
        .select(['t.token_hash', 't.grant_id', 'g.client_id'])
        .where('t.token_hash', '=', hashKey(token))
        .executeTakeFirst();
      // RFC 7009: an unknown token, or another client's, is answered like a revoked one.
      if (row === undefined || (clientId !== '' && clientId !== row.client_id)) return;
      if (!access) return revokeGrant(row.grant_id);
      await db
        .updateTable('oauth_tokens')
        .set({ revoked_at: BigInt(now()) })
        .where('token_hash', '=', row.token_hash)
        .execute();
      deps.onRevoke?.(row.grant_id);
    },

    async listApps(accountId: string): Promise<ConnectedApp[]> {
      const rows = await db
        .selectFrom('oauth_grants as g')
        .leftJoin('oauth_clients as c', 'c.client_id', 'g.client_id')
        .select(['g.id', 'g.client_id', 'c.client_name', 'g.scope', 'g.created_at', 'g.last_used_at'])
        .where('g.account_id', '=', accountId)
        .where('g.revoked_at', 'is', null)
        .orderBy('g.created_at', 'desc')
        .limit(200)
        .execute();
      return rows.map((r) => ({
        grantId: r.id,
        clientId: r.client_id,
        clientName: r.client_name ?? r.client_id,
        scope: r.scope,
        createdAt: new Date(Number(r.created_at)),
        lastUsedAt: r.last_used_at === null ? undefined : new Date(Number(r.last_used_at)),
      }));
    },

    async revokeApp(accountId: string, grantId: string): Promise<void> {
      const notFound = new SvcError('not_found', 'There is no such connected app in your account.', {
        param: 'grant_id',
      });
      if (grantId === '' || grantId.length > 40) throw notFound;
      const row = await db
        .selectFrom('oauth_grants')
        .select(['account_id'])
        .where('id', '=', grantId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      // Another account's grant looks exactly like one that does not exist.
      if (row === undefined || row.account_id !== accountId) throw notFound;
      await revokeGrant(grantId);
    },
  };

  async function exchangeCode(request: TokenRequest): Promise<TokenPair> {
    if (request.code === '') throw oauthError('invalid_request', 'code is required.', 'code');
    if (request.clientId === '') throw oauthError('invalid_request', 'client_id is required.', 'client_id');
    if (request.codeVerifier === '')
      throw oauthError('invalid_request', 'code_verifier is required (PKCE).', 'code_verifier');
    const invalid = (why: string): SvcError => oauthError('invalid_grant', why, 'code');
    if (!isWellFormedToken(CODE_PREFIX, request.code)) throw invalid('The authorization code is not valid.');
    const row = await db
      .selectFrom('oauth_codes')
      .selectAll()
      .where('code_hash', '=', hashKey(request.code))
      .executeTakeFirst();
    if (row === undefined) throw invalid('The authorization code is not valid.');
    if (row.used_at !== null) {
      // A code used twice was stolen or replayed: what it already granted is withdrawn (RFC 6749 §4.1.2).
      if (row.grant_id !== null) await revokeGrant(row.grant_id);
      throw invalid('The authorization code was already used; the tokens issued for it are revoked.');
    }
    if (Number(row.expires_at) <= now()) throw invalid('The authorization code has expired. Sign in again.');
    if (request.clientId !== row.client_id)
      throw oauthError('invalid_grant', 'The authorization code was issued to another client.', 'client_id');
    if (request.redirectUri !== row.redirect_uri)
      throw oauthError(
        'invalid_grant',
        'redirect_uri does not match the one of the authorization request.',
        'redirect_uri',
      );
    if (!VERIFIER_RE.test(request.codeVerifier) || !sameText(s256(request.codeVerifier), row.code_challenge))
      throw oauthError('invalid_grant', 'The PKCE code_verifier does not match the code_challenge.', 'code_verifier');
    if (request.resource !== '' && row.resource !== '' && request.resource !== row.resource)
      throw oauthError('invalid_grant', 'resource does not match the one of the authorization request.', 'resource');
    const grantId = newId('oag');
    const at = BigInt(now());
    return db.transaction().execute(async (trx) => {
      const used = await trx
        .updateTable('oauth_codes')
        .set({ used_at: at, grant_id: grantId })
        .where('code_hash', '=', row.code_hash)
        .where('used_at', 'is', null)
        .executeTakeFirst();
      // Two exchanges at once: only one wins.
      if (used.numUpdatedRows !== 1n) throw invalid('The authorization code was already used.');
      await trx
        .insertInto('oauth_grants')
        .values({
          id: grantId,
          account_id: row.account_id,
          client_id: row.client_id,
          scope: row.scope,
          created_at: at,
          last_used_at: null,
          revoked_at: null,
        })
        .execute();
      return issue(trx, grantId, row.scope);
    });
  }

  async function refresh(request: TokenRequest): Promise<TokenPair> {
    if (request.refreshToken === '') throw oauthError('invalid_request', 'refresh_token is required.', 'refresh_token');
    if (request.clientId === '') throw oauthError('invalid_request', 'client_id is required.', 'client_id');
    const invalid = (why: string): SvcError => oauthError('invalid_grant', why, 'refresh_token');
    if (!isWellFormedToken(REFRESH_TOKEN_PREFIX, request.refreshToken))
      throw invalid('The refresh token is not valid.');
    const row = await db
      .selectFrom('oauth_tokens as t')
      .innerJoin('oauth_grants as g', 'g.id', 't.grant_id')
      .select(['t.token_hash', 't.grant_id', 't.expires_at', 't.revoked_at', 'g.client_id', 'g.scope'])
      .select('g.revoked_at as grant_revoked_at')
      .where('t.token_hash', '=', hashKey(request.refreshToken))
      .where('t.kind', '=', 'refresh')
      .executeTakeFirst();
    if (row === undefined || row.grant_revoked_at !== null) throw invalid('The refresh token is not valid.');
    if (request.clientId !== row.client_id) throw invalid('The refresh token was issued to another client.');
    if (row.revoked_at !== null) {
      // A rotated token used again: one of its two holders is not the client. Nobody keeps the grant.
      await revokeGrant(row.grant_id);
      throw invalid('The refresh token was already used; the app must be authorized again.');
    }
    if (Number(row.expires_at) <= now()) throw invalid('The refresh token has expired. Sign in again.');
    const at = BigInt(now());
    const pair = await db.transaction().execute(async (trx) => {
      const rotated = await trx
        .updateTable('oauth_tokens')
        .set({ revoked_at: at })
        .where('token_hash', '=', row.token_hash)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      if (rotated.numUpdatedRows !== 1n) return undefined;
      return issue(trx, row.grant_id, row.scope);
    });
    if (pair === undefined) {
      await revokeGrant(row.grant_id);
      throw invalid('The refresh token was already used; the app must be authorized again.');
    }
    return pair;
  }
}

export type OAuthService = ReturnType<typeof createOAuthService>;

/**
 * Open registration's two limits, kept apart: an address over its own hourly limit is refused
 * without spending the global budget, so one caller can never exhaust everyone's; the global
 * per-minute budget bounds what many addresses together can add. In memory, per process.
 */
function createRegistrationGate(limits: RegistrationLimits) {
  const byAddress = new Map<string, number[]>();
  const everyone: number[] = [];
  const refuse = (message: string, retryAfterS: number): never => {
    throw new SvcError('rate_limited', message, { details: { retry_after_s: retryAfterS } });
  };
  return {
    admit(address: string, at: number): void {
      const recent = (byAddress.get(address) ?? []).filter((t) => t > at - 3_600_000);
      if (recent.length >= limits.perAddressPerHour) {
        byAddress.set(address, recent);
        refuse(
          `Too many client registrations from this address (at most ${limits.perAddressPerHour} an hour); reuse the client_id you were given.`,
          Math.max(1, Math.ceil(((recent[0] ?? at) + 3_600_000 - at) / 1000)),
        );
      }
      while (everyone.length > 0 && (everyone[0] ?? 0) <= at - 60_000) everyone.shift();
      if (everyone.length >= limits.perMinute)
        refuse('Too many client registrations just now; try again in a minute.', 60);
      everyone.push(at);
      recent.push(at);
      byAddress.delete(address);
      byAddress.set(address, recent);
      // The map keeps insertion order: the least recently registering addresses go first.
      while (byAddress.size > MAX_TRACKED_ADDRESSES) {
        const oldest = byAddress.keys().next().value;
        if (oldest === undefined) break;
        byAddress.delete(oldest);
      }
    },
  };
}
