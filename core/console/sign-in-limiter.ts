import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { SvcError } from '../errors';
import type { Dialect } from '../store/db';
import type { ConsoleDb } from './tables';

export interface SignInLimiter {
  /**
   * Counts one attempt against every subject before the password is checked, and throws
   * `rate_limited` (counting nothing) when any subject is at its limit. The attempt stays
   * counted as a failure unless `cancel` is called (a right password, or an error that checked
   * nothing).
   */
  reserve(subjects: readonly Subject[]): Promise<Attempt>;
}

export interface Attempt {
  cancel(): Promise<void>;
}

/** What failures are counted against, and how many are allowed in the window. */
export interface Subject {
  readonly name: string;
  readonly max: number;
}

/**
 * Counts sign-in attempts in the database, so that every core replica sees the same count and a
 * restart does not reset it. Counting and recording one attempt is a single step per subject:
 * under MySQL's named lock of the subject (every replica waits for it), under SQLite on the one
 * connection the driver lends to one caller at a time. So of any number of concurrent attempts,
 * exactly as many as the limit allows get to the password check.
 */
export function createSignInLimiter(deps: {
  db: ConsoleDb;
  dialect: Dialect;
  now: () => number;
  windowMs: number;
}): SignInLimiter {
  const { db, now, windowMs } = deps;

  async function refusal(subject: Subject): Promise<SvcError> {
    const rows = await db
      .selectFrom('console_sign_in_failures')
      .select('created_at')
      .where('subject', '=', subject.name)
      .where('created_at', '>', BigInt(now() - windowMs))
      .orderBy('created_at', 'desc')
      .limit(subject.max)
      .execute();
    // The subject is free again once the oldest of its last `max` failures leaves the window.
    const oldest = Number(rows[rows.length - 1]?.created_at ?? BigInt(now()));
    const retryAfter = Math.max(1, Math.ceil((oldest + windowMs - now()) / 1000));
    return new SvcError(
      'rate_limited',
      `Too many failed sign-in attempts. Try again in ${Math.ceil(retryAfter / 60)} minute(s).`,
      { details: { retry_after_seconds: retryAfter } },
    );
  }

  /** Counts and records under the subjects' locks; the subject over its limit, or the new rows. */
  async function record(subjects: readonly Subject[], at: bigint): Promise<Subject | bigint[]> {
    return db.connection().execute(async (conn) => {
      const locks = [...new Set(subjects.map((s) => lockName(s.name)))].sort();
      if (deps.dialect === 'mysql') {
        for (const name of locks) {
          const { rows } = await sql<{ got: number | null }>`SELECT GET_LOCK(${name}, 10) AS got`.execute(conn);
          if (Number(rows[0]?.got) !== 1) {
            await sql`SELECT RELEASE_ALL_LOCKS()`.execute(conn);
            throw new SvcError(
              'rate_limited',
              'The console is busy checking other sign-ins. Try again in a few seconds.',
              {
                details: { retry_after_seconds: 2 },
              },
            );
          }
        }
      }
      try {
        for (const subject of subjects) {
          const { count } = await conn
            .selectFrom('console_sign_in_failures')
            .select((eb) => eb.fn.countAll<number | bigint | string>().as('count'))
            .where('subject', '=', subject.name)
            .where('created_at', '>', at - BigInt(windowMs))
            .executeTakeFirstOrThrow();
          if (Number(count) >= subject.max) return subject;
        }
        const seqs: bigint[] = [];
        for (const subject of subjects) {
          const inserted = await conn
            .insertInto('console_sign_in_failures')
            .values({ subject: subject.name, created_at: at })
            .executeTakeFirstOrThrow();
          if (inserted.insertId === undefined) throw new Error('the database returned no id for a sign-in attempt');
          seqs.push(inserted.insertId);
        }
        return seqs;
      } finally {
        if (deps.dialect === 'mysql') await sql`SELECT RELEASE_ALL_LOCKS()`.execute(conn);
      }
    });
  }

  return {
    async reserve(subjects) {
      const at = BigInt(now());
      await db
        .deleteFrom('console_sign_in_failures')
        .where('created_at', '<', at - BigInt(windowMs))
        .execute();
      const recorded = await record(subjects, at);
      if (!Array.isArray(recorded)) throw await refusal(recorded);
      return {
        async cancel() {
          if (recorded.length > 0)
            await db.deleteFrom('console_sign_in_failures').where('seq', 'in', recorded).execute();
        },
      };
    },
  };
}

/** MySQL lock names are at most 64 characters; a subject (an email) may be longer. */
function lockName(subject: string): string {
  return `svc_sign_in_${createHash('sha256').update(subject).digest('hex').slice(0, 40)}`;
}
