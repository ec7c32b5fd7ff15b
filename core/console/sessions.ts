import { createHash, randomBytes } from 'node:crypto';
import { SvcError } from '../errors';
import type { ConsoleDb } from './tables';

/** A resolved, unexpired session. */
export interface Session {
  readonly tokenHash: string;
  readonly accountId: string | null;
  readonly operator: boolean;
  readonly expiresAt: Date;
  /** What `bind` gave when the session opened (operator sessions), else null. */
  readonly binding: string | null;
}

export interface SessionStore {
  /**
   * Opens a session; returns the token (given to the browser once) and the session. `bind`, given
   * the token's hash, makes what is stored in `binding` (the service ties operator sessions to
   * the admin token with it).
   */
  open(input: {
    accountId: string | null;
    operator: boolean;
    bind?: (tokenHash: string) => string;
  }): Promise<{ token: string; session: Session }>;
  /** Throws `session_expired` for an unknown, malformed or expired token. */
  resolve(token: string | undefined): Promise<Session>;
  close(tokenHash: string): Promise<void>;
  /** Ends every session of an account but `keep` (after a password change). */
  closeOthers(accountId: string, keep: string): Promise<void>;
}

const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function expired(): SvcError {
  return new SvcError('session_expired', 'Your session has ended. Sign in again to continue.');
}

export function createSessionStore(deps: { db: ConsoleDb; now: () => number; ttlMs: number }): SessionStore {
  const { db, now } = deps;
  return {
    async open({ accountId, operator, bind }) {
      const token = randomBytes(32).toString('base64url');
      const at = now();
      const tokenHash = hashToken(token);
      const row = {
        token_hash: tokenHash,
        account_id: accountId,
        operator: operator ? 1 : 0,
        // CSRF tokens are the console adapter's own (derived from the session token there); the
        // column of the table's first version is no longer read.
        csrf_token: '',
        created_at: BigInt(at),
        expires_at: BigInt(at + deps.ttlMs),
        operator_binding: bind === undefined ? null : bind(tokenHash),
      };
      await db.insertInto('console_sessions').values(row).execute();
      // Expired sessions of anyone are swept here rather than by a timer: sign-ins are rare.
      await db.deleteFrom('console_sessions').where('expires_at', '<', BigInt(at)).execute();
      return {
        token,
        session: {
          tokenHash: row.token_hash,
          accountId,
          operator,
          expiresAt: new Date(at + deps.ttlMs),
          binding: row.operator_binding,
        },
      };
    },
    async resolve(token) {
      if (token === undefined || !TOKEN_RE.test(token)) throw expired();
      const row = await db
        .selectFrom('console_sessions')
        .selectAll()
        .where('token_hash', '=', hashToken(token))
        .executeTakeFirst();
      if (row === undefined || Number(row.expires_at) <= now()) throw expired();
      return {
        tokenHash: row.token_hash,
        accountId: row.account_id,
        operator: Number(row.operator) === 1,
        expiresAt: new Date(Number(row.expires_at)),
        binding: row.operator_binding,
      };
    },
    async close(tokenHash) {
      await db.deleteFrom('console_sessions').where('token_hash', '=', tokenHash).execute();
    },
    async closeOthers(accountId, keep) {
      await db
        .deleteFrom('console_sessions')
        .where('account_id', '=', accountId)
        .where('token_hash', '!=', keep)
        .execute();
    },
  };
}
