import type { ConsoleServiceImplementation } from '../../gen/svc/core/v1/console';
import { keyToProto } from '../keys/grpc';
import type { CoreContext } from '../server/context';
import { ledgerEntryToProto } from '../wallet/grpc';
import type { ConsoleAccountView } from './accounts';
import type { ConsoleService, SessionView } from './service';
import type { Session } from './sessions';

type Ctx = CoreContext;

/** The session token from `authorization: Session TOKEN` metadata. */
function sessionToken(context: Ctx): string | undefined {
  const header = context.metadata.get('authorization');
  if (typeof header !== 'string') return undefined;
  return /^\s*Session\s+(\S+)\s*$/i.exec(header)?.[1];
}

function sessionToProto(session: SessionView) {
  return {
    accountId: session.accountId ?? '',
    accountName: session.accountName,
    email: session.email,
    operator: session.operator,
    csrfToken: session.csrfToken,
    expiresAt: session.expiresAt,
  };
}

function accountToProto(account: ConsoleAccountView) {
  return account;
}

/** The gRPC face of the console service: resolves the session, then lets the service decide. */
export function createConsoleGrpcService(deps: {
  console: ConsoleService;
}): ConsoleServiceImplementation<{ svc: Ctx['svc'] }> {
  const service = deps.console;
  const session = (context: Ctx): Promise<Session> => service.resolve(sessionToken(context));

  return {
    async signIn(request) {
      const { token, session: s } = await service.signIn({
        email: request.email,
        password: request.password,
        clientAddress: request.clientAddress,
      });
      return { sessionToken: token, session: sessionToProto(s) };
    },
    async signInOperator(request) {
      const { token, session: s } = await service.signInOperator({
        adminToken: request.adminToken,
        clientAddress: request.clientAddress,
      });
      return { sessionToken: token, session: sessionToProto(s) };
    },
    async signOut(request, context) {
      await service.signOut(await session(context), request.csrfToken);
      return {};
    },
    async getSession(_request, context) {
      return { session: sessionToProto(await service.view(await session(context))), modelIds: service.modelIds() };
    },
    async changePassword(request, context) {
      await service.changePassword(await session(context), {
        csrf: request.csrfToken,
        current: request.currentPassword,
        next: request.newPassword,
      });
      return {};
    },
    async listConsoleKeys(_request, context) {
      return { keys: (await service.listKeys(await session(context))).map(keyToProto) };
    },
    async createConsoleKey(request, context) {
      const { key, secret } = await service.createKey(await session(context), {
        csrf: request.csrfToken,
        name: request.name,
        scope: request.scope,
        capDaily: request.capDaily ?? null,
        capMonthly: request.capMonthly ?? null,
      });
      return { key: keyToProto(key), secret };
    },
    async revokeConsoleKey(request, context) {
      return {
        key: keyToProto(
          await service.revokeKey(await session(context), { csrf: request.csrfToken, keyId: request.keyId }),
        ),
      };
    },
    async getConsoleWallet(request, context) {
      const { wallet, entries } = await service.wallet(await session(context), request.ledgerLimit);
      return { wallet, entries: entries.map(ledgerEntryToProto) };
    },
    async listConsoleUsage(request, context) {
      const result = await service.usage(await session(context), {
        keyId: request.keyId,
        model: request.model,
        tool: request.tool,
        limit: request.limit,
        days: request.days,
      });
      return result;
    },
    async listAccounts(_request, context) {
      return { accounts: (await service.listAccounts(await session(context))).map(accountToProto) };
    },
    async createConsoleAccount(request, context) {
      const account = await service.createAccount(await session(context), {
        csrf: request.csrfToken,
        name: request.name,
        email: request.email,
        password: request.password,
      });
      return { account: accountToProto(account) };
    },
    async topUpAccount(request, context) {
      const account = await service.topUp(await session(context), {
        csrf: request.csrfToken,
        accountId: request.accountId,
        amount: request.amount,
        reference: request.reference,
        formId: request.formId,
      });
      return { account: accountToProto(account) };
    },
  };
}
