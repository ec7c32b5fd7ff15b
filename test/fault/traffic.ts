import type { Books } from './books';
import { chargesByClientRequest } from './books';
import type { ChaosUpstreams } from './chaos-upstream';

/*
 * The fault test's client side, shared by every test that runs it against a topology of svc
 * processes (test/fault/fault.test.ts, test/deploy/compose-topology.test.ts): the seeded mix of
 * chat, chat stream and tool calls whose fates the chaos upstreams act out, the clients that
 * abort or retry, and the check of every charge against what the clients saw and the upstreams
 * served.
 */

export type Kind = 'chat' | 'stream' | 'web_search' | 'maps_search_places' | 'shopping_search';
export type Outcome = 'success' | 'failure' | 'transport';

export interface Sent {
  readonly requestId: string;
  readonly accountId: string;
  readonly tag: string;
  readonly kind: Kind;
  readonly fate: string;
  readonly aborted: boolean;
  outcome: Outcome;
  /** A second call with the same Idempotency-Key (chat; MCP has none, so tools are not retried). */
  readonly retried: boolean;
}

/** What a successful call costs: the chat price (fixed prompt and answer) and each tool's. */
export interface Prices {
  readonly chat: bigint;
  readonly tools: Readonly<Record<string, bigint>>;
}

/** A seeded PRNG (mulberry32), so a failing run can be replayed with its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick<T>(random: () => number, weighted: readonly (readonly [T, number])[]): T {
  const total = weighted.reduce((s, [, w]) => s + w, 0);
  let at = random() * total;
  for (const [value, weight] of weighted) {
    at -= weight;
    if (at < 0) return value;
  }
  return weighted[weighted.length - 1]![0];
}

/** The fault test's mix: chat fates, tool fates (weights), how often clients abort and retry. */
export interface TrafficMix {
  readonly chatFates: readonly (readonly [string, number])[];
  readonly toolFates: readonly (readonly [string, number])[];
  readonly abortRate: number;
  readonly retryRate: number;
}

export const FAULT_MIX: TrafficMix = {
  chatFates: [
    ['ok', 60],
    ['slow', 12],
    ['error', 10],
    ['hang', 4],
    ['cut', 10],
  ],
  toolFates: [
    ['ok', 65],
    ['slow', 15],
    ['error', 12],
    ['hang', 5],
  ],
  abortRate: 0.07,
  retryRate: 0.05,
};

/** An account of the load with its keys. */
export interface LoadAccount {
  readonly id: string;
  readonly keys: readonly string[];
}

/**
 * Sends request `i` of the mix (the account, key, gateway, kind, fate, abort and retry drawn
 * from `random`), records it in `sent` and settles its outcome.
 */
export async function sendMixed(options: {
  readonly i: number;
  readonly random: () => number;
  readonly accounts: readonly LoadAccount[];
  readonly gatewayUrls: readonly string[];
  readonly requestIdPrefix: string;
  readonly mix: TrafficMix;
  readonly sent: Sent[];
}): Promise<void> {
  const { i, random, accounts, gatewayUrls, mix } = options;
  const account = accounts[i % accounts.length]!;
  const key = account.keys[Math.floor(random() * account.keys.length)]!;
  const base = gatewayUrls[i % gatewayUrls.length]!;
  const kind = pick<Kind>(random, [
    ['chat', 3],
    ['stream', 3],
    ['web_search', 1],
    ['maps_search_places', 1],
    ['shopping_search', 1],
  ]);
  const chat = kind === 'chat' || kind === 'stream';
  const fate = pick(random, chat ? mix.chatFates : mix.toolFates);
  const abort = random() < mix.abortRate;
  const retried = chat && fate === 'ok' && !abort && random() < mix.retryRate;
  const tag = `r${i}`;
  const requestId = `${options.requestIdPrefix}${i}`;
  const record: Sent = {
    requestId,
    accountId: account.id,
    tag,
    kind,
    fate,
    aborted: abort,
    outcome: 'failure',
    retried,
  };
  options.sent.push(record);
  const controller = new AbortController();
  if (abort) setTimeout(() => controller.abort(), Math.floor(random() * 400));
  const once = async (): Promise<Outcome> => {
    try {
      return chat
        ? await sendChat(
            base,
            key,
            requestId,
            kind === 'stream',
            `[f:${fate}] [t:${tag}] hello`,
            retried,
            controller.signal,
          )
        : await sendTool(base, key, requestId, kind, `coffee [f:${fate}] [t:${tag}]`, controller.signal);
    } catch {
      return 'transport';
    }
  };
  record.outcome = await once();
  // A retry of the same request under its Idempotency-Key: charged once, the upstream called once.
  if (retried) {
    const again = await once();
    if (record.outcome === 'success' && again === 'success') return;
    if (again === 'success') record.outcome = 'success';
  }
}

export async function sendChat(
  base: string,
  key: string,
  requestId: string,
  stream: boolean,
  content: string,
  idempotent: boolean,
  signal?: AbortSignal,
): Promise<Outcome> {
  const response = await fetch(`${base}/v1/openai/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'x-request-id': requestId,
      ...(idempotent ? { 'idempotency-key': `idem-${requestId}` } : {}),
    },
    body: JSON.stringify({
      model: 'svc-pro',
      messages: [{ role: 'user', content }],
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
    ...(signal === undefined ? {} : { signal }),
  });
  const text = await response.text();
  if (response.status !== 200) return 'failure';
  if (!stream) return (JSON.parse(text) as { usage?: unknown }).usage !== undefined ? 'success' : 'failure';
  return text.includes('"usage":{"prompt_tokens"') &&
    text.trimEnd().endsWith('data: [DONE]') &&
    !text.includes('"error"')
    ? 'success'
    : 'failure';
}

export async function sendTool(
  base: string,
  key: string,
  requestId: string,
  tool: string,
  query: string,
  signal?: AbortSignal,
): Promise<Outcome> {
  const response = await fetch(`${base}/v1/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-request-id': requestId,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: { query } } }),
    ...(signal === undefined ? {} : { signal }),
  });
  const body = (await response.json()) as { result?: { isError?: boolean } };
  return response.status === 200 && body.result !== undefined && body.result.isError !== true ? 'success' : 'failure';
}

/** What checking the charges found. */
export interface ChargeCheck {
  readonly problems: string[];
  readonly servedNotCharged: number;
  readonly chargedWithoutSuccess: number;
  /** The sum of the prices of the calls the clients saw succeed. */
  readonly expectedTotal: bigint;
}

/**
 * Charges against what the clients saw and the upstreams served: each success charged exactly
 * its price once and served by the upstream; a charge without a success only for a stream the
 * client left (what was produced) or an answer the upstream served in full and that was lost on
 * the way back; never an upstream failure.
 */
export function checkCharges(
  sent: readonly Sent[],
  books: Books,
  upstreams: ChaosUpstreams,
  prices: Prices,
): ChargeCheck {
  const charges = chargesByClientRequest(books);
  const problems: string[] = [];
  let servedNotCharged = 0;
  let chargedWithoutSuccess = 0;
  let expectedTotal = 0n;
  for (const s of sent) {
    const charged = charges.get(`${s.accountId}/${s.requestId}`) ?? [];
    const chat = s.kind === 'chat' || s.kind === 'stream';
    const price = chat ? prices.chat : prices.tools[s.kind]!;
    const served = (chat ? upstreams.chatServed : upstreams.toolServed).has(s.tag);
    if (s.outcome === 'success') {
      expectedTotal += price;
      if (!served) problems.push(`${s.requestId}: a success the upstream never served`);
      if (charged.length !== 1 || charged[0] !== price)
        problems.push(`${s.requestId} (${s.kind}): succeeded, charged [${charged.join(', ')}] instead of ${price}`);
      continue;
    }
    if (served && charged.length === 0) servedNotCharged += 1;
    if (charged.length === 0) continue;
    chargedWithoutSuccess += 1;
    // Charged without a success seen by the client: only for a stream the client left (it pays
    // what was produced), or a call the upstream served in full whose answer was lost on the
    // way back (client abort, killed core, cut database): then at its full price.
    const partialStream = s.kind === 'stream' && s.aborted && (charged[0] ?? 0n) <= prices.chat * 20n;
    const lostAnswer =
      served &&
      charged[0] === price &&
      (s.aborted || s.outcome === 'transport' || s.fate === 'ok' || s.fate === 'slow');
    if (!partialStream && !lostAnswer)
      problems.push(
        `${s.requestId} (${s.kind}, ${s.fate}, ${s.outcome}${s.aborted ? ', aborted' : ''}): charged [${charged.join(', ')}]`,
      );
    if (s.fate === 'error' || s.fate === 'hang' || (s.fate === 'cut' && !s.aborted))
      problems.push(`${s.requestId}: an upstream failure (${s.fate}) was charged`);
  }
  return { problems, servedNotCharged, chargedWithoutSuccess, expectedTotal };
}
