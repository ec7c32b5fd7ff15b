import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * WebSocket mode of /responses (SPEC §7d), with the `ws` client as Codex and openai-node's
 * ResponsesWS connect: the same events and charges as the SSE stream, one response at a time,
 * previous_response_id on the connection without store, generate: false without a model call,
 * errors as {"type": "error", "status_code", "error"} messages, the key checked at the upgrade and
 * on every response, a client that leaves mid-response charged for what was produced.
 */

type Obj = Record<string, unknown>;

/** An open connection that collects every message. */
interface Conn {
  readonly ws: WebSocket;
  readonly messages: Obj[];
  /** Resolves with the messages received since `from`, up to and including the first that `done` accepts. */
  until(done: (m: Obj) => boolean, from?: number): Promise<Obj[]>;
  send(message: unknown): void;
}

function wsUrl(fx: OpenAiFixture): string {
  return `${fx.baseURL.replace(/^http/, 'ws')}/responses`;
}

function connect(fx: OpenAiFixture, key: string | undefined): Promise<Conn> {
  const ws = new WebSocket(wsUrl(fx), { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
  const messages: Obj[] = [];
  const waiters: (() => void)[] = [];
  ws.on('message', (data) => {
    messages.push(JSON.parse(String(data)) as Obj);
    for (const w of waiters.splice(0)) w();
  });
  return new Promise((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        ws,
        messages,
        send: (m) => ws.send(typeof m === 'string' ? m : JSON.stringify(m)),
        until(done, from = 0) {
          return new Promise((ok, fail) => {
            const check = (): void => {
              const at = messages.findIndex((m, i) => i >= from && done(m));
              if (at >= 0) return ok(messages.slice(from, at + 1));
              waiters.push(check);
            };
            ws.once('close', () => fail(new Error('closed')));
            check();
          });
        },
      }),
    );
  });
}

/** The status an upgrade is refused with. */
function refusedWith(fx: OpenAiFixture, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const ws = new WebSocket(wsUrl(fx), { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => reject(new Error('the upgrade was accepted')));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', () => undefined);
  });
}

const isEnd = (m: Obj): boolean =>
  m['type'] === 'response.completed' || m['type'] === 'response.failed' || m['type'] === 'error';

describe('OpenAI API: Responses over WebSocket', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('serves response.create with the same events as the SSE stream, billed the same', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'Hello there' }, { kind: 'text', text: 'Hello there' });
    const conn = await connect(fx, key);
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'hi', store: false });
    const events = await conn.until(isEnd);
    const sse = await fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', input: 'hi', store: false, stream: true }),
    });
    const sseTypes = (await sse.text())
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => (JSON.parse(l.slice(6)) as Obj)['type']);
    assert.deepEqual(
      events.map((e) => e['type']),
      sseTypes,
    );
    const completed = events[events.length - 1]?.['response'] as Obj;
    assert.equal(completed['status'], 'completed');
    const price = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.equal((completed['usage'] as Obj)['cost'], Number(price));
    const wallet = await fx.settled(accountId);
    assert.equal(wallet.balance, 1_000_000n - 2n * price);
    conn.ws.close();
  });

  it('continues previous_response_id on the connection without store; an unknown one is previous_response_not_found', async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'first answer' }, { kind: 'text', text: 'second answer' });
    const conn = await connect(fx, key);
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'one', store: false });
    const first = await conn.until(isEnd);
    const id = (first[first.length - 1]?.['response'] as Obj)['id'];
    const from = conn.messages.length;
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'two', store: false, previous_response_id: id });
    await conn.until(isEnd, from);
    assert.equal(fx.upstream.requests.length, 2, JSON.stringify(conn.messages.slice(from)));
    const messages = fx.upstream.requests[1]?.body['messages'] as Obj[];
    assert.deepEqual(
      messages.map((m) => [m['role'], m['content']]),
      [
        ['user', 'one'],
        ['assistant', 'first answer'],
        ['user', 'two'],
      ],
    );
    const next = conn.messages.length;
    conn.send({
      type: 'response.create',
      model: 'svc-pro',
      input: 'x',
      previous_response_id: 'resp_0123456789abcdef0123456789abcdef',
    });
    const [error] = await conn.until(isEnd, next);
    assert.equal(error?.['type'], 'error');
    assert.equal(error?.['status_code'], 400);
    assert.equal((error?.['error'] as Obj)['code'], 'previous_response_not_found');
    assert.equal(fx.upstream.requests.length, 2);
    conn.ws.close();
  });

  it('continues previous_response_id after a compaction on the connection: from the compaction alone, the trigger not resent', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(
      { kind: 'text', text: 'SUMMARY: the user asked about Tajrish.' },
      { kind: 'text', text: 'Continuing from the summary.' },
    );
    const conn = await connect(fx, key);
    conn.send({
      type: 'response.create',
      model: 'svc-pro',
      input: [
        { role: 'user', content: 'Where is Tajrish square?' },
        { role: 'assistant', content: 'In the north of Tehran.' },
        { type: 'compaction_trigger' },
      ],
      store: false,
    });
    const first = await conn.until(isEnd);
    const compaction = first[first.length - 1]?.['response'] as Obj;
    assert.equal(compaction['status'], 'completed', JSON.stringify(first.at(-1)));
    assert.deepEqual(
      (compaction['output'] as Obj[]).map((o) => o['type']),
      ['compaction'],
    );
    const from = conn.messages.length;
    conn.send({
      type: 'response.create',
      model: 'svc-pro',
      input: 'And what is near it?',
      store: false,
      previous_response_id: compaction['id'],
    });
    const second = await conn.until(isEnd, from);
    assert.equal(second.at(-1)?.['type'], 'response.completed', JSON.stringify(second.at(-1)));
    const sent = JSON.stringify(fx.upstream.requests[1]?.body['messages']);
    assert.match(sent, /SUMMARY: the user asked about Tajrish/);
    assert.doesNotMatch(sent, /In the north of Tehran/, 'the compacted turns are not resent');
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, 2);
    conn.ws.close();
  });

  it('generate: false warms up without a model call or a charge, and later turns continue from it', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const conn = await connect(fx, key);
    conn.send({
      type: 'response.create',
      model: 'svc-pro',
      instructions: 'x',
      input: 'context',
      generate: false,
      store: false,
    });
    const warm = await conn.until(isEnd);
    assert.deepEqual(
      warm.map((e) => e['type']),
      ['response.created', 'response.completed'],
    );
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 1_000_000n);
    const id = (warm[1]?.['response'] as Obj)['id'];
    const from = conn.messages.length;
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'go', store: false, previous_response_id: id });
    await conn.until(isEnd, from);
    const messages = fx.upstream.requests[0]?.body['messages'] as Obj[];
    assert.deepEqual(
      messages.map((m) => m['content']),
      ['context', 'go'],
    );
    conn.ws.close();
  });

  it('answers bad messages with error messages and stays open; one response at a time', async () => {
    const { key } = await fx.fund(1_000_000);
    let resume!: () => void;
    fx.upstream.enqueue({ kind: 'slow', afterPieces: 1, resume: new Promise<void>((r) => (resume = r)) });
    const conn = await connect(fx, key);
    conn.send('not json');
    conn.send({ type: 'session.update' });
    conn.send({ hello: 1 });
    const errors = await conn.until(
      (m) => m['type'] === 'error' && (m['error'] as Obj)['param'] === 'type' && conn.messages.length >= 3,
    );
    assert.ok(errors.every((m) => m['type'] === 'error' && m['status_code'] === 400));
    assert.match(String((conn.messages[0]?.['error'] as Obj)['message']), /not valid JSON/);
    const from = conn.messages.length;
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'slow one', store: false });
    await conn.until((m) => m['type'] === 'response.output_text.delta', from);
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'another', store: false });
    const busy = await conn.until((m) => m['type'] === 'error', from);
    assert.match(String((busy[busy.length - 1]?.['error'] as Obj)['message']), /already in progress/);
    resume();
    await conn.until((m) => m['type'] === 'response.completed', from);
    assert.equal(fx.upstream.requests.length, 1);
    conn.ws.close();
  });

  it('a client that goes away mid-response pays for what was produced, and the hold is released', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'slow', afterPieces: 2, resume: new Promise<void>(() => undefined) });
    const conn = await connect(fx, key);
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'long', store: false });
    await conn.until((m) => m['type'] === 'response.output_text.delta');
    conn.ws.terminate();
    const wallet = await fx.settled(accountId);
    assert.equal(wallet.held, 0n);
    assert.ok(wallet.balance < 1_000_000n, 'the produced output is charged');
    assert.ok(1_000_000n - wallet.balance < 100n, 'only what was produced');
  });

  it('checks the key at the upgrade and on every response: none or revoked is 401, revoked while open ends the connection', async () => {
    assert.equal((await refusedWith(fx, {})).status, 401);
    assert.equal((await refusedWith(fx, { authorization: 'Bearer svc_sk_nope' })).status, 401);
    const funded = await fx.fund(1_000_000);
    const conn = await connect(fx, funded.key);
    await fx.svc.core.keys.revoke(funded.keyId);
    assert.equal((await refusedWith(fx, { authorization: `Bearer ${funded.key}` })).status, 401);
    const closed = new Promise<number>((resolve) => conn.ws.once('close', (code) => resolve(code)));
    conn.send({ type: 'response.create', model: 'svc-pro', input: 'hi' });
    const code = await closed;
    assert.equal(code, 1008);
    const error = conn.messages.find((m) => m['type'] === 'error');
    assert.equal(error?.['status_code'], 401);
    assert.equal(fx.upstream.requests.length, 0);
  });
});

describe('OpenAI API: WebSocket mode turned off', function () {
  let fx: OpenAiFixture;
  before(async () => {
    fx = await startOpenAiFixture({ extraConfig: 'responses:\n  websockets: false\n' });
  });
  after(async () => {
    await fx.close();
  });

  it('answers the upgrade 426 at once, so Codex falls back to HTTP', async () => {
    const { key } = await fx.fund(1000);
    const refused = await refusedWith(fx, { authorization: `Bearer ${key}` });
    assert.equal(refused.status, 426);
    assert.equal((JSON.parse(refused.body) as { error: Obj }).error['code'], 'websockets_disabled');
  });
});
