import type { AccessTokenRecord, AccessTokens } from '../auth/authenticator';
import type { Store } from '../store/db';
import { OAUTH_SCOPE } from './oauth-error';
import { oauthDb } from './tables';

/**
 * Resolves an access token's digest to the account it acts for, exactly like a `tools`-scoped
 * key: the grant's id stands for the key id and the lineage (usage records, rate limits, traces).
 */
export async function lookupAccessToken(store: Store, hash: string): Promise<AccessTokenRecord | null> {
  const row = await oauthDb(store)
    .selectFrom('oauth_tokens as t')
    .innerJoin('oauth_grants as g', 'g.id', 't.grant_id')
    .select(['t.expires_at', 't.revoked_at', 'g.id', 'g.account_id', 'g.scope'])
    .select('g.revoked_at as grant_revoked_at')
    .where('t.token_hash', '=', hash)
    .where('t.kind', '=', 'access')
    .executeTakeFirst();
  if (row === undefined || row.revoked_at !== null || row.grant_revoked_at !== null) return null;
  // Grants are only ever made for the tools scope; anything else is a damaged row.
  if (row.scope !== OAUTH_SCOPE) return null;
  return {
    principal: {
      accountId: row.account_id,
      keyId: row.id,
      scope: 'tools',
      manage: false,
      lineageId: row.id,
      capped: false,
    },
    expiresAt: Number(row.expires_at),
  };
}

/** Records when a grant was last used (shown on the console's keys page). */
export async function touchGrant(store: Store, grantId: string, at: number): Promise<void> {
  await oauthDb(store)
    .updateTable('oauth_grants')
    .set({ last_used_at: BigInt(at) })
    .where('id', '=', grantId)
    .execute();
}

/** The access tokens of `store`, for the authenticator (`createAuthenticator({ accessTokens })`). */
export function oauthAccessTokens(store: Store): AccessTokens {
  return {
    lookup: (hash) => lookupAccessToken(store, hash),
    touch: (grantId, at) => touchGrant(store, grantId, at),
  };
}
