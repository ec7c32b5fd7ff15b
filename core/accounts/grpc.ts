import type { AccountServiceImplementation } from '../../gen/svc/core/v1/accounts';
import type { CoreContext } from '../auth/context';
import type { AccountService } from './service';
import { invalidArgument } from '../errors';

export function createAccountGrpcService(deps: {
  accounts: AccountService;
}): AccountServiceImplementation<{ svc: CoreContext['svc'] }> {
  return {
    async createAccount(request, context) {
      context.svc.requireAdmin();
      const account = await deps.accounts.create(request.name);
      return { account };
    },
    async getAccount(request, context) {
      const principal = await context.svc.requireKeyOrAdmin();
      const id = principal?.accountId ?? request.accountId;
      if (id === '') throw invalidArgument('account_id', 'account_id is required');
      return { account: await deps.accounts.get(id) };
    },
  };
}
