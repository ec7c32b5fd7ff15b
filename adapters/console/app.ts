import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import { SvcError, isSvcError } from '../../core';
import { callCore, type CallMeta } from '../http/core-client';
import { requestIdMiddleware } from '../http/request';
import type { AdapterDeps, AdapterState } from '../http/types';
import { CONSOLE_CSS, CONSOLE_JS } from './assets';
import {
  MAX_FORM_BYTES,
  clientAddress,
  done,
  formOf,
  langOf,
  meta,
  nextOf,
  noticeOf,
  refusal,
  seeOther,
  send,
  signedOf,
  statusOf,
  tr,
  type Signed,
} from './context';
import { field, readCookies, readForm, setCookie, type Form } from './forms';
import type { Notice } from './layout';
import {
  actionOf,
  form,
  getOnly,
  locale,
  notFound,
  pageOf,
  refusals,
  securityHeaders,
  sessionCookie,
  sessionCookieCsrf,
  sessionCsrf,
  signedIn,
  signInFormCsrf,
  switchLanguage,
} from './middleware';
import { changePassword, showAccount } from './pages/account';
import {
  accountPage as operatorAccountPage,
  accountsPage,
  topUpConfirmPage,
  type ConsoleAccount,
} from './pages/accounts';
import { answerAuthorize, showAuthorize } from './pages/authorize';
import { showConnect } from './pages/connect';
import {
  confirmRevoke,
  createKey,
  editKey,
  revoke,
  revokeApp,
  rollKey,
  showKey,
  showKeys,
  updateCaps,
} from './pages/keys';
import { parseAmount } from './numbers';
import { expiredSignIn, expiredSignUp, messagePage, showSignIn, showSignUp, signIn, signOut, signUp } from './pages/sign-in';
import { showUsage, usageCsv } from './pages/usage';
import { showPrices } from './pages/prices';
import { setLowBalance, showWallet, startTopUp } from './pages/wallet';
import { paymentReturn } from './pages/payments';
import { toman, when } from './format';
import { CSRF_COOKIE, SESSION_COOKIE, clearSession, csrfFailed, csrfOf, same, sessionToken, signInCsrf } from './session';

/** The most one console top-up credits. */
const MAX_CONSOLE_TOP_UP = 1_000_000_000_000n;


/**
 * The web console, mounted at `/console`: server-rendered pages over the core's ConsoleService.
 * The session lives in an HttpOnly, SameSite=Strict cookie and goes to the core as the caller
 * (`authorization: Session TOKEN`); every form carries a CSRF token derived from it, which this
 * adapter checks before calling the core (the sign-in forms, before any session exists, use a
 * double-submit cookie).
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core } = deps;
  // ---- sign-in and sign-out ----

  // ---- pages of a signed-in account ----

  // ---- OAuth: sign-in and consent for an MCP client (the core decides; see adapters/oauth) ----

  // ---- the operator's pages ----

  async function accounts(
    ctx: Context,
    s: Signed,
    extra: { notice?: Notice; status?: number; form?: { name: string; email: string } } = {},
  ): Promise<void> {
    const query = String(ctx.query['q'] ?? '').slice(0, 100);
    const cursor = String(ctx.query['cursor'] ?? '').slice(0, 200);
    let list;
    try {
      list = await callCore(meta(ctx, s.token), (o) => core.accounts.listAccounts({ query, pageToken: cursor }, o));
    } catch (error) {
      if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
      return send(ctx, 400, messagePage(langOf(ctx), tr(ctx, 'message.accountsRefused'), ...refusal(ctx, error)));
    }
    const n = extra.notice ?? done(ctx);
    send(
      ctx,
      extra.status ?? 200,
      accountsPage({
        viewer: s.viewer,
        accounts: list.accounts.map((a) => accountRow(a.account, a)),
        query,
        nextPageToken: list.nextPageToken,
        paged: cursor !== '',
        ...(n === undefined ? {} : { notice: n }),
        ...(extra.form === undefined ? {} : { form: extra.form }),
      }),
    );
  }

  /** An account and its wallet as the operator's pages show them. */
  function accountRow(
    account: { id: string; name: string; email: string; createdAt?: Date | undefined } | undefined,
    wallet: { balance: bigint; held: bigint } | undefined,
  ): ConsoleAccount {
    if (account === undefined || wallet === undefined) throw new SvcError('internal', 'core returned no account');
    return { ...account, createdAt: account.createdAt, balance: wallet.balance, held: wallet.held };
  }

  /** One account, read with the operator session (NOT_FOUND for an unknown id). */
  async function readAccount(m: CallMeta, accountId: string): Promise<ConsoleAccount> {
    if (accountId === '') throw new SvcError('not_found', 'There is no such account.', { param: 'account_id' });
    const [{ account }, { wallet: w }] = await Promise.all([
      callCore(m, (o) => core.accounts.getAccount({ accountId }, o)),
      callCore(m, (o) => core.wallet.getWallet({ accountId }, o)),
    ]);
    return accountRow(account, w);
  }

  async function accountView(ctx: Context, s: Signed, extra: { notice?: Notice; status?: number; id?: string } = {}) {
    const id = extra.id ?? String(ctx.query['id'] ?? '').slice(0, 60);
    const m = meta(ctx, s.token);
    let account: ConsoleAccount;
    try {
      account = await readAccount(m, id);
    } catch (error) {
      if (!isSvcError(error) || error.code !== 'not_found') throw error;
      return accounts(ctx, s, { notice: noticeOf(ctx, error), status: 404 });
    }
    // The ledger pages back to its first entry, as the user's wallet page does.
    const before = extra.id === undefined ? String(ctx.query['before'] ?? '').slice(0, 40) : '';
    let ledgerPage;
    try {
      ledgerPage = await callCore(m, (o) => core.wallet.listLedger({ accountId: id, limit: 50, before }, o));
    } catch (error) {
      if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
      return send(ctx, 400, messagePage(langOf(ctx), tr(ctx, 'message.ledgerRefused'), ...refusal(ctx, error)));
    }
    const ledger = ledgerPage.entries;
    const [{ keys: accountKeys }, { records: usage }, { entries: audit }, { payments }] = await Promise.all([
      callCore(m, (o) => core.keys.listKeys({ accountId: id }, o)),
      callCore(m, (o) => core.usage.listUsage({ filter: { accountId: id }, pageSize: 50, pageToken: '' }, o)),
      callCore(m, (o) => core.accounts.listAuditEntries({ accountId: id, limit: 50 }, o)),
      callCore(m, (o) => core.payments.listPayments({ accountId: id, state: 0, limit: 50, pageToken: '' }, o)),
    ]);
    const detail = {
      keys: accountKeys,
      ledger,
      usage,
      audit,
      payments,
      ledgerNextBefore: ledgerPage.nextBefore,
      ledgerPaged: before !== '',
    };
    const n = extra.notice ?? done(ctx);
    send(
      ctx,
      extra.status ?? 200,
      operatorAccountPage({
        viewer: s.viewer,
        detail,
        account,
        ...(n === undefined ? {} : { notice: n }),
      }),
    );
  }

  async function createAccount(ctx: Context, s: Signed, form: Form): Promise<void> {
    const input = { name: field(form, 'name'), email: field(form, 'email') };
    try {
      await callCore(meta(ctx, s.token), (o) =>
        core.accounts.createAccount({ ...input, password: field(form, 'password') }, o),
      );
      ctx.redirect('/console/accounts?done=account');
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      const keep = { name: input.name.slice(0, 200), email: input.email.slice(0, 254) };
      await accounts(ctx, s, { notice: noticeOf(ctx, error), status: statusOf(error), form: keep });
    }
  }

  /** Gives the account on the page a console sign-in (or replaces its own). */
  async function setSignIn(ctx: Context, s: Signed, form: Form): Promise<void> {
    const accountId = field(form, 'account_id');
    try {
      await callCore(meta(ctx, s.token), (o) =>
        core.accounts.setSignIn({ accountId, email: field(form, 'email'), password: field(form, 'password') }, o),
      );
      ctx.redirect(`/console/accounts/view?id=${encodeURIComponent(accountId)}&done=sign_in`);
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      if (error.code === 'not_found') return accounts(ctx, s, { notice: noticeOf(ctx, error), status: 404 });
      await accountView(ctx, s, { id: accountId, notice: noticeOf(ctx, error), status: statusOf(error) });
    }
  }

  /**
   * A top-up in two steps: the first POST only reads the form back (amount in figures and words,
   * the balance after, the reference) and changes nothing; the confirmation applies it, once per
   * form id however often it is sent.
   */
  async function topUp(ctx: Context, s: Signed, form: Form): Promise<void> {
    const accountId = field(form, 'account_id');
    try {
      const amount = parseAmount(field(form, 'amount'), 'amount', 'The amount');
      if (amount === undefined || amount === 0n)
        throw new SvcError('invalid_argument', 'Enter the amount in toman, e.g. 50,000.', { param: 'amount' });
      // The console's own bound (the API takes more): a slip of extra zeros is refused, not confirmed.
      if (amount > MAX_CONSOLE_TOP_UP)
        throw new SvcError(
          'invalid_argument',
          `The amount must be a whole number of toman from 1 to ${MAX_CONSOLE_TOP_UP.toString()}.`,
          { param: 'amount' },
        );
      if (field(form, 'confirm') !== 'yes') {
        const account = await readAccount(meta(ctx, s.token), accountId);
        const formId = field(form, 'form_id');
        return send(
          ctx,
          200,
          topUpConfirmPage({
            viewer: s.viewer,
            account,
            amount,
            reference: field(form, 'reference').slice(0, 200),
            formId: /^[A-Za-z0-9_-]{16,64}$/.test(formId) ? formId : randomBytes(18).toString('base64url'),
          }),
        );
      }
      const formId = field(form, 'form_id');
      if (!/^[A-Za-z0-9_-]{16,64}$/.test(formId))
        throw new SvcError('invalid_argument', 'This top-up form is incomplete. Reload the page and try again.', {
          param: 'form_id',
        });
      const reference = field(form, 'reference').trim();
      // As on every console form: no markup in what pages show back (the core refuses the rest).
      if (/[<>]/.test(reference))
        throw new SvcError('invalid_argument', 'The reference may not contain "<" or ">": markup is not allowed.', {
          param: 'reference',
        });
      // The form's id is the ledger's request id: submitting one form twice credits (and is audited) once.
      const applied = await callCore(meta(ctx, s.token), (o) =>
        core.wallet.topUp(
          {
            accountId,
            amount,
            reference: reference === '' ? 'console top-up' : reference,
            requestId: `console_topup_${formId}`,
          },
          o,
        ),
      );
      if (applied.alreadyApplied) {
        // Confirmed before (a second click, a resent form, another amount typed into the same
        // form): nothing was credited now; the operator is told what was, and when.
        const { locale } = langOf(ctx);
        const entry = applied.entry;
        return accountView(ctx, s, {
          id: accountId,
          status: 409,
          notice: {
            kind: 'warn',
            text: tr(ctx, 'done.topupAlready', {
              amount: toman(entry?.amount ?? 0n, locale),
              at: when(locale, entry?.createdAt),
            }),
          },
        });
      }
      ctx.redirect(`/console/accounts/view?id=${encodeURIComponent(accountId)}&done=topup`);
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      if (error.code === 'not_found') return accounts(ctx, s, { notice: noticeOf(ctx, error), status: 404 });
      await accountView(ctx, s, { id: accountId, notice: noticeOf(ctx, error), status: statusOf(error) });
    }
  }

  // ---- routes ----

  /** A page or form action of the closure above, with the session and form the middleware read. */
  const page =
    (fn: (ctx: Context, s: Signed) => Promise<void>) =>
    (ctx: Context): Promise<void> =>
      fn(ctx, signedOf(ctx));
  const action =
    (fn: (ctx: Context, s: Signed, form: Form) => Promise<void>) =>
    (ctx: Context): Promise<void> =>
      fn(ctx, signedOf(ctx), formOf(ctx));

  const session = signedIn(core);
  /** A page for anyone signed in, for one role, and a form action of one role. */
  const anyone = [session];
  const user = [session, pageOf('user')];
  const operator = [session, pageOf('operator')];
  const userForm = [session, actionOf('user'), form, sessionCsrf];
  const operatorForm = [session, actionOf('operator'), form, sessionCsrf];

  const router = new Router<AdapterState>({ strict: true, sensitive: true });
  router.get('/assets/console.css', getOnly, async (ctx) => {
    ctx.type = 'text/css; charset=utf-8';
    ctx.set('cache-control', 'public, max-age=3600');
    ctx.body = CONSOLE_CSS;
  });
  router.get('/assets/console.js', getOnly, async (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set('cache-control', 'public, max-age=3600');
    ctx.body = CONSOLE_JS;
  });
  router.get('/lang', switchLanguage);

  router.get('/sign-in', getOnly, (ctx) => showSignIn(ctx, deps));
  router.post('/sign-in', form, signInFormCsrf(expiredSignIn(deps, false)), (ctx) => signIn(ctx, deps, false));
  router.post('/sign-in/operator', form, signInFormCsrf(expiredSignIn(deps, true)), (ctx) => signIn(ctx, deps, true));
  router.get('/sign-up', getOnly, (ctx) => showSignUp(ctx, core));
  router.post('/sign-up', form, signInFormCsrf(expiredSignUp), (ctx) => signUp(ctx, deps));
  router.post('/sign-out', form, sessionCookie, sessionCookieCsrf, (ctx) => signOut(ctx, core));
  router.get('/authorize', (ctx) => showAuthorize(ctx, deps));
  router.post('/authorize', ...userForm, (ctx) => answerAuthorize(ctx, deps));
  router.get('/payments/:gateway/return', getOnly, async (ctx, next) => {
    const gateway = /^\/payments\/([a-z]{1,20})\/return$/.exec(ctx.path)?.[1];
    return gateway === undefined ? next() : paymentReturn(ctx, core, gateway);
  });

  router.get('/', ...anyone, async (ctx) => {
    seeOther(ctx, signedOf(ctx).session.operator ? '/console/accounts' : '/console/keys');
  });
  router.get('/prices', ...anyone, (ctx) => showPrices(ctx, core));
  router.get('/connect', ...anyone, showConnect);

  router.get('/keys', ...user, (ctx) => showKeys(ctx, core));
  router.post('/keys', ...userForm, (ctx) => createKey(ctx, core));
  router.get('/keys/view', ...user, (ctx) => showKey(ctx, core));
  router.get('/keys/revoke', ...user, (ctx) => confirmRevoke(ctx, core));
  router.post('/keys/revoke', ...userForm, (ctx) => revoke(ctx, core));
  router.post('/keys/caps', ...userForm, (ctx) => updateCaps(ctx, core));
  router.post('/keys/edit', ...userForm, (ctx) => editKey(ctx, core));
  router.post('/keys/roll', ...userForm, (ctx) => rollKey(ctx, core));
  router.post('/apps/revoke', ...userForm, (ctx) => revokeApp(ctx, core));
  router.get('/usage', ...user, (ctx) => showUsage(ctx, core));
  router.get('/usage.csv', ...user, (ctx) => usageCsv(ctx, deps));
  router.get('/wallet', ...user, (ctx) => showWallet(ctx, core));
  router.post('/wallet/low-balance', ...userForm, (ctx) => setLowBalance(ctx, core));
  router.post('/wallet/topup', ...userForm, (ctx) => startTopUp(ctx, core));
  router.get('/account', ...user, (ctx) => showAccount(ctx));
  router.post('/account/password', ...userForm, (ctx) => changePassword(ctx, core));

  router.get('/accounts', ...operator, page((ctx, s) => accounts(ctx, s)));
  router.post('/accounts', ...operatorForm, action(createAccount));
  router.get('/accounts/view', ...operator, page((ctx, s) => accountView(ctx, s)));
  router.post('/accounts/topup', ...operatorForm, action(topUp));
  router.post('/accounts/sign-in', ...operatorForm, action(setSignIn));

  app.use(requestIdMiddleware);
  app.use(securityHeaders);
  app.use(locale);
  app.use(refusals(deps));
  app.use(router.routes());
  app.use(notFound);
  return app;
}
