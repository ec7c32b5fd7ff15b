import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { SvcError, invalidArgument } from '../errors';
import { isUniqueViolation } from '../store/db';
import type { ConsoleDb } from './tables';

/** How long the page a create or roll form redirects to may still show the new secret. */
export const REVEAL_WINDOW_MS = 10 * 60_000;
/** How long a submitted form's id is remembered, so that replaying it creates nothing. */
const FORM_MEMORY_MS = 7 * 24 * 3_600_000;
/** How long a second submission waits for the first one of the same form to finish. */
const FIRST_SUBMISSION_WAIT_MS = 10_000;

const FORM_ID_RE = /^[A-Za-z0-9_-]{16,64}$/;

/** A form's random id (made when the page was rendered), or a clear refusal. */
export function checkFormId(formId: string): string {
  if (!FORM_ID_RE.test(formId))
    throw invalidArgument('form_id', 'This form is incomplete. Reload the page and try again.');
  return formId;
}

// The secret is sealed under a key only the browser's session token opens: the core stores only
// the token's digest, so the database alone (a backup, a read replica) never yields a usable key.
function boxKey(sessionToken: string, formId: string): Buffer {
  return createHmac('sha256', sessionToken).update(`svc console reveal ${formId}`).digest();
}

function seal(secret: string, sessionToken: string, formId: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', boxKey(sessionToken, formId), iv);
  const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64url');
}

function unseal(sealed: string, sessionToken: string, formId: string): string {
  const raw = Buffer.from(sealed, 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', boxKey(sessionToken, formId), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/** Where a submitted form stands: new (this call owns it) or already submitted (its key, if made). */
export type Claim = { readonly fresh: true } | { readonly fresh: false; readonly keyId: string };

/**
 * The console's key forms: one key per submitted form, and its secret shown once on the page the
 * form redirects to, to the session that submitted it.
 */
export function createKeyForms(deps: { db: ConsoleDb; now: () => number; sleep?: (ms: number) => Promise<void> }) {
  const { db, now } = deps;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));

  async function keyOf(accountId: string, formId: string): Promise<string | null | undefined> {
    const row = await db
      .selectFrom('console_key_forms')
      .select('key_id')
      .where('account_id', '=', accountId)
      .where('form_id', '=', formId)
      .executeTakeFirst();
    return row === undefined ? undefined : row.key_id;
  }

  return {
    /**
     * Claims the form for this submission. A form submitted before yields its key (waiting a
     * little for a first submission still in flight), so nothing is made twice.
     */
    async claim(accountId: string, formId: string, sessionHash: string): Promise<Claim> {
      const at = now();
      // Old forms are forgotten here rather than by a sweeper; one account's rows stay few.
      await db
        .deleteFrom('console_key_forms')
        .where('account_id', '=', accountId)
        .where('created_at', '<', BigInt(at - FORM_MEMORY_MS))
        .execute();
      try {
        await db
          .insertInto('console_key_forms')
          .values({
            account_id: accountId,
            form_id: formId,
            session_hash: sessionHash,
            key_id: null,
            sealed: null,
            created_at: BigInt(at),
          })
          .execute();
        return { fresh: true };
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
      }
      for (let waited = 0; ; waited += 100) {
        const keyId = await keyOf(accountId, formId);
        if (typeof keyId === 'string') return { fresh: false, keyId };
        // The first submission failed and let the form go: this one may try again.
        if (keyId === undefined) return this.claim(accountId, formId, sessionHash);
        if (waited >= FIRST_SUBMISSION_WAIT_MS)
          throw new SvcError('unavailable', 'This form is still being submitted. Reload the keys page in a moment.');
        await sleep(100);
      }
    },

    /** Lets a form go whose submission was refused, so the corrected form can be sent again. */
    async release(accountId: string, formId: string): Promise<void> {
      await db
        .deleteFrom('console_key_forms')
        .where('account_id', '=', accountId)
        .where('form_id', '=', formId)
        .where('key_id', 'is', null)
        .execute();
    },

    /** Records the key the form made and its secret, sealed under the submitting session. */
    async complete(accountId: string, formId: string, keyId: string, secret: string, sessionToken: string) {
      await db
        .updateTable('console_key_forms')
        .set({ key_id: keyId, sealed: seal(secret, sessionToken, formId) })
        .where('account_id', '=', accountId)
        .where('form_id', '=', formId)
        .execute();
    },

    /**
     * The secret of the key the form made, once: the row is cleared before the secret is returned,
     * so a reload, the back button or a second tab finds it gone.
     */
    async reveal(
      accountId: string,
      formId: string,
      session: { tokenHash: string; token: string },
    ): Promise<{ keyId: string; secret: string }> {
      const gone = new SvcError(
        'not_found',
        'This key was already shown once and is not shown again. If you did not copy it, roll the key or create a new one.',
        { param: 'reveal' },
      );
      if (!FORM_ID_RE.test(formId)) throw gone;
      const row = await db
        .selectFrom('console_key_forms')
        .select(['key_id', 'sealed', 'session_hash', 'created_at'])
        .where('account_id', '=', accountId)
        .where('form_id', '=', formId)
        .executeTakeFirst();
      if (row === undefined || row.key_id === null || row.sealed === null || row.session_hash !== session.tokenHash) throw gone;
      const cleared = await db
        .updateTable('console_key_forms')
        .set({ sealed: null })
        .where('account_id', '=', accountId)
        .where('form_id', '=', formId)
        .where('sealed', '=', row.sealed)
        .executeTakeFirst();
      if (Number(cleared.numUpdatedRows) !== 1) throw gone;
      if (Number(row.created_at) + REVEAL_WINDOW_MS < now()) throw gone;
      return { keyId: row.key_id, secret: unseal(row.sealed, session.token, formId) };
    },
  };
}

export type KeyForms = ReturnType<typeof createKeyForms>;
