import type { Dispatcher } from 'undici';
import type { GatewayConfig } from '../../../config/types';
import { digits, excerpt, int, postJson, rawDigits, record, str, type GatewayAnswer } from '../../http';
import type { PaymentGateway, VerifyOutcome } from '../../types';

// Zibal (../shared/ref/payments/gateways.md §2): JSON POSTs to {base}/v1/*, the merchant in the
// body; `result` 100 is success, 201 "already verified", 202 unpaid or failed, 203 unknown
// trackId. Verify takes no amount: the amount it returns is compared here.
const TRACK_ID = /^\d{1,20}$/;

const RESULTS: Readonly<Record<number, string>> = {
  102: 'the merchant was not found at Zibal',
  103: 'the merchant is not active at Zibal',
  104: 'the merchant is not valid at Zibal',
  105: "the amount is below Zibal's minimum",
  106: 'the return address is not valid for this merchant',
  113: "the amount is above Zibal's limit",
  202: 'the payment was cancelled or did not go through',
  203: 'the gateway does not know this payment session',
};

function describeResult(result: number | undefined): string {
  return (result === undefined ? undefined : RESULTS[result]) ?? 'the gateway refused the payment';
}

/** Zibal over the core's one dispatcher. */
export function createZibalGateway(config: GatewayConfig, dispatcher: Dispatcher): PaymentGateway {
  const call = (path: string, body: Record<string, unknown>, signal: AbortSignal) =>
    postJson(
      dispatcher,
      {
        baseUrl: config.baseUrl,
        path: `/v1/${path}`,
        body: { merchant: config.merchant, ...body },
        timeoutMs: config.timeoutMs,
      },
      signal,
    );

  // A paid answer (verify 100, or inquiry after a 201): the amount must be this payment's.
  function paid(answer: GatewayAnswer, amountRial: bigint, already: boolean, where: string): VerifyOutcome {
    const body = record(answer.body);
    const amount = int(body['amount']);
    const detail = `zibal ${where}: ${excerpt(answer.text)}`;
    if (amount === undefined) return { kind: 'unknown', detail: `${detail} (no amount)` };
    if (BigInt(amount) !== amountRial)
      return { kind: 'mismatch', message: 'the amount paid is not the amount of this payment', detail };
    return {
      kind: 'paid',
      receipt: rawDigits(answer.text, 'refNumber') || digits(body['refNumber']),
      cardPan: str(body['cardNumber']).slice(0, 40),
      already,
    };
  }

  return {
    name: 'zibal',

    async request(input, signal) {
      let answer: GatewayAnswer;
      try {
        answer = await call(
          'request',
          {
            amount: Number(input.amountRial),
            callbackUrl: input.callbackUrl,
            description: input.description,
            orderId: input.paymentId,
          },
          signal,
        );
      } catch (error) {
        return { kind: 'unknown', detail: `zibal request: no answer (${String(error)})` };
      }
      const body = record(answer.body);
      const result = int(body['result']);
      const trackId = rawDigits(answer.text, 'trackId') || digits(body['trackId']);
      const detail = `zibal request: HTTP ${answer.status}, result ${String(result)}: ${excerpt(answer.text)}`;
      if (answer.status === 200 && result === 100 && TRACK_ID.test(trackId))
        return { kind: 'opened', reference: trackId, redirectUrl: `${config.baseUrl}/start/${trackId}` };
      if (answer.status >= 500 || result === undefined) return { kind: 'unknown', detail };
      return { kind: 'refused', message: `Zibal refused the payment: ${describeResult(result)}.`, detail };
    },

    async verify(input, signal): Promise<VerifyOutcome> {
      let answer: GatewayAnswer;
      try {
        answer = await call('verify', { trackId: Number(input.reference) }, signal);
      } catch (error) {
        return { kind: 'unknown', detail: `zibal verify: no answer (${String(error)})` };
      }
      const result = int(record(answer.body)['result']);
      const detail = `zibal verify: HTTP ${answer.status}, result ${String(result)}: ${excerpt(answer.text)}`;
      if (answer.status >= 500) return { kind: 'unknown', detail };
      if (result === 100) return paid(answer, input.amountRial, false, 'verify');
      if (result === 201) {
        // Verified before (a lost answer, a second return): the inquiry says for how much.
        let inquiry: GatewayAnswer;
        try {
          inquiry = await call('inquiry', { trackId: Number(input.reference) }, signal);
        } catch (error) {
          return { kind: 'unknown', detail: `zibal inquiry after 201: no answer (${String(error)})` };
        }
        const body = record(inquiry.body);
        const status = int(body['status']);
        if (inquiry.status !== 200 || int(body['result']) !== 100 || (status !== 1 && status !== 2))
          return { kind: 'unknown', detail: `zibal inquiry after 201: ${excerpt(inquiry.text)}` };
        return paid(inquiry, input.amountRial, true, 'inquiry');
      }
      if (result === 202 || result === 203) return { kind: 'unpaid', message: describeResult(result), detail };
      return { kind: 'unknown', detail };
    },

    referenceOf(query) {
      const trackId = query.get('trackId') ?? '';
      return TRACK_ID.test(trackId) ? trackId : undefined;
    },
  };
}
