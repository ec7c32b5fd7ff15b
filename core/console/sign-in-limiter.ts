import { SvcError } from '../errors';
import type { ConsoleDb } from './tables';

export interface SignInLimiter {
  /** Throws `rate_limited` when any subject has too many recent failures. */
  check(subjects: readonly Subject[]): Promise<void>;
  recordFailure(subjects: readonly Subject[]): Promise<void>;
}

/** What failures are counted against, and how many are allowed in the window. */
export interface Subject {
  readonly name: string;
  readonly max: number;
}

/**
 * Counts failed sign-ins in the database, so that every core replica sees the same count and a
 * restart does not reset it. A locked subject is refused before the password is even checked.
 */
export function createSignInLimiter(deps: { db: ConsoleDb; now: () => number; windowMs: number }): SignInLimiter {
  const { db, now, windowMs } = deps;
  return {
    async check(subjects) {
      const since = BigInt(now() - windowMs);
      for (const subject of subjects) {
        const rows = await db
          .selectFrom('console_sign_in_failures')
          .select('created_at')
          .where('subject', '=', subject.name)
          .where('created_at', '>', since)
          .orderBy('created_at', 'desc')
          .limit(subject.max)
          .execute();
        if (rows.length < subject.max) continue;
        // The subject is free again once the oldest of its last `max` failures leaves the window.
        const oldest = Number(rows[rows.length - 1]?.created_at ?? 0n);
        const retryAfter = Math.max(1, Math.ceil((oldest + windowMs - now()) / 1000));
        throw new SvcError(
          'rate_limited',
          `Too many failed sign-in attempts. Try again in ${Math.ceil(retryAfter / 60)} minute(s).`,
          { details: { retry_after_seconds: retryAfter } },
        );
      }
    },
    async recordFailure(subjects) {
      const at = BigInt(now());
      await db
        .insertInto('console_sign_in_failures')
        .values(subjects.map((s) => ({ subject: s.name, created_at: at })))
        .execute();
      await db
        .deleteFrom('console_sign_in_failures')
        .where('created_at', '<', BigInt(now() - windowMs))
        .execute();
    },
  };
}
