import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import { requestIdMiddleware } from '../http/request';
import type { AdapterDeps, AdapterState } from '../http/types';
import { CONSOLE_CSS, CONSOLE_JS } from './assets';
import { seeOther, signedOf } from './context';
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
import { createAccount, setKeyConcurrent, setSignIn, showAccounts, showAccountView, topUp } from './pages/accounts';
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
import { paymentReturn } from './pages/payments';
import { showPrices } from './pages/prices';
import { marginCsv, setRate, showPricing } from './pages/pricing';
import { expiredSignIn, expiredSignUp, showSignIn, showSignUp, signIn, signOut, signUp } from './pages/sign-in';
import { showUsage, usageCsv } from './pages/usage';
import { setLowBalance, showWallet, startTopUp } from './pages/wallet';

/** A stylesheet or script of the console, from memory (an hour in caches: it changes only with a release). */
function asset(type: string, body: string) {
  return async (ctx: Context): Promise<void> => {
    ctx.type = type;
    ctx.set('cache-control', 'public, max-age=3600');
    ctx.body = body;
  };
}

/**
 * The web console, mounted at `/console`: server-rendered pages over the core's services. This is
 * the wiring only: a route per page and per form action, the middleware every page shares
 * (./middleware.ts: headers, locale, refusals, session and role, form and CSRF), and the page
 * modules (./pages/<page>.ts: each page's rendering, its GET and its form actions). The session
 * lives in an HttpOnly, SameSite=Strict cookie and goes to the core as the caller (`authorization:
 * Session TOKEN`); every form carries a CSRF token derived from it, which the csrf middleware checks
 * before the core is called (the sign-in forms, before any session exists, use a double-submit cookie).
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core } = deps;

  const session = signedIn(core);
  // A page for anyone signed in, a page of one role, and a form of one role (the session first,
  // then the role, then the form is read and its CSRF token checked, then the action).
  const anyone = [session];
  const user = [session, pageOf('user')];
  const operator = [session, pageOf('operator')];
  const userForm = [session, actionOf('user'), form, sessionCsrf];
  const operatorForm = [session, actionOf('operator'), form, sessionCsrf];

  // strict and sensitive: `/keys/` and `/Keys` are not `/keys` (the 404 page, as they always were).
  const router = new Router<AdapterState>({ strict: true, sensitive: true });
  router.get('/assets/console.css', getOnly, asset('text/css; charset=utf-8', CONSOLE_CSS));
  router.get('/assets/console.js', getOnly, asset('text/javascript; charset=utf-8', CONSOLE_JS));
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

  router.get('/accounts', ...operator, (ctx) => showAccounts(ctx, core));
  router.post('/accounts', ...operatorForm, (ctx) => createAccount(ctx, core));
  router.get('/accounts/view', ...operator, (ctx) => showAccountView(ctx, core));
  router.post('/accounts/topup', ...operatorForm, (ctx) => topUp(ctx, core));
  router.post('/accounts/sign-in', ...operatorForm, (ctx) => setSignIn(ctx, core));
  router.get('/pricing', ...operator, (ctx) => showPricing(ctx, core));
  router.post('/pricing/rate', ...operatorForm, (ctx) => setRate(ctx, core));
  router.get('/pricing/report.csv', ...operator, (ctx) => marginCsv(ctx, core));
  router.post('/accounts/keys/concurrent', ...operatorForm, (ctx) => setKeyConcurrent(ctx, core));

  app.use(requestIdMiddleware);
  app.use(securityHeaders);
  app.use(locale);
  app.use(refusals(deps));
  app.use(router.routes());
  app.use(notFound);
  return app;
}
