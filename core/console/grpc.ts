import type { ConsoleServiceImplementation } from '../../gen/svc/core/v1/console';
import { keyToProto } from '../keys/grpc';
import { DEFAULT_ROLL_GRACE_MS } from '../auth/scope';
import { sessionToken, type CoreContext } from '../auth/context';
import { clientAddressResolver } from '../auth/client-address';
import type { SessionCaller } from '../auth/types';
import type { ConsoleService, SessionCall, SessionView } from './service';

type Ctx = CoreContext;

/** The session token from `authorization: Session TOKEN` metadata (it seals a new key's secret). */
function sessionTokenOf(context: Ctx): string {
  const header = context.metadata.get('authorization');
  return sessionToken(typeof header === 'string' ? header : undefined) ?? '';
}

function sessionToProto(session: SessionView) {
  return {
    accountId: session.accountId ?? '',
    accountName: session.accountName,
    email: session.email,
    operator: session.operator,
    expiresAt: session.expiresAt,
  };
}

/** The gRPC face of the console service: resolves the session, then lets the service decide. */
export function createConsoleGrpcService(deps: {
  console: ConsoleService;
  /** The secret the console adapter sends in `x-svc-adapter-token`; none: no caller is believed. */
  adapterToken: string | undefined;
}): ConsoleServiceImplementation<{ svc: Ctx['svc'] }> {
  const service = deps.console;
  // The context middleware resolved the session (`authorization: Session TOKEN`).
  const session = (context: Ctx): Promise<SessionCaller> => context.svc.requireSession();
  // The token too: a new key's secret is sealed under it until its page shows it.
  const call = async (context: Ctx): Promise<SessionCall> => ({
    session: await session(context),
    token: sessionTokenOf(context),
  });
  // Sign-in attempts are limited per address: only the console adapter may state it.
  const clientAddress = clientAddressResolver(deps.adapterToken);

  return {
    async signIn(request, context) {
      const { token, session: s } = await service.signIn({
        email: request.email,
        password: request.password,
        clientAddress: clientAddress(request.clientAddress, context),
      });
      return { sessionToken: token, session: sessionToProto(s) };
    },
    async getSignUp() {
      return { open: service.signUpOpen() };
    },
    async signUp(request, context) {
      await service.signUp({
        email: request.email,
        password: request.password,
        clientAddress: clientAddress(request.clientAddress, context),
      });
      return {};
    },
    async signInOperator(request, context) {
      const { token, session: s } = await service.signInOperator({
        adminToken: request.adminToken,
        clientAddress: clientAddress(request.clientAddress, context),
      });
      return { sessionToken: token, session: sessionToProto(s) };
    },
    async signOut(request, context) {
      await service.signOut(await session(context));
      return {};
    },
    async getSession(_request, context) {
      const s = await session(context);
      const [view, low] = await Promise.all([service.view(s), service.lowBalance(s)]);
      return {
        session: sessionToProto(view),
        modelIds: service.modelIds(),
        available: low?.available ?? 0n,
        ...(low?.threshold === undefined || low.threshold === null ? {} : { lowBalanceThreshold: low.threshold }),
      };
    },
    async setConsoleLowBalance(request, context) {
      await service.setLowBalance(await session(context), {
        threshold: request.threshold ?? null,
      });
      return {};
    },
    async changePassword(request, context) {
      await service.changePassword(await session(context), {
        current: request.currentPassword,
        next: request.newPassword,
      });
      return {};
    },
    async createConsoleKey(request, context) {
      const { key, replayed } = await service.createKey(await call(context), {
        formId: request.formId,
        name: request.name,
        scope: request.scope,
        capDaily: request.capDaily ?? null,
        capMonthly: request.capMonthly ?? null,
        capTotal: request.capTotal ?? null,
        allowedModels: request.allowedModels,
        allowedTools: request.allowedTools,
        expiresAt: request.expiresAt === undefined ? null : request.expiresAt.getTime(),
      });
      return { key: keyToProto(key), replayed };
    },
    async revealConsoleKey(request, context) {
      const { key, secret } = await service.revealKey(await call(context), request.formId);
      return { key: keyToProto(key), secret };
    },
    async rollConsoleKey(request, context) {
      const grace = request.grace;
      const graceMs =
        grace === undefined ? DEFAULT_ROLL_GRACE_MS : Number(grace.seconds) * 1000 + Math.floor(grace.nanos / 1e6);
      const { key, previous, replayed } = await service.rollKey(await call(context), {
        formId: request.formId,
        keyId: request.keyId,
        graceMs,
      });
      return { key: keyToProto(key), previous: keyToProto(previous), replayed };
    },
  };
}
