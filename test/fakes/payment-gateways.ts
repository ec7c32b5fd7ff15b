import { randomBytes, createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * Faithful fakes of ZarinPal v4 and Zibal (../shared/ref/payments/gateways.md §1, §2 and the
 * checklist of §6), on one HTTP server: ZarinPal under /zarinpal (API {base}/pg/v4/payment/*.json,
 * payer at {base}/pg/StartPay/{authority}), Zibal under /zibal (API {base}/v1/*, payer at
 * {base}/start/{trackId}). Each base URL has a path prefix, as a proxy in front would.
 *
 * The start pages stand in for the bank: `?action=pay` pays and 302s back to the callback with
 * the gateway's own parameters, `cancel` and `fail` come back unpaid, `pay-stay` pays and never
 * sends the payer back. Without an action the page lists them (the browser test clicks one).
 * Faults are queued per gateway and endpoint.
 */

export type GatewayKind = 'zarinpal' | 'zibal';
export type Endpoint = 'request' | 'verify' | 'unverified' | 'inquiry';

/**
 * `hang`: never answers (the client times out); `5xx`: HTTP 502 with an HTML page; `lost`: does
 * the work (a verify verifies), then drops the connection before any answer; `rate-limit`:
 * ZarinPal's -12; `reuse-reference`: a request answers with the previous session's reference.
 */
export type Fault = 'hang' | '5xx' | 'lost' | 'rate-limit' | 'reuse-reference';

export interface Session {
  readonly gateway: GatewayKind;
  readonly reference: string;
  readonly merchant: string;
  readonly amount: number;
  readonly callbackUrl: string;
  readonly orderId: string;
  state: 'new' | 'paid' | 'failed' | 'verified';
  refNumber: number;
  cardPan: string;
  verifies: number;
}

export interface FakeGateways {
  baseUrl(gateway: GatewayKind): string;
  /** Queues `fault` for the next `times` calls of `endpoint`. */
  fault(gateway: GatewayKind, endpoint: Endpoint, fault: Fault, times?: number): void;
  /** Numbers as strings (`"code":"100"`, `"ref_id":"…"`, `"amount":"…"`), as some answers in the wild have. */
  stringNumbers: boolean;
  /**
   * Where the callback's origin really is, as DNS and a proxy would send the payer: svc's
   * `public_url` is fixed in its configuration before the test server has a port.
   */
  publicOrigin: { from: string; to: string } | undefined;
  /** Sessions by reference. */
  readonly sessions: Map<string, Session>;
  /** Every API call: gateway, endpoint and parsed body. */
  readonly calls: { gateway: GatewayKind; endpoint: string; body: Record<string, unknown> }[];
  /** Pays a session as the bank would (the payer may never come back). */
  pay(reference: string): void;
  /** The start page's redirect back for `action`: the callback URL with the gateway's parameters. */
  returnUrl(reference: string, action: 'pay' | 'cancel' | 'fail'): string;
  close(): Promise<void>;
}

const ZARINPAL_MERCHANT = /^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$/;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(n: number): string {
  return [...randomBytes(n)].map((b) => BASE62[b % 62]).join('');
}

function intOf(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value === 'string' && /^\d+$/.test(value)) return Number(value);
  return undefined;
}

function withQuery(url: string, params: Record<string, string>): string {
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

export async function startFakeGateways(
  options: { merchants?: { zarinpal?: string; zibal?: string } } = {},
): Promise<FakeGateways> {
  const merchants = {
    zarinpal: options.merchants?.zarinpal ?? '1344b5d4-0048-11e8-94db-005056a205be',
    zibal: options.merchants?.zibal ?? 'zibal',
  };
  const sessions = new Map<string, Session>();
  const faults = new Map<string, Fault[]>();
  const calls: FakeGateways['calls'] = [];
  let lastReference: Record<GatewayKind, string> = { zarinpal: '', zibal: '' };
  let nextTrack = 3_000_000_000 + Math.floor(Math.random() * 1_000_000);
  let nextRef = 59_421_827_101;
  const hanging = new Set<http.ServerResponse>();

  const takeFault = (gateway: GatewayKind, endpoint: Endpoint): Fault | undefined =>
    faults.get(`${gateway}:${endpoint}`)?.shift();
  const num = (n: number): number | string => (fake.stringNumbers ? String(n) : n);

  function send(res: http.ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  function zarinpalError(
    res: http.ServerResponse,
    status: number,
    code: number,
    message: string,
    validations: unknown[] = [],
  ): void {
    // On failure `errors` is an object and `data` an empty list (§1.5).
    send(res, status, { data: [], errors: { code: num(code), message, validations } });
  }

  function returnUrl(reference: string, action: 'pay' | 'cancel' | 'fail'): string {
    const s = sessions.get(reference);
    if (s === undefined) throw new Error(`no session ${reference}`);
    const mapped = fake.publicOrigin;
    const callback =
      mapped !== undefined && s.callbackUrl.startsWith(mapped.from)
        ? mapped.to + s.callbackUrl.slice(mapped.from.length)
        : s.callbackUrl;
    if (action === 'pay' && s.state === 'new') pay(reference);
    if (action !== 'pay' && s.state === 'new') s.state = 'failed';
    const ok = action === 'pay';
    if (s.gateway === 'zarinpal') return withQuery(callback, { Authority: reference, Status: ok ? 'OK' : 'NOK' });
    return withQuery(callback, {
      success: ok ? '1' : '0',
      trackId: reference,
      orderId: s.orderId,
      status: ok ? '2' : '3',
    });
  }

  function pay(reference: string): void {
    const s = sessions.get(reference);
    if (s === undefined || s.state !== 'new') return;
    s.state = 'paid';
    s.refNumber = nextRef++;
    s.cardPan = s.gateway === 'zarinpal' ? '628023******8998' : '6037****1234';
  }

  function zarinpal(endpoint: string, body: Record<string, unknown>, res: http.ServerResponse): void {
    const merchant = typeof body['merchant_id'] === 'string' ? body['merchant_id'] : '';
    if (!ZARINPAL_MERCHANT.test(merchant))
      return zarinpalError(res, 422, -9, 'The input params invalid, validation error.', [
        { merchant_id: `The merchant id ${merchant} must be 36 characters.` },
      ]);
    if (merchant !== merchants.zarinpal)
      return zarinpalError(res, 401, -10, 'Terminal is not valid, please check merchant_id or ip address.');
    if (endpoint === 'request.json') {
      const amount = intOf(body['amount']);
      const currency = body['currency'] ?? 'IRR';
      const callback = typeof body['callback_url'] === 'string' ? body['callback_url'] : '';
      const description = typeof body['description'] === 'string' ? body['description'] : '';
      if (
        amount === undefined ||
        amount < 1000 ||
        !/^https?:\/\//.test(callback) ||
        description === '' ||
        description.length > 500 ||
        (currency !== 'IRR' && currency !== 'IRT')
      )
        return zarinpalError(res, 422, -9, 'The input params invalid, validation error.', [
          { description: 'invalid field' },
        ]);
      if ((currency === 'IRT' ? amount * 10 : amount) > 1_000_000_000)
        return zarinpalError(res, 422, -41, 'Maximum amount is 100,000,000 tomans.');
      const reused = takeFault('zarinpal', 'request') === 'reuse-reference' && lastReference.zarinpal !== '';
      const authority = reused ? lastReference.zarinpal : `A${'0'.repeat(15)}${base62(20)}`;
      lastReference.zarinpal = authority;
      if (!reused) {
        const metadata = (body['metadata'] ?? {}) as Record<string, unknown>;
        sessions.set(authority, {
          gateway: 'zarinpal',
          reference: authority,
          merchant,
          amount,
          callbackUrl: callback,
          orderId: String(metadata['order_id'] ?? ''),
          state: 'new',
          refNumber: 0,
          cardPan: '',
          verifies: 0,
        });
      }
      return send(res, 200, {
        data: { code: num(100), message: 'Success', authority, fee_type: 'Merchant', fee: num(1555) },
        errors: [],
      });
    }
    if (endpoint === 'verify.json') {
      const authority = typeof body['authority'] === 'string' ? body['authority'] : '';
      const s = sessions.get(authority);
      if (s === undefined) return zarinpalError(res, 404, -54, 'Invalid authority.');
      if (s.merchant !== merchant) return zarinpalError(res, 403, -53, 'Session is not this merchant_id session');
      if (s.state === 'new' || s.state === 'failed')
        return zarinpalError(res, 422, -51, 'Session is not valid, session is not active paid try.');
      if (intOf(body['amount']) !== s.amount)
        return zarinpalError(res, 422, -50, 'Session is not valid, amounts values is not the same.');
      s.verifies++;
      const first = s.state === 'paid';
      s.state = 'verified';
      return send(res, 200, {
        data: {
          wages: [],
          code: num(first ? 100 : 101),
          message: first ? 'Paid' : 'Verified',
          card_hash: createHash('sha256').update(s.cardPan).digest('hex').toUpperCase(),
          card_pan: s.cardPan,
          ref_id: num(s.refNumber),
          fee_type: 'Merchant',
          fee: num(3500),
          shaparak_fee: '1200',
          order_id: s.orderId,
        },
        errors: [],
      });
    }
    if (endpoint === 'unVerified.json') {
      const authorities = [...sessions.values()]
        .filter((s) => s.gateway === 'zarinpal' && s.state === 'paid')
        .slice(-100)
        .map((s) => ({
          authority: s.reference,
          amount: s.amount,
          callback_url: s.callbackUrl,
          referer: '',
          date: '2026-11-27 10:00:00',
        }));
      // The docs' sample has the code as a string here.
      return send(res, 200, { data: { code: '100', message: 'Success', authorities }, errors: [] });
    }
    if (endpoint === 'inquiry.json') {
      const s = sessions.get(String(body['authority']));
      if (s === undefined) return zarinpalError(res, 404, -54, 'Invalid authority.');
      const status = { new: 'IN_BANK', paid: 'PAID', verified: 'VERIFIED', failed: 'FAILED' }[s.state];
      return send(res, 200, { data: { code: num(100), message: 'Success', status }, errors: [] });
    }
    return zarinpalError(res, 404, -9, 'not found');
  }

  function zibal(endpoint: string, body: Record<string, unknown>, res: http.ServerResponse): void {
    const merchant = typeof body['merchant'] === 'string' ? body['merchant'] : '';
    if (merchant !== merchants.zibal) return send(res, 200, { result: num(102), message: 'merchant not found' });
    if (endpoint === 'request') {
      const amount = intOf(body['amount']);
      const callback = typeof body['callbackUrl'] === 'string' ? body['callbackUrl'] : '';
      if (amount === undefined || amount <= 1000)
        return send(res, 200, { result: num(105), message: 'amount must be more than 1000 rial' });
      if (!/^https?:\/\//.test(callback)) return send(res, 200, { result: num(106), message: 'invalid callbackUrl' });
      const reused = takeFault('zibal', 'request') === 'reuse-reference' && lastReference.zibal !== '';
      const trackId = reused ? lastReference.zibal : String(nextTrack++);
      lastReference.zibal = trackId;
      if (!reused)
        sessions.set(trackId, {
          gateway: 'zibal',
          reference: trackId,
          merchant,
          amount,
          callbackUrl: callback,
          orderId: String(body['orderId'] ?? ''),
          state: 'new',
          refNumber: 0,
          cardPan: '',
          verifies: 0,
        });
      return send(res, 200, { trackId: num(Number(trackId)), result: num(100), message: 'success' });
    }
    const s = sessions.get(String(intOf(body['trackId']) ?? ''));
    if (s === undefined) return send(res, 200, { result: num(203), message: 'trackId is invalid' });
    const fields = () => ({
      amount: num(s.amount),
      paidAt: '2026-11-27T10:00:00.000',
      cardNumber: s.cardPan,
      refNumber: num(s.refNumber),
      orderId: s.orderId,
      description: 'svc top-up',
      multiplexingInfos: [],
    });
    if (endpoint === 'verify') {
      if (s.state === 'new' || s.state === 'failed')
        return send(res, 200, {
          result: num(202),
          message: 'order is not paid or failed',
          status: num(s.state === 'new' ? -1 : 3),
        });
      s.verifies++;
      if (s.state === 'verified') return send(res, 200, { result: num(201), message: 'previously verifed' });
      s.state = 'verified';
      return send(res, 200, { result: num(100), message: 'success', status: num(1), ...fields() });
    }
    if (endpoint === 'inquiry') {
      const status = { new: -1, paid: 2, verified: 1, failed: 3 }[s.state];
      return send(res, 200, {
        result: num(100),
        message: 'success',
        status: num(status),
        ...fields(),
        verifiedAt: '',
        wage: 0,
        createdAt: '',
      });
    }
    return send(res, 404, { result: 404, message: 'not found' });
  }

  function startPage(gateway: GatewayKind, reference: string, url: URL, res: http.ServerResponse): void {
    const s = sessions.get(reference);
    if (s === undefined) {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<h1>Invalid payment session</h1>');
      return;
    }
    const action = url.searchParams.get('action');
    if (action === 'pay' || action === 'cancel' || action === 'fail') {
      res.writeHead(302, { location: returnUrl(reference, action) });
      res.end();
      return;
    }
    if (action === 'pay-stay') {
      pay(reference);
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<h1>Paid</h1><p>You may close this window.</p>');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(
      `<!doctype html><title>${gateway} fake gateway</title><h1>${gateway}: pay ${s.amount} rial</h1>` +
        `<a id="pay" href="?action=pay">Pay</a> <a id="cancel" href="?action=cancel">Cancel</a> <a id="fail" href="?action=fail">Fail</a>`,
    );
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const parts = url.pathname.split('/').filter((p) => p !== '');
    const gateway = parts[0] as GatewayKind;
    if (req.method === 'GET') {
      if (gateway === 'zarinpal' && parts[1] === 'pg' && parts[2] === 'StartPay')
        return startPage(gateway, parts[3] ?? '', url, res);
      if (gateway === 'zibal' && parts[1] === 'start') return startPage(gateway, parts[2] ?? '', url, res);
      res.writeHead(404);
      res.end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        body = {};
      }
      const raw = gateway === 'zarinpal' ? (parts[4] ?? '') : (parts[2] ?? '');
      const endpoint: Endpoint | undefined =
        raw === 'request.json' || raw === 'request'
          ? 'request'
          : raw === 'verify.json' || raw === 'verify'
            ? 'verify'
            : raw === 'unVerified.json'
              ? 'unverified'
              : raw === 'inquiry.json' || raw === 'inquiry'
                ? 'inquiry'
                : undefined;
      calls.push({ gateway, endpoint: raw, body });
      const fault =
        endpoint === undefined
          ? undefined
          : faults.get(`${gateway}:${endpoint}`)?.[0] === 'reuse-reference'
            ? undefined
            : takeFault(gateway, endpoint);
      if (fault === 'hang') {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      if (fault === '5xx') {
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end('<html><body><h1>502 Bad Gateway</h1></body></html>');
        return;
      }
      if (fault === 'rate-limit' && gateway === 'zarinpal')
        return zarinpalError(res, 429, -12, 'To many attempts, please try again later.');
      if (fault === 'lost') {
        // The work is done (a verify verifies at the gateway), the answer never arrives.
        const sink = new http.ServerResponse(req);
        if (gateway === 'zarinpal') zarinpal(raw, body, sink);
        else zibal(raw, body, sink);
        req.socket.destroy();
        return;
      }
      if (gateway === 'zarinpal' && parts[1] === 'pg' && parts[2] === 'v4' && parts[3] === 'payment')
        return zarinpal(raw, body, res);
      if (gateway === 'zibal' && parts[1] === 'v1') return zibal(raw, body, res);
      res.writeHead(404);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const fake: FakeGateways = {
    baseUrl: (gateway) => `http://127.0.0.1:${port}/${gateway}`,
    fault(gateway, endpoint, fault, times = 1) {
      const queue = faults.get(`${gateway}:${endpoint}`) ?? [];
      for (let i = 0; i < times; i++) queue.push(fault);
      faults.set(`${gateway}:${endpoint}`, queue);
    },
    stringNumbers: false,
    publicOrigin: undefined,
    sessions,
    calls,
    pay,
    returnUrl,
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      lastReference = { zarinpal: '', zibal: '' };
    },
  };
  return fake;
}
