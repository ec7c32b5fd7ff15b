import type { Dispatcher } from 'undici';
import type { GatewayConfig } from '../../../config/types';
import { digits, excerpt, int, postJson, rawDigits, record, str, type GatewayAnswer } from '../../http';
import type { PaymentGateway, VerifyOutcome } from '../../types';

// ZarinPal REST v4 (../shared/ref/payments/gateways.md §1): JSON POSTs to
// {base}/pg/v4/payment/*.json; `errors` is [] on success and an object on failure, when `data`
// is [] (both shapes are read); numbers sometimes arrive as strings.
const API = '/pg/v4/payment';
const AUTHORITY = /^[AS][0-9a-zA-Z]{35}$/;

/** Plain words for the codes a payer or operator may meet (ZarinPal's own table, §1.8). */
const CODES: Readonly<Record<number, string>> = {
  [-9]: 'the gateway found the request invalid',
  [-10]: "the merchant id or this server's address is not accepted by ZarinPal",
  [-11]: 'the merchant terminal is not active',
  [-12]: 'too many attempts; try again later',
  [-14]: 'the return address does not match the domain registered with ZarinPal',
  [-15]: 'the merchant terminal is suspended',
  [-18]: 'the return address does not match the domain registered with ZarinPal',
  [-41]: "the amount is above ZarinPal's limit",
  [-50]: 'the amount paid is not the amount of this payment',
  [-51]: 'the payment was cancelled or did not go through',
  [-53]: 'the session belongs to another merchant',
  [-54]: 'the gateway does not know this payment session',
};

function codeOf(answer: GatewayAnswer): { code: number | undefined; message: string } {
  const body = record(answer.body);
  const data = record(body['data']);
  const errors = record(body['errors']);
  const dataCode = int(data['code']);
  if (dataCode !== undefined) return { code: dataCode, message: str(data['message']) };
  return { code: int(errors['code']), message: str(errors['message']) };
}

function describeCode(code: number | undefined): string {
  return (code === undefined ? undefined : CODES[code]) ?? 'the gateway refused the payment';
}

/** ZarinPal v4 over the core's one dispatcher. */
export function createZarinpalGateway(config: GatewayConfig, dispatcher: Dispatcher): PaymentGateway {
  const call = (path: string, body: Record<string, unknown>, signal: AbortSignal) =>
    postJson(
      dispatcher,
      {
        baseUrl: config.baseUrl,
        path: `${API}/${path}`,
        body: { merchant_id: config.merchant, ...body },
        timeoutMs: config.timeoutMs,
      },
      signal,
    );

  return {
    name: 'zarinpal',

    async request(input, signal) {
      let answer: GatewayAnswer;
      try {
        answer = await call(
          'request.json',
          {
            amount: Number(input.amountRial),
            currency: 'IRR',
            callback_url: input.callbackUrl,
            description: input.description,
            metadata: { order_id: input.paymentId },
          },
          signal,
        );
      } catch (error) {
        return { kind: 'unknown', detail: `zarinpal request.json: no answer (${String(error)})` };
      }
      const { code, message } = codeOf(answer);
      const authority = str(record(record(answer.body)['data'])['authority']);
      if (answer.status === 200 && code === 100 && AUTHORITY.test(authority)) {
        return { kind: 'opened', reference: authority, redirectUrl: `${config.baseUrl}/pg/StartPay/${authority}` };
      }
      const detail = `zarinpal request.json: HTTP ${answer.status}, code ${String(code)} ${message}: ${excerpt(answer.text)}`;
      if (answer.status >= 500 || code === undefined) return { kind: 'unknown', detail };
      return { kind: 'refused', message: `ZarinPal refused the payment: ${describeCode(code)}.`, detail };
    },

    async verify(input, signal): Promise<VerifyOutcome> {
      let answer: GatewayAnswer;
      try {
        answer = await call('verify.json', { authority: input.reference, amount: Number(input.amountRial) }, signal);
      } catch (error) {
        return { kind: 'unknown', detail: `zarinpal verify.json: no answer (${String(error)})` };
      }
      const { code, message } = codeOf(answer);
      const detail = `zarinpal verify.json: HTTP ${answer.status}, code ${String(code)} ${message}: ${excerpt(answer.text)}`;
      if (answer.status >= 500) return { kind: 'unknown', detail };
      if (code === 100 || code === 101) {
        const data = record(record(answer.body)['data']);
        const receipt = rawDigits(answer.text, 'ref_id') || digits(data['ref_id']);
        return { kind: 'paid', receipt, cardPan: str(data['card_pan']).slice(0, 40), already: code === 101 };
      }
      if (code === -51 || code === -53 || code === -54) return { kind: 'unpaid', message: describeCode(code), detail };
      if (code === -50) return { kind: 'mismatch', message: describeCode(code), detail };
      // A rate limit, a terminal or address problem, an unexpected shape: the session's fate is not known.
      return { kind: 'unknown', detail };
    },

    referenceOf(query) {
      const authority = query.get('Authority') ?? '';
      return AUTHORITY.test(authority) ? authority : undefined;
    },

    async unverified(signal) {
      const answer = await call('unVerified.json', {}, signal);
      const { code } = codeOf(answer);
      if (answer.status !== 200 || code !== 100)
        throw new Error(
          `zarinpal unVerified.json: HTTP ${answer.status}, code ${String(code)}: ${excerpt(answer.text)}`,
        );
      const list = record(record(answer.body)['data'])['authorities'];
      return (Array.isArray(list) ? list : [])
        .map((item) => str(record(item)['authority']))
        .filter((authority) => AUTHORITY.test(authority));
    },
  };
}
