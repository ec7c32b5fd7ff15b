import {
  createPaymentService,
  isSvcError,
  loadEnv,
  migrate,
  openStore,
  type PaymentState,
  type PaymentView,
} from '../core';
import pino from 'pino';
import { UsageError } from './args';
import type { CommandContext } from './context';
import { table, toJson, type JsonOut } from './output';

const STATES: readonly PaymentState[] = ['pending', 'paid', 'failed', 'expired'];

function when(date: Date | undefined): string | null {
  return date === undefined ? null : date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** SPEC §12's shape of one payment in `svc payment list --json`. */
function paymentJson(p: PaymentView): { [key: string]: JsonOut } {
  return {
    id: p.id,
    account_id: p.accountId,
    gateway: p.gateway,
    amount: p.amount,
    state: p.state,
    reference: p.reference === '' ? null : p.reference,
    receipt: p.receipt === '' ? null : p.receipt,
    created_at: when(p.createdAt),
    paid_at: when(p.paidAt),
  };
}

/** `svc payment list [--account ID] [--state S] [--json]`: every payment, newest first, from the database. */
export async function paymentList(ctx: CommandContext): Promise<void> {
  const accountId = ctx.args.strings.get('account');
  const state = ctx.args.strings.get('state');
  if (state !== undefined && !(STATES as readonly string[]).includes(state))
    throw new UsageError(`--state must be one of ${STATES.join(', ')} (got ${JSON.stringify(state)})`);
  const { databaseUrl } = loadEnv(ctx.env);
  const store = openStore(databaseUrl, { poolSize: 2 });
  const payments: PaymentView[] = [];
  try {
    await migrate(store);
    const service = createPaymentService({
      store,
      logger: pino({ level: 'silent' }),
      now: Date.now,
      config: undefined,
      gateways: new Map(),
    });
    let pageToken = '';
    do {
      const page = await service.list({
        ...(accountId === undefined ? {} : { accountId }),
        ...(state === undefined ? {} : { state: state as PaymentState }),
        limit: 200,
        pageToken,
      });
      payments.push(...page.payments);
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
  } catch (error) {
    if (isSvcError(error)) throw new UsageError(error.message);
    throw error;
  } finally {
    await store.close();
  }
  ctx.out(
    ctx.json
      ? toJson({ payments: payments.map(paymentJson) })
      : table(
          ['id', 'account', 'gateway', 'amount (toman)', 'state', 'reference', 'receipt', 'created', 'paid'],
          payments.map((p) => [
            p.id,
            p.accountId,
            p.gateway,
            p.amount,
            p.state,
            p.reference || null,
            p.receipt || null,
            when(p.createdAt),
            when(p.paidAt),
          ]),
        ),
  );
}
