import type { AccountServiceImplementation } from '../../gen/svc/core/v1/accounts';
import { accountOfCaller, type CoreContext } from '../auth/context';
import type { AccountService } from './service';

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
      const id = accountOfCaller(await context.svc.requireCaller(), request.accountId);
      return { account: await deps.accounts.get(id) };
    },
  };
}
