import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type OpenAI from 'openai';
import { DEFAULT_USAGE, startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type TestSvc } from '../helpers/harness';
import { expectedCost, startOpenAiFixture, testConfig, type OpenAiFixture } from './fixture';

/*
 * Remote compaction (SPEC §7d), as Codex uses it when its provider is named "OpenAI": a final
 * compaction_trigger is answered with exactly one sealed compaction item, made by the request's
 * model and billed as its tokens; the item opens in a later input (expanded in place) only for
 * the account it was made for; POST /responses/compact is the same call.
 */

type Obj = Record<string, unknown>;

async function post(baseURL: string, path: string, key: string, body: unknown): Promise<Response> {
  return fetch(`${baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

function frames(text: string): { event: string | undefined; data: Obj }[] {
  return text
    .split('\n\n')
    .filter((b) => b.includes('data: '))
    .map((b) => ({
      event: /^event: (.*)$/m.exec(b)?.[1],
      data: JSON.parse(/^data: (.*)$/m.exec(b)?.[1] ?? '{}') as Obj,
    }));
}

const history = [
  { role: 'user', content: 'Refactor the parser in src/parse.ts' },
  { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"cmd":"cat src/parse.ts"}' },
  { type: 'function_call_output', call_id: 'call_1', output: 'export function parse() {}' },
  { role: 'assistant', content: 'I read the file.' },
];
const shell = {
  type: 'function',
  name: 'shell',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
};

describe('OpenAI API: remote compaction', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it("answers a final compaction_trigger with exactly one compaction item, billed as the model's tokens (stream, as Codex)", async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'SUMMARY: parser refactor under way; file read.' });
    const response = await post(fx.baseURL, '/responses', key, {
      model: 'svc-pro',
      instructions: 'You are Codex.',
      input: [...history, { type: 'compaction_trigger' }],
      tools: [shell],
      store: false,
      stream: true,
      client_metadata: { 'x-codex-window-id': 'w' },
    });
    assert.equal(response.status, 200);
    const events = frames(await response.text());
    for (const e of events) assert.equal(e.event, e.data['type']);
    const completed = events.find((e) => e.data['type'] === 'response.completed')?.data['response'] as Obj;
    const output = completed['output'] as Obj[];
    assert.equal(output.length, 1);
    assert.equal(output[0]?.['type'], 'compaction');
    assert.match(String(output[0]?.['encrypted_content']), /^svc_cmp\.1\./);
    assert.ok(!String(output[0]?.['encrypted_content']).includes('SUMMARY'), 'the summary is sealed, not readable');
    // The summary was made by the request's model, with the conversation and tools not callable.
    const sent = fx.upstream.requests[0]?.body;
    const messages = sent?.['messages'] as Obj[];
    assert.match(String(messages[messages.length - 1]?.['content']), /CONTEXT CHECKPOINT COMPACTION/);
    assert.equal(sent?.['tool_choice'], 'none');
    assert.equal(messages[0]?.['content'], 'You are Codex.');
    // Billed once, as that model's tokens.
    const price = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.equal((completed['usage'] as Obj)['cost'], Number(price));
    const wallet = await fx.settled(accountId);
    assert.equal(wallet.balance, 1_000_000n - price);
  });

  it('opens the compaction item in a later input and expands it in place; refuses a forged or foreign one before any hold', async () => {
    const a = await fx.fund(1_000_000);
    const b = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'SUMMARY-42' });
    const client = fx.client(a.key);
    const compacted = (await client.responses.create({
      model: 'svc-pro',
      input: [...history, { type: 'compaction_trigger' }] as OpenAI.Responses.ResponseInput,
      store: false,
    })) as unknown as Obj;
    const item = (compacted['output'] as Obj[])[0] as Obj;
    fx.upstream.reset();

    const next = await client.responses.create({
      model: 'svc-pro',
      input: [item, { role: 'user', content: 'go on' }] as unknown as OpenAI.Responses.ResponseInput,
    });
    assert.equal(next.status, 'completed');
    const messages = fx.upstream.requests[0]?.body['messages'] as Obj[];
    assert.equal(messages.length, 2);
    assert.equal(messages[0]?.['role'], 'user');
    assert.match(String(messages[0]?.['content']), /summary of everything before this point[\s\S]*SUMMARY-42/);
    assert.equal(messages[1]?.['content'], 'go on');

    fx.upstream.reset();
    const balanceB = await fx.balance(b.accountId);
    const sealed = String(item['encrypted_content']);
    const forged = sealed.slice(0, -4) + (sealed.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    for (const [k, encrypted] of [
      [a.key, forged],
      [a.key, 'svc_cmp.1.nokey.AAAA'],
      [a.key, 'not a seal'],
      [b.key, sealed],
    ] as const) {
      const response = await post(fx.baseURL, '/responses', k, {
        model: 'svc-pro',
        input: [
          { type: 'compaction', encrypted_content: encrypted },
          { role: 'user', content: 'go on' },
        ],
      });
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as { error: Obj };
      assert.equal(error['param'], 'input[0].encrypted_content');
      assert.equal(error['type'], 'invalid_request_error');
    }
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(b.accountId), balanceB);
  });

  it('refuses a compaction_trigger that is not last, before any hold', async () => {
    const { key, accountId } = await fx.fund(10_000);
    const response = await post(fx.baseURL, '/responses', key, {
      model: 'svc-pro',
      input: [{ type: 'compaction_trigger' }, { role: 'user', content: 'hi' }],
    });
    assert.equal(response.status, 400);
    const { error } = (await response.json()) as { error: Obj };
    assert.equal(error['param'], 'input[0]');
    assert.match(String(error['message']), /must be the final input item/);
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 10_000n);
  });

  it('POST /responses/compact answers a response.compaction through the real client, and continues with previous_response_id on stored turns', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'SUMMARY-V1' });
    const compacted = await fx.client(key).responses.compact({
      model: 'svc-pro',
      input: history as OpenAI.Responses.ResponseInput,
      instructions: 'You are Codex.',
    });
    assert.equal(compacted.object, 'response.compaction');
    assert.equal(compacted.output.length, 1);
    assert.equal(compacted.output[0]?.type, 'compaction');
    const price = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.equal(await fx.balance(accountId), 1_000_000n - price);

    // With store (a plain Responses call), the compacted turn continues from the summary.
    fx.upstream.enqueue({ kind: 'text', text: 'SUMMARY-V2' });
    const stored = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: [...history, { type: 'compaction_trigger' }] as OpenAI.Responses.ResponseInput,
    });
    fx.upstream.reset();
    await fx.client(key).responses.create({ model: 'svc-pro', previous_response_id: stored.id, input: 'next' });
    const messages = fx.upstream.requests[0]?.body['messages'] as Obj[];
    assert.equal(messages.length, 2);
    assert.match(String(messages[0]?.['content']), /SUMMARY-V2/);
  });
});

describe('OpenAI API: compaction keys (configured, rotated, generated into the database)', function () {
  let upstream: FakeUpstream;
  const running: TestSvc[] = [];
  const k1 = randomBytes(32).toString('base64');
  const k2 = randomBytes(32).toString('base64');

  before(async () => {
    upstream = await startFakeUpstream();
  });
  after(async () => {
    for (const svc of running.reverse()) await svc.close();
    await upstream.close();
  });

  async function start(keys: string, databaseUrl?: string): Promise<TestSvc> {
    const svc = await startSvc({
      config: testConfig(upstream.baseUrl, keys),
      ...(databaseUrl === undefined ? {} : { databaseUrl }),
    });
    running.push(svc);
    return svc;
  }

  async function compact(svc: TestSvc, key: string): Promise<string> {
    const response = await post(`${svc.baseUrl}/v1/openai`, '/responses/compact', key, {
      model: 'svc-pro',
      input: 'remember 7',
    });
    assert.equal(response.status, 200);
    const body = (await response.json()) as { output: Obj[] };
    return String(body.output[0]?.['encrypted_content']);
  }

  async function opens(svc: TestSvc, key: string, sealed: string): Promise<number> {
    const response = await post(`${svc.baseUrl}/v1/openai`, '/responses', key, {
      model: 'svc-pro',
      input: [
        { type: 'compaction', encrypted_content: sealed },
        { role: 'user', content: 'go' },
      ],
    });
    return response.status;
  }

  it('a rotated key still opens what the old one sealed; new seals use the new key; a dropped key no longer opens', async () => {
    const first = await start(`responses:\n  compaction_keys:\n    k1: "${k1}"\n`);
    const { key } = await first.createFundedKey(1_000_000);
    const old = await compact(first, key);
    assert.match(old, /^svc_cmp\.1\.k1\./);

    const rotated = await start(
      `responses:\n  compaction_key: k2\n  compaction_keys:\n    k1: "${k1}"\n    k2: "${k2}"\n`,
      first.databaseUrl,
    );
    assert.equal(await opens(rotated, key, old), 200);
    assert.match(await compact(rotated, key), /^svc_cmp\.1\.k2\./);

    const dropped = await start(`responses:\n  compaction_keys:\n    k2: "${k2}"\n`, first.databaseUrl);
    assert.equal(await opens(dropped, key, old), 400);
  });

  it('without configured keys, one is generated into the database on first use and shared by every core on it', async () => {
    const a = await start('');
    const { key } = await a.createFundedKey(1_000_000);
    const sealed = await compact(a, key);
    assert.match(sealed, /^svc_cmp\.1\.db/);
    const b = await start('', a.databaseUrl);
    assert.equal(await opens(b, key, sealed), 200);
  });

  it('refuses a compaction key that is not 32 bytes of base64 at start', async () => {
    await assert.rejects(start(`responses:\n  compaction_keys:\n    k1: "short"\n`), /32 random bytes/);
  });
});
