import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { SessionCaller } from '../auth/types';

/** The caller's console session, as the context middleware resolved it. */
type Session = SessionCaller;
import { SvcError, invalidArgument, isSvcError } from '../errors';
import type { ApiKeyView, KeyService } from '../keys/service';
import type { SvcConfig } from '../config/types';
import { isUniqueViolation, type Store } from '../store/db';
import type { WalletService } from '../wallet/types';
import { createAccountWithSignIn, listAccounts, setSignIn, type ConsoleAccountView } from './accounts';
import { dummyPassword, hashPassword, verifyPassword } from './passwords';
import { checkFormId, createKeyForms } from './key-forms';
import { createKeyEvents, createdDetail, rolledDetail } from '../keys/events';
import { createSessionStore, type Session as StoredSession } from './sessions';
import { createSignInLimiter, type Subject } from './sign-in-limiter';
import { createWorkGate } from './work-gate';
import { consoleDb } from './tables';
import { checkNewPassword, cleanLabel } from './validate';
import { checkCap } from '../keys/caps';

/** The browser's session: what the core stores of it, and the token the call came with (it opens sealed secrets). */
export interface SessionCall {
  readonly session: Session;
  readonly token: string;
}

/** A session with what the pages show about its owner. */
export interface SessionView {
  readonly accountId: string | null;
  readonly operator: boolean;
  readonly expiresAt: Date;
  readonly accountName: string;
  readonly email: string;
}

export interface ConsoleDeps {
  readonly store: Store;
  readonly config: Pick<SvcConfig, 'models' | 'console'>;
  readonly keys: KeyService;
  readonly wallet: WalletService;
  readonly logger: Logger;
  readonly now: () => number;
  readonly adminToken: string | undefined;
  /** Session lifetime (default 12 hours). */
  readonly sessionTtlMs?: number;
}

const WINDOW_MS = 15 * 60_000;
const MAX_FAILURES_PER_EMAIL = 5;
const MAX_FAILURES_PER_ADDRESS = 20;
const MAX_OPERATOR_FAILURES_PER_ADDRESS = 5;
// Sign-ups count every attempt (not only failures): per email address and per client address.
const MAX_SIGN_UPS_PER_EMAIL = 3;
const MAX_SIGN_UPS_PER_ADDRESS = 10;
const SCRYPT_CONCURRENCY = 2;
const SCRYPT_QUEUE = 32;

function wrongCredentials(): SvcError {
  return new SvcError('invalid_credentials', 'The email address or the password is not correct.');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

function address(value: string): string {
  return value.trim().slice(0, 100) || 'unknown';
}

/**
 * The console's decisions: who signs in, what a session may see and change. Every read and
 * change is scoped to the session's own account; only operator sessions reach other accounts.
 */
export function createConsoleService(deps: ConsoleDeps) {
  const db = consoleDb(deps.store);
  const { now, logger } = deps;
  const sessions = createSessionStore({ db, now, ttlMs: deps.sessionTtlMs ?? 12 * 3_600_000 });
  const limiter = createSignInLimiter({ db, dialect: deps.store.dialect, now, windowMs: WINDOW_MS });
  // Every scrypt the console runs goes through here (sign-in, password change, new accounts).
  const forms = createKeyForms({ db, now });
  const events = createKeyEvents({ store: deps.store, now });
  const scrypts = createWorkGate({ concurrency: SCRYPT_CONCURRENCY, queue: SCRYPT_QUEUE });
  // Verified against when the email is unknown, so the answer takes as long as a wrong password.
  let unknownEmailHash: Promise<string> | undefined;

  // An operator session holds an HMAC of itself under the admin token it was opened with: a
  // restart with another SVC_ADMIN_TOKEN, or none, ends it (a stolen or forgotten operator cookie
  // does not outlive the token it stood for), and the token itself is never stored.
  function operatorBinding(tokenHash: string): string | undefined {
    const token = deps.adminToken;
    if (token === undefined || token === '') return undefined;
    return createHmac('sha256', token).update(`svc console operator session ${tokenHash}`).digest('hex');
  }

  async function resolve(token: string | undefined): Promise<StoredSession> {
    const session = await sessions.resolve(token);
    if (!session.operator) return session;
    const expected = operatorBinding(session.tokenHash);
    if (expected !== undefined && session.binding !== null && sameSecret(session.binding, expected)) return session;
    await sessions.close(session.tokenHash);
    throw new SvcError(
      'session_expired',
      'Your operator session has ended: the operator token changed. Sign in again to continue.',
    );
  }

  /** The session as the context middleware's caller. */
  async function caller(token: string): Promise<SessionCaller> {
    const s = await resolve(token);
    return {
      kind: 'session',
      sessionId: s.tokenHash,
      role: s.operator ? 'operator' : 'user',
      accountId: s.accountId,
      expiresAt: s.expiresAt,
    };
  }

  async function view(s: { accountId: string | null; expiresAt: Date }): Promise<SessionView> {
    const session = { accountId: s.accountId, operator: s.accountId === null, expiresAt: s.expiresAt };
    if (session.accountId === null) return { ...session, accountName: 'Operator', email: '' };
    const row = await db
      .selectFrom('accounts as a')
      .leftJoin('console_credentials as c', 'c.account_id', 'a.id')
      .select(['a.name', 'c.email'])
      .where('a.id', '=', session.accountId)
      .executeTakeFirst();
    return { ...session, accountName: row?.name ?? '', email: row?.email ?? '' };
  }

  function accountOf(session: Session): string {
    if (session.accountId === null) {
      throw new SvcError(
        'permission_denied',
        'The operator has no API keys or wallet of its own: open an account from the Accounts page.',
      );
    }
    return session.accountId;
  }

  /** The account's key; another account's key looks exactly like one that does not exist. */
  async function ownKey(accountId: string, keyId: string): Promise<ApiKeyView> {
    const notFound = new SvcError('not_found', 'There is no such API key in your account.', { param: 'key_id' });
    if (keyId === '' || keyId.length > 40) throw notFound;
    const key = await deps.keys.get(keyId).catch((error: unknown) => {
      if (isSvcError(error) && error.code === 'not_found') return undefined;
      throw error;
    });
    if (key === undefined || key.accountId !== accountId) throw notFound;
    return key;
  }

  async function signedIn(accountId: string | null, operator: boolean) {
    const { token, session } = await sessions.open({
      accountId,
      operator,
      // Without an admin token there is no operator sign-in; '' would match nothing anyway.
      ...(operator ? { bind: (hash: string) => operatorBinding(hash) ?? '' } : {}),
    });
    return { token, session: await view(session) };
  }

  return {
    modelIds: (): string[] => [...deps.config.models.keys()],

    /** The low-balance warning of a user session: the threshold and what is available now. */
    async lowBalance(session: Session): Promise<{ threshold: bigint | null; available: bigint } | undefined> {
      if (session.accountId === null) return undefined;
      const [row, wallet] = await Promise.all([
        db
          .selectFrom('console_settings')
          .select('low_balance_threshold')
          .where('account_id', '=', session.accountId)
          .executeTakeFirst(),
        deps.wallet.get(session.accountId),
      ]);
      const threshold = row?.low_balance_threshold ?? null;
      return { threshold: threshold === null ? null : BigInt(threshold), available: wallet.balance - wallet.held };
    },

    /** Sets (or, with null, removes) the balance below which every page warns. */
    async setLowBalance(session: Session, input: { threshold: bigint | null }): Promise<void> {
      const accountId = accountOf(session);
      checkCap(input.threshold, 'low_balance_threshold');
      const at = BigInt(now());
      const updated = await db
        .updateTable('console_settings')
        .set({ low_balance_threshold: input.threshold, updated_at: at })
        .where('account_id', '=', accountId)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 1) return;
      try {
        await db
          .insertInto('console_settings')
          .values({ account_id: accountId, low_balance_threshold: input.threshold, updated_at: at })
          .execute();
      } catch (error) {
        // Another tab saved at the same moment: this value is the later one.
        if (!isUniqueViolation(error)) throw error;
        await db
          .updateTable('console_settings')
          .set({ low_balance_threshold: input.threshold, updated_at: at })
          .where('account_id', '=', accountId)
          .execute();
      }
    },
    resolve,
    caller,
    view,

    async signIn(input: { email: string; password: string; clientAddress: string }) {
      const email = input.email.trim().toLowerCase().slice(0, 254);
      if (email === '' || input.password === '')
        throw new SvcError('invalid_credentials', 'Enter your email address and your password.');
      const subjects: Subject[] = [
        { name: `email:${email}`, max: MAX_FAILURES_PER_EMAIL },
        { name: `ip:${address(input.clientAddress)}`, max: MAX_FAILURES_PER_ADDRESS },
      ];
      const attempt = await limiter.reserve(subjects);
      let row: { account_id: string; password_hash: string } | undefined;
      let ok: boolean;
      try {
        row = await db
          .selectFrom('console_credentials')
          .select(['account_id', 'password_hash'])
          .where('email', '=', email)
          .executeTakeFirst();
        const stored = row?.password_hash;
        ok = await scrypts.run(async () => {
          unknownEmailHash ??= dummyPassword();
          return verifyPassword(input.password.slice(0, 1000), stored ?? (await unknownEmailHash));
        });
      } catch (error) {
        // Nothing was checked (busy, or the database failed): not a failed password.
        await attempt.cancel();
        throw error;
      }
      if (row === undefined || !ok) {
        logger.info({ address: address(input.clientAddress) }, 'console sign-in failed');
        throw wrongCredentials();
      }
      await attempt.cancel();
      return signedIn(row.account_id, false);
    },

    signUpOpen: (): boolean => deps.config.console?.signup === 'open',

    /**
     * A new account with a console sign-in and an empty wallet (`console.signup: open`). Whether
     * or not the email address is taken, the answer is the same (and takes as long: the password
     * is hashed first either way); nothing is created for a taken one. Every attempt counts
     * towards the limits per email and per client address.
     */
    async signUp(input: { email: string; password: string; clientAddress: string }): Promise<void> {
      if (deps.config.console?.signup !== 'open')
        throw new SvcError('permission_denied', 'Sign-up is closed on this server: ask its operator for an account.');
      const email = input.email.trim().toLowerCase().slice(0, 254);
      if (email === '' || input.password === '')
        throw invalidArgument('email', 'Enter your email address and a password.');
      await limiter.reserve([
        { name: `signup-email:${email}`, max: MAX_SIGN_UPS_PER_EMAIL },
        { name: `signup-ip:${address(input.clientAddress)}`, max: MAX_SIGN_UPS_PER_ADDRESS },
      ]);
      try {
        const account = await scrypts.run(() =>
          createAccountWithSignIn(db, {
            name: email.slice(0, 200),
            email,
            password: input.password.slice(0, 1000),
            now: now(),
          }),
        );
        logger.info({ account: account.id, address: address(input.clientAddress) }, 'console sign-up');
      } catch (error) {
        if (
          isSvcError(error) &&
          error.code === 'invalid_argument' &&
          error.param === 'email' &&
          /already exists/.test(error.message)
        ) {
          logger.info({ address: address(input.clientAddress) }, 'console sign-up for an email address already taken');
          return;
        }
        throw error;
      }
    },

    async signInOperator(input: { adminToken: string; clientAddress: string }) {
      const subjects: Subject[] = [
        { name: `operator:${address(input.clientAddress)}`, max: MAX_OPERATOR_FAILURES_PER_ADDRESS },
      ];
      const attempt = await limiter.reserve(subjects);
      const expected = deps.adminToken;
      if (
        expected === undefined ||
        expected === '' ||
        input.adminToken === '' ||
        !sameSecret(input.adminToken, expected)
      ) {
        logger.info({ address: address(input.clientAddress) }, 'console operator sign-in failed');
        throw new SvcError(
          'invalid_credentials',
          expected === undefined || expected === ''
            ? 'Operator sign-in is off: this server has no SVC_ADMIN_TOKEN.'
            : 'That is not the operator token.',
        );
      }
      await attempt.cancel();
      return signedIn(null, true);
    },

    async signOut(session: Session): Promise<void> {
      await sessions.close(session.sessionId);
    },

    async changePassword(session: Session, input: { current: string; next: string }): Promise<void> {
      const accountId = accountOf(session);
      const row = await db
        .selectFrom('console_credentials')
        .select('password_hash')
        .where('account_id', '=', accountId)
        .executeTakeFirst();
      const stored = row?.password_hash;
      if (stored === undefined || !(await scrypts.run(() => verifyPassword(input.current.slice(0, 1000), stored)))) {
        throw new SvcError('invalid_credentials', 'The current password is not correct.', {
          param: 'current_password',
        });
      }
      const next = checkNewPassword('new_password', input.next);
      const hash = await scrypts.run(() => hashPassword(next));
      await db
        .updateTable('console_credentials')
        .set({ password_hash: hash, updated_at: BigInt(now()) })
        .where('account_id', '=', accountId)
        .execute();
      // Anyone else holding a session (a stolen cookie, another browser) is signed out.
      await sessions.closeOthers(accountId, session.sessionId);
    },

    /**
     * Creates a key from a console form, once per form id: a form submitted again (a double click,
     * a reload, a second tab) creates nothing and answers with the key the first submission made.
     * The secret is not returned: the page the form redirects to reveals it once (`revealKey`).
     */
    async createKey(
      call: SessionCall,
      input: {
        formId: string;
        name: string;
        scope?: string;
        capDaily?: bigint | null;
        capMonthly?: bigint | null;
        capTotal?: bigint | null;
        allowedModels?: readonly string[];
        allowedTools?: readonly string[];
        expiresAt?: number | null;
      },
    ): Promise<{ key: ApiKeyView; replayed: boolean }> {
      const { session } = call;
      const accountId = accountOf(session);
      const formId = checkFormId(input.formId);
      // Checked before the form is claimed, so a refused form can be corrected and sent again.
      const name = cleanLabel(input.name);
      checkCap(input.capDaily, 'cap_daily');
      checkCap(input.capMonthly, 'cap_monthly');
      checkCap(input.capTotal, 'cap_total');
      if (input.expiresAt !== undefined && input.expiresAt !== null && input.expiresAt <= now())
        throw invalidArgument('expires_at', 'The expiry must be a time in the future.');
      const claim = await forms.claim(accountId, formId, session.sessionId);
      if (!claim.fresh) return { key: await ownKey(accountId, claim.keyId), replayed: true };
      let created: { key: ApiKeyView; secret: string };
      try {
        created = await deps.keys.create({
          accountId,
          name,
          ...(input.scope === undefined ? {} : { scope: input.scope }),
          capDaily: input.capDaily ?? null,
          capMonthly: input.capMonthly ?? null,
          capTotal: input.capTotal ?? null,
          allowedModels: input.allowedModels ?? null,
          allowedTools: input.allowedTools ?? null,
          expiresAt: input.expiresAt ?? null,
        });
      } catch (error) {
        await forms.release(accountId, formId);
        throw error;
      }
      await forms.complete(accountId, formId, created.key.id, created.secret, call.token);
      const k = created.key;
      await events.record(k, 'created', createdDetail(k));
      return { key: k, replayed: false };
    },

    /** The secret of the key a form made, once, to the session that submitted the form. */
    async revealKey(call: SessionCall, formId: string): Promise<{ key: ApiKeyView; secret: string }> {
      const accountId = accountOf(call.session);
      const { keyId, secret } = await forms.reveal(accountId, formId, {
        tokenHash: call.session.sessionId,
        token: call.token,
      });
      return { key: await ownKey(accountId, keyId), secret };
    },

    /**
     * Rolls a key from a console form, once per form id: a new secret (revealed once like a new
     * key's); the old one keeps working for `graceMs`.
     */
    async rollKey(
      call: SessionCall,
      input: { formId: string; keyId: string; graceMs: number },
    ): Promise<{ key: ApiKeyView; previous: ApiKeyView; replayed: boolean }> {
      const { session } = call;
      const accountId = accountOf(session);
      const formId = checkFormId(input.formId);
      const old = await ownKey(accountId, input.keyId);
      const claim = await forms.claim(accountId, formId, session.sessionId);
      if (!claim.fresh) {
        return { key: await ownKey(accountId, claim.keyId), previous: await ownKey(accountId, old.id), replayed: true };
      }
      let rolled: { key: ApiKeyView; secret: string; previous: ApiKeyView };
      try {
        rolled = await deps.keys.roll(old.id, { graceMs: input.graceMs });
      } catch (error) {
        await forms.release(accountId, formId);
        throw error;
      }
      await forms.complete(accountId, formId, rolled.key.id, rolled.secret, call.token);
      await events.record(rolled.key, 'rolled', rolledDetail(rolled.key, rolled.previous));
      return { key: rolled.key, previous: rolled.previous, replayed: false };
    },






    /** The accounts' console sign-ins, for AccountService (which checks who may ask). */
    signIns: {
      createWithSignIn: (input: { name: string; email: string; password: string }): Promise<ConsoleAccountView> =>
        scrypts.run(() => createAccountWithSignIn(db, { ...input, now: now() })),
      setSignIn: (input: { accountId: string; email: string; password: string }) =>
        scrypts.run(() => setSignIn(db, { ...input, now: now() })),
      list: (input: { query: string; pageToken: string }) =>
        listAccounts(db, { limit: 50, query: input.query, pageToken: input.pageToken }),
      async emailOf(accountId: string): Promise<string> {
        const row = await db
          .selectFrom('console_credentials')
          .select('email')
          .where('account_id', '=', accountId)
          .executeTakeFirst();
        return row?.email ?? '';
      },
    },

  };
}

export type ConsoleService = ReturnType<typeof createConsoleService>;
