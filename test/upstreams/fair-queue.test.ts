import assert from 'node:assert/strict';
import OpenAI from 'openai';
import pino from 'pino';
import type { UpstreamConfig } from '../../core/config/types';
import { isSvcError } from '../../core/errors';
import { createFairQueues, FairQueue, type FairQueues, type Release } from '../../core/net/fair-queue';
import { createUpstreamMetrics } from '../../core/upstreams/metrics';
import { createUpstreamRouter } from '../../core/upstreams/router';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';

/*
 * Issue 48 points 2 and 3: an origin's connections are shared tenant by tenant, a call waits a
 * bounded time for one (then each wire's "unavailable, retry", nothing charged), and a call whose
 * client leaves while it waits is dropped at once, its hold released.
 */

/** Polls `probe` until it holds (state reached by events elsewhere), failing after many turns. */
async function until(what: string, probe: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 2_000; i += 1) {
    if (await probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`never: ${what}`);
}

describe('the fair queue of an origin (unit)', () => {
  const never = new AbortController().signal;

  it('serves the waiting tenants in turn, not first come first served', async () => {
    const queue = new FairQueue({ slots: 1, waitMs: 60_000 });
    const first = await queue.acquire('a', never);
    const order: string[] = [];
    const waits: Promise<void>[] = [];
    const take = (tenant: string, name: string): void => {
      waits.push(
        queue.acquire(tenant, never).then((release) => {
          order.push(name);
          release();
        }),
      );
    };
    for (const name of ['a2', 'a3', 'a4']) take('a', name);
    take('b', 'b1');
    take('c', 'c1');
    take('b', 'b2');
    assert.equal(queue.waiting, 6);
    first();
    await Promise.all(waits);
    assert.deepEqual(order, ['a2', 'b1', 'c1', 'a3', 'b2', 'a4']);
    assert.equal(queue.busy, 0);
  });

  it('grants at once while slots are free, and a slot given back twice counts once', async () => {
    const queue = new FairQueue({ slots: 2, waitMs: 60_000 });
    const one = await queue.acquire('a', never);
    await queue.acquire('a', never);
    assert.equal(queue.busy, 2);
    one();
    one();
    assert.equal(queue.busy, 1);
  });

  it('keeps a sixteenth of the slots from any one tenant, so another finds one free at once', async () => {
    const queue = new FairQueue({ slots: 16, waitMs: 60_000 });
    const held: Release[] = [];
    for (let i = 0; i < 15; i += 1) held.push(await queue.acquire('a', never));
    let sixteenth: Release | undefined;
    const waiting = queue.acquire('a', never).then((release) => (sixteenth = release));
    assert.equal(queue.waitingFor('a'), 1, "past its share the flooding tenant's call waits");
    const other = await queue.acquire('b', never);
    assert.equal(queue.busy, 16);
    other();
    assert.equal(queue.waitingFor('a'), 1, "the slot it gave back is still not the flooding tenant's");
    held.pop()?.();
    await waiting;
    assert.ok(sixteenth !== undefined);
    assert.equal(queue.busy, 15);
  });

  it('drops a waiting call whose signal aborts, and refuses one that waited its bound out', async () => {
    const queue = new FairQueue({ slots: 1, waitMs: 60_000 });
    const held = await queue.acquire('a', never);
    const leaving = new AbortController();
    const gone = queue.acquire('b', leaving.signal);
    assert.equal(queue.waitingFor('b'), 1);
    leaving.abort();
    await assert.rejects(gone, (e: unknown) => isSvcError(e) && e.code === 'cancelled');
    assert.equal(queue.waiting, 0);
    held();
    assert.equal(queue.busy, 0);

    const short = new FairQueue({ slots: 1, waitMs: 1 });
    const taken: Release = await short.acquire('a', never);
    await assert.rejects(
      short.acquire('b', never),
      (e: unknown) => isSvcError(e) && e.code === 'unavailable' && e.details?.['retry_after_s'] === 1,
    );
    assert.equal(short.waiting, 0);
    taken();
  });
});

const PRICE = 'price: { input_per_1m: 150000, output_per_1m: 600000 }';

function config(url: string, queueMs: number): string {
  return `models:
  slow:
    ${PRICE}
    provider: openai
    base_url: ${url}
    api_key: key-slow-0123456789
    upstream_model: model-slow
  fast:
    ${PRICE}
    provider: openai
    base_url: ${url}
    api_key: key-fast-0123456789
    upstream_model: model-fast
limits:
  requests_per_minute: 100000
  upstream_connections: 1
  upstream_queue_ms: ${queueMs}
`;
}

interface Setup {
  svc: TestSvc;
  fake: FakeUpstream;
  client(key: string): OpenAI;
  waiting(): Promise<number>;
}

async function setup(queueMs: number): Promise<Setup> {
  const fake = await startFakeUpstream();
  const svc = await startSvc({ config: config(fake.baseUrl, queueMs) });
  const origin = new URL(fake.baseUrl).origin;
  return {
    svc,
    fake,
    client: (key) => new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 }),
    async waiting() {
      const text = await svc.core.metrics.registry.render();
      const line = text.split('\n').find((l) => l.startsWith(`svc_upstream_queue_waiting{origin="${origin}"}`));
      return line === undefined ? 0 : Number(line.split(' ').pop());
    },
  };
}

const ask = (model: string) => ({ model, messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 10 });

describe('the fair queue of an origin (issue 48)', function () {
  this.timeout(60_000);

  describe('with a long wait bound', () => {
    let s: Setup;
    before(async () => {
      s = await setup(120_000);
    });
    after(async () => {
      await s.svc.close();
      await s.fake.close();
    });
    afterEach(() => s.fake.reset());

    it("serves another tenant's call before the first tenant's backlog (one turn at most)", async () => {
      const a = await s.svc.createFundedKey(10_000_000);
      const b = await s.svc.createFundedKey(10_000_000);
      const release = s.fake.pause();
      const open = s.fake.nextRequestOpen();
      const calls = [s.client(a.key).chat.completions.create(ask('slow'))];
      await open;
      for (let i = 0; i < 3; i += 1) calls.push(s.client(a.key).chat.completions.create(ask('slow')));
      await until('the backlog waits', async () => (await s.waiting()) === 3);
      calls.push(s.client(b.key).chat.completions.create(ask('fast')));
      await until("the other tenant's call waits", async () => (await s.waiting()) === 4);
      release();
      await Promise.all(calls);
      // First come, first served would send model-fast last.
      assert.deepEqual(
        s.fake.requests.map((r) => r.body['model']),
        ['model-slow', 'model-slow', 'model-fast', 'model-slow', 'model-slow'],
      );
      for (const who of [a, b]) assert.equal((await s.svc.wallet(who.accountId)).held, 0n);
    });

    it('keeps a stream on its connection slot until the stream ends', async () => {
      const a = await s.svc.createFundedKey(10_000_000);
      const b = await s.svc.createFundedKey(10_000_000);
      let resume = (): void => undefined;
      s.fake.enqueue({ kind: 'slow', afterPieces: 1, resume: new Promise<void>((r) => (resume = r)), text: 'one two' });
      const stream = await s.client(a.key).chat.completions.create({ ...ask('slow'), stream: true });
      const chunks = stream[Symbol.asyncIterator]();
      // The stream has begun (its first content arrived) and is paused by its upstream.
      for (;;) {
        const next = await chunks.next();
        assert.equal(next.done, false);
        if ((next.value as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content) break;
      }
      const other = s.client(b.key).chat.completions.create(ask('fast'));
      await until("the other tenant's call waits for the stream's slot", async () => (await s.waiting()) === 1);
      assert.equal(s.fake.requests.length, 1);
      resume();
      for (let next = await chunks.next(); next.done !== true; next = await chunks.next());
      await other;
      assert.deepEqual(
        s.fake.requests.map((r) => r.body['model']),
        ['model-slow', 'model-fast'],
      );
      for (const who of [a, b]) assert.equal((await s.svc.wallet(who.accountId)).held, 0n);
    });

    it('drops a call whose client leaves while it waits, releasing its hold at once', async () => {
      const a = await s.svc.createFundedKey(10_000_000);
      const b: FundedKey = await s.svc.createFundedKey(10_000_000);
      const release = s.fake.pause();
      const open = s.fake.nextRequestOpen();
      const first = s.client(a.key).chat.completions.create(ask('slow'));
      await open;
      const leaving = new AbortController();
      const gone = s.client(b.key).chat.completions.create(ask('fast'), { signal: leaving.signal });
      gone.catch(() => undefined);
      await until('the call waits', async () => (await s.waiting()) === 1);
      await until('its hold is taken', async () => (await s.svc.wallet(b.accountId)).held > 0n);
      leaving.abort();
      // The slot is still held by the first call (its upstream answers nothing yet): only the
      // queue can let the departed call go.
      await until('the hold is released', async () => (await s.svc.wallet(b.accountId)).held === 0n);
      assert.equal(await s.waiting(), 0);
      const wallet = await s.svc.wallet(b.accountId);
      assert.equal(wallet.balance, 10_000_000n, 'nothing charged');
      release();
      await first;
      assert.deepEqual(
        s.fake.requests.map((r) => r.body['model']),
        ['model-slow'],
        'the departed call never reached the upstream',
      );
    });
  });

  describe('with a short wait bound', () => {
    let s: Setup;
    before(async () => {
      s = await setup(300);
    });
    after(async () => {
      await s.svc.close();
      await s.fake.close();
    });

    it("answers a call that waited its bound out as each wire's unavailable, retry, and charges nothing", async () => {
      const a = await s.svc.createFundedKey(10_000_000);
      const b = await s.svc.createFundedKey(10_000_000);
      const release = s.fake.pause();
      const open = s.fake.nextRequestOpen();
      const first = s.client(a.key).chat.completions.create(ask('slow'));
      await open;

      const openai = await fetch(`${s.svc.baseUrl}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(ask('fast')),
      });
      assert.equal(openai.status, 503);
      assert.equal(openai.headers.get('retry-after'), '1');
      const body = (await openai.json()) as { error: { code: string; type: string } };
      assert.equal(body.error.code, 'service_unavailable');

      const anthropic = await fetch(`${s.svc.baseUrl}/v1/anthropic/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': b.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fast', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(anthropic.status, 529);
      assert.equal(anthropic.headers.get('retry-after'), '1');
      assert.equal(((await anthropic.json()) as { error: { type: string } }).error.type, 'overloaded_error');

      const gemini = await fetch(`${s.svc.baseUrl}/v1/gemini/v1beta/models/fast:generateContent`, {
        method: 'POST',
        headers: { 'x-goog-api-key': b.key, 'content-type': 'application/json' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
      });
      assert.equal(gemini.status, 503);
      assert.ok(gemini.headers.get('retry-after') !== null);
      assert.equal(((await gemini.json()) as { error: { status: string } }).error.status, 'UNAVAILABLE');

      const wallet = await s.svc.wallet(b.accountId);
      assert.deepEqual([wallet.balance, wallet.held], [10_000_000n, 0n], 'nothing charged, nothing held');
      release();
      await first;
      assert.equal(s.fake.requests.length, 1, 'the refused calls never reached the upstream');
    });
  });
});

describe('the fair queue in upstream routing (unit)', () => {
  const upstream = (name: string, baseUrl: string, priority: number): UpstreamConfig => ({
    name,
    provider: 'openai',
    baseUrl,
    apiKey: undefined,
    upstreamModel: 'm',
    priority,
    weight: 1,
    headers: {},
    timeoutMs: 120_000,
    extraParams: new Set(),
  });
  const deps = (queues: FairQueues) => ({
    logger: pino({ level: 'silent' }),
    metrics: createUpstreamMetrics(undefined),
    now: Date.now,
    queues,
  });
  const model = { id: 'm', breaker: { failures: 5, openS: 30 } };

  it('moves on to the next upstream when one origin waited its bound out, and takes no slot of a departed call', async () => {
    const queues = createFairQueues({ slotsOf: () => 1, waitMs: 1 });
    const router = createUpstreamRouter(
      model,
      [
        { config: upstream('first', 'http://first.example:1/v1', 1), provider: 'first' },
        { config: upstream('second', 'http://second.example:2/v1', 2), provider: 'second' },
      ],
      deps(queues),
    );
    const never = new AbortController().signal;
    // Another call holds the first origin's only slot.
    const taken = await queues.forOrigin('http://first.example:1').acquire('other', never);
    const tried: string[] = [];
    const answer = await router.call((provider) => {
      tried.push(provider);
      return Promise.resolve(provider);
    }, never);
    assert.equal(answer, 'second');
    assert.deepEqual(tried, ['second']);
    taken();

    // A call whose client left while it waited fails `cancelled`, trying no other upstream.
    const patient = createFairQueues({ slotsOf: () => 1, waitMs: 60_000 });
    const slow = createUpstreamRouter(
      model,
      [
        { config: upstream('first', 'http://first.example:1/v1', 1), provider: 'first' },
        { config: upstream('second', 'http://second.example:2/v1', 2), provider: 'second' },
      ],
      deps(patient),
    );
    const blocker = await patient.forOrigin('http://first.example:1').acquire('other', never);
    const leaving = new AbortController();
    const call = slow.call(() => Promise.resolve('answered'), leaving.signal);
    assert.equal(patient.forOrigin('http://first.example:1').waiting, 1);
    leaving.abort();
    await assert.rejects(call, (e: unknown) => isSvcError(e) && e.code === 'cancelled');
    assert.equal(patient.forOrigin('http://first.example:1').waiting, 0);
    assert.equal(patient.forOrigin('http://second.example:2').busy, 0, 'the second upstream was not tried');
    blocker();
  });
});
