import type { AccountServiceImplementation } from '../../gen/svc/core/v1/accounts';
import { accountOfCaller, type CoreContext } from '../auth/context';
import { SvcError, invalidArgument } from '../errors';
import type { Audit } from './audit';
import type { AccountService } from './service';

/** An account as the operator's list shows it. */
export interface AccountListing {
  readonly id: string;
  readonly name: string;
  /** The console sign-in's email; '' when none. */
  readonly email: string;
  readonly balance: bigint;
  readonly held: bigint;
  readonly createdAt: Date;
}

/**
 * The accounts' console sign-ins, kept by the console (its credentials table and password
 * hashing); handed in by the composition so that this folder needs nothing of the console's.
 */
export interface SignInDirectory {
  /** Creates the account, its empty wallet and its sign-in in one transaction. */
  createWithSignIn(input: { name: string; email: string; password: string }): Promise<AccountListing>;
  /** Newest first, 50 a page; `query` matches name, email (any case) or id. */
  list(input: { query: string; pageToken: string }): Promise<{ accounts: AccountListing[]; nextPageToken: string }>;
  /** Gives an existing account a sign-in, or replaces its own (whose sessions end). */
  setSignIn(input: {
    accountId: string;
    email: string;
    password: string;
  }): Promise<{ account: AccountListing; replaced: boolean }>;
  /** The sign-in's email of an account; '' when it has none. */
  emailOf(accountId: string): Promise<string>;
}

export function createAccountGrpcService(deps: {
  accounts: AccountService;
  audit: Audit;
  signIns: SignInDirectory;
}): AccountServiceImplementation<{ svc: CoreContext['svc'] }> {
  return {
    async createAccount(request, context) {
      context.svc.requireAdmin();
      if ((request.email === '') !== (request.password === ''))
        throw invalidArgument(
          request.email === '' ? 'email' : 'password',
          'A console sign-in needs both an email address and a password.',
        );
      if (request.email === '') {
        const account = await deps.accounts.create(request.name);
        await deps.audit.record(account.id, 'account_created', `account “${account.name}” created`);
        return { account: { ...account, email: '' } };
      }
      const made = await deps.signIns.createWithSignIn({
        name: request.name,
        email: request.email,
        password: request.password,
      });
      await deps.audit.record(made.id, 'account_created', `account “${made.name}” created with sign-in ${made.email}`);
      return { account: { id: made.id, name: made.name, createdAt: made.createdAt, email: made.email } };
    },
    async getAccount(request, context) {
      const id = accountOfCaller(await context.svc.requireCaller(), request.accountId);
      const [account, email] = await Promise.all([deps.accounts.get(id), deps.signIns.emailOf(id)]);
      return { account: { ...account, email } };
    },
    async setSignIn(request, context) {
      context.svc.requireAdmin();
      if (request.accountId === '') throw invalidArgument('account_id', 'account_id is required');
      const { account, replaced } = await deps.signIns.setSignIn({
        accountId: request.accountId,
        email: request.email,
        password: request.password,
      });
      await deps.audit.record(
        account.id,
        'sign_in_set',
        replaced ? `console sign-in replaced: now ${account.email}` : `console sign-in ${account.email} added`,
      );
      return {
        account: { id: account.id, name: account.name, createdAt: account.createdAt, email: account.email },
        replaced,
      };
    },
    async listAccounts(request, context) {
      context.svc.requireAdmin();
      const { accounts, nextPageToken } = await deps.signIns.list({
        query: request.query,
        pageToken: request.pageToken,
      });
      return {
        accounts: accounts.map((a) => ({
          account: { id: a.id, name: a.name, createdAt: a.createdAt, email: a.email },
          balance: a.balance,
          held: a.held,
        })),
        nextPageToken,
      };
    },
    async listAuditEntries(request, context) {
      context.svc.requireAdmin();
      const limit = request.limit === 0 ? 50 : request.limit;
      if (limit < 1 || limit > 200) throw invalidArgument('limit', 'limit must be 1-200');
      if (request.accountId === '') throw invalidArgument('account_id', 'account_id is required');
      // An unknown account is NOT_FOUND, not an empty list.
      await deps.accounts.get(request.accountId).catch((error: unknown) => {
        if (error instanceof SvcError && error.code === 'not_found')
          throw new SvcError('not_found', 'There is no such account.', { param: 'account_id' });
        throw error;
      });
      return { entries: await deps.audit.list(request.accountId, limit) };
    },
  };
}
