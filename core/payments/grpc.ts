import {
  PaymentState as WireState,
  type Payment,
  type PaymentServiceImplementation,
} from '../../gen/svc/core/v1/payments';
import { isOperator, type CoreContext } from '../auth/context';
import type { Caller, CoreCallContext } from '../auth/types';
import { SvcError, invalidArgument } from '../errors';
import type { PaymentService } from './service';
import type { PaymentState, PaymentView } from './types';

const STATE: Readonly<Record<PaymentState, WireState>> = {
  pending: WireState.PAYMENT_STATE_PENDING,
  paid: WireState.PAYMENT_STATE_PAID,
  failed: WireState.PAYMENT_STATE_FAILED,
  expired: WireState.PAYMENT_STATE_EXPIRED,
};

function stateOf(wire: WireState): PaymentState | undefined {
  if (wire === WireState.PAYMENT_STATE_UNSPECIFIED) return undefined;
  const found = (Object.entries(STATE) as [PaymentState, WireState][]).find(([, w]) => w === wire);
  if (found === undefined) throw invalidArgument('state', 'state is not a payment state');
  return found[0];
}

export function paymentToProto(p: PaymentView, showAccount = true): Payment {
  return {
    id: p.id,
    accountId: showAccount ? p.accountId : '',
    gateway: p.gateway,
    amount: p.amount,
    state: STATE[p.state],
    reference: p.reference,
    receipt: p.receipt,
    cardPan: p.cardPan,
    failure: p.failure,
    createdAt: p.createdAt,
    ...(p.paidAt === undefined ? {} : { paidAt: p.paidAt }),
  };
}

/**
 * The account a caller may pay into or read the payments of: its own for a user session or a
 * key with the `manage` scope (a key without it moves no money in and reads no payments); the
 * one named (or, with `optional`, every account) for the admin token and operator sessions.
 */
function accountFor(caller: Caller, requested: string, optional: boolean): string | undefined {
  if (caller.kind === 'key') {
    if (!caller.principal.manage)
      throw new SvcError(
        'permission_denied',
        "This API key cannot manage payments: that needs a key with the 'manage' scope, the console, or the operator",
      );
    return caller.principal.accountId;
  }
  if (caller.kind === 'session' && caller.role === 'user') {
    if (caller.accountId === null) throw new SvcError('permission_denied', 'This session has no account');
    return caller.accountId;
  }
  if (requested === '') {
    if (optional) return undefined;
    throw invalidArgument('account_id', 'account_id is required');
  }
  return requested;
}

/** The caller when the call carries a valid credential; undefined for an anonymous call (a payer without a session). */
async function callerOrNone(svc: CoreCallContext): Promise<Caller | undefined> {
  try {
    return await svc.requireCaller();
  } catch (error) {
    if (
      error instanceof SvcError &&
      ['missing_api_key', 'invalid_api_key', 'session_expired', 'invalid_admin_token'].includes(error.code)
    )
      return undefined;
    throw error;
  }
}

function owns(caller: Caller | undefined, accountId: string): boolean {
  if (caller === undefined) return false;
  if (isOperator(caller)) return true;
  if (caller.kind === 'key') return caller.principal.accountId === accountId && caller.principal.manage;
  return caller.kind === 'session' && caller.accountId === accountId;
}

export function createPaymentGrpcService(deps: {
  payments: PaymentService;
}): PaymentServiceImplementation<{ svc: CoreContext['svc'] }> {
  const { payments } = deps;
  return {
    async getPaymentOptions(_request, { svc }) {
      await svc.requireCaller();
      const offer = payments.offer();
      return offer === undefined
        ? { gateways: [], minToman: 0n, maxToman: 0n, redirectOrigins: [] }
        : {
            gateways: offer.gateways,
            minToman: offer.minToman,
            maxToman: offer.maxToman,
            redirectOrigins: offer.origins,
          };
    },

    async startPayment(request, { svc }) {
      const accountId = accountFor(await svc.requireCaller(), request.accountId, false) ?? '';
      const started = await payments.start({ accountId, gateway: request.gateway, amount: request.amount });
      return { payment: paymentToProto(started.payment), redirectUrl: started.redirectUrl };
    },

    async getPayment(request, { svc }) {
      const caller = await svc.requireCaller();
      const notFound = new SvcError('not_found', 'There is no such payment.', { param: 'payment_id' });
      const payment = await payments.get(request.paymentId).catch((error: unknown) => {
        throw error instanceof SvcError && error.code === 'not_found' ? notFound : error;
      });
      // Another account's payment looks exactly like one that does not exist.
      if (!isOperator(caller) && accountFor(caller, '', true) !== payment.accountId) throw notFound;
      return { payment: paymentToProto(payment) };
    },

    async listPayments(request, { svc }) {
      const accountId = accountFor(await svc.requireCaller(), request.accountId, true);
      const state = stateOf(request.state);
      const page = await payments.list({
        ...(accountId === undefined ? {} : { accountId }),
        ...(state === undefined ? {} : { state }),
        limit: request.limit === 0 ? 50 : request.limit,
        pageToken: request.pageToken,
      });
      return { payments: page.payments.map((p) => paymentToProto(p)), nextPageToken: page.nextPageToken };
    },

    async completePaymentReturn(request, { svc }) {
      const caller = await callerOrNone(svc);
      const payment = await payments.completeReturn({
        gateway: request.gateway,
        query: new Map(Object.entries(request.query)),
      });
      const owner = owns(caller, payment.accountId);
      return { payment: paymentToProto(payment, owner), owner };
    },
  };
}
