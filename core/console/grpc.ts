import { createHash, timingSafeEqual } from 'node:crypto';
import type { ConsoleServiceImplementation } from '../../gen/svc/core/v1/console';
import { keyToProto } from '../keys/grpc';
import type { CoreContext } from '../auth/context';
import { ledgerEntryToProto } from '../wallet/grpc';
import type { ConsoleAccountView } from './accounts';
import type { ConsoleService, SessionView } from './service';
import type { Session } from './sessions';

type Ctx = CoreContext;

/** The session token from `authorization: Session TOKEN` metadata. */
export function sessionToken(context: Ctx): string | undefined {
  const header = context.metadata.get('authorization');
  if (typeof header !== 'string') return undefined;
  return /^\s*Session\s+(\S+)\s*$/i.exec(header)?.[1];
}

/** Metadata by which the console adapter proves itself, so that its `client_address` is believed. */
export const ADAPTER_TOKEN_HEADER = 'x-svc-adapter-token';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The caller's own address from grpc-js's peer (`HOST:PORT`, IPv6 unbracketed): the port goes. */
function peerAddress(context: Ctx): string {
  return context.peer.replace(/:\d{1,5}$/, '');
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
  /** The secret the console adapter sends in `x-svc-adapter-token`; none: no caller is believed. */
  adapterToken: string | undefined;
}): ConsoleServiceImplementation<{ svc: Ctx['svc'] }> {
  const service = deps.console;
  const session = (context: Ctx): Promise<Session> => service.resolve(sessionToken(context));
  const adapterDigest =
    deps.adapterToken === undefined || deps.adapterToken === '' ? undefined : digest(deps.adapterToken);

  // Sign-in attempts are limited per address. Only the console adapter, which saw the browser's
  // socket, may state that address, and it must prove it is the adapter; any other caller of the
  // core is limited by its own address, or it could spread its guesses over made-up ones.
  function clientAddress(stated: string, context: Ctx): string {
    const token = context.metadata.get(ADAPTER_TOKEN_HEADER);
    const trusted =
      adapterDigest !== undefined && typeof token === 'string' && timingSafeEqual(digest(token), adapterDigest);
    return trusted ? stated : peerAddress(context);
  }

  return {
    async signIn(request, context) {
      const { token, session: s } = await service.signIn({
        email: request.email,
        password: request.password,
        clientAddress: clientAddress(request.clientAddress, context),
      });
      return { sessionToken: token, session: sessionToProto(s) };
    },
    async signInOperator(request, context) {
      const { token, session: s } = await service.signInOperator({
        adminToken: request.adminToken,
        clientAddress: clientAddress(request.clientAddress, context),
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
