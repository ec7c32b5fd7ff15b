import { sql } from 'kysely';
import { SvcError } from '../errors';
import type { Store } from './db';

/*
 * A store that cannot be reached (MariaDB down, restarting or refusing connections; a SQLite file
 * that cannot be opened or stays locked) is svc's "unavailable, retry" (SPEC §4, issue 48 point 6):
 * `storeUnavailable` is the one place its errors become a domain error, which the error table
 * (core/errors/codes.ts `unavailable`) renders as each wire's 503-class answer with a retry hint.
 */

/** Driver error codes of a connection that failed, was lost or was refused (mysql2, Node's net). */
const MYSQL_UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_SERVER_GONE_ERROR',
  'ER_SERVER_LOST',
]);

/** SQLite's: the file cannot be opened or read, or stays locked past the busy timeout. */
const SQLITE_UNREACHABLE = /^SQLITE_(BUSY|LOCKED|CANTOPEN|IOERR|READONLY_DBMOVED)/;

function isUnreachable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, fatal, name } = error as { code?: unknown; fatal?: unknown; name?: unknown };
  if (typeof code !== 'string') return false;
  if (SQLITE_UNREACHABLE.test(code)) return name === 'SqliteError';
  // mysql2 marks the errors that end a connection `fatal`; a network code alone could be anyone's.
  return MYSQL_UNREACHABLE.has(code) && (fatal === true || code.startsWith('PROTOCOL_') || code.startsWith('ER_'));
}

/** Whether `error` (or an error it wraps) says the store cannot be reached. */
export function isStoreUnreachable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    if (isUnreachable(current)) return true;
    if (current instanceof AggregateError && current.errors.some(isUnreachable)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** The domain error of a store that cannot be reached: `unavailable`, retry in a second. */
export function storeUnavailable(error: unknown): SvcError {
  return new SvcError('unavailable', 'The service cannot reach its database right now; retry in a moment.', {
    details: { reason: 'store_unavailable', retry_after_s: 1 },
    cause: error,
  });
}

/** Whether the store answers a trivial query within `timeoutMs` (the readiness probe). */
export async function storeAnswers(store: Store, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      sql`select 1`.execute(store.db).then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
        timer.unref();
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
