import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { FAKE_MCP_TOKEN, startFakeMcpServer, type FakeMcpServer } from '../fakes/mcp-server';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { configB } from '../mcp/helpers';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { assertEvent, assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

type Json = Record<string, unknown>;

/** The web_search tariff of configB (test/mcp/helpers.ts). */
const SEARCH_PRICE = 150n;

/*
 * Issue 32 item 4 (SPEC §7d): the Responses API's hosted `mcp` tool, served by svc's own MCP
 * client: the remote server's tools are listed before anything is held, offered to the model as
 * `mcp__<label>__<tool>`, run by svc between turns inside the one hosted loop, and only the model
 * turns are charged. The remote server is the MCP SDK's own server on 127.0.0.1.
 */

async function sseEvents(res: Response): Promise<Json[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .map((frame) => frame.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => JSON.parse(line.slice('data: '.length)) as Json);
}

const calling = (calls: { name: string; args: Json }[], usage = { prompt_tokens: 60, completion_tokens: 12 }): FakeBehavior => ({
  kind: 'tool_calls',
  calls: calls.map((c, i) => ({ id: `call_${i}`, name: c.name, arguments: JSON.stringify(c.args) })),
  usage,
});

const answer = (usage = { prompt_tokens: 200, completion_tokens: 20 }): FakeBehavior => ({
  kind: 'text',
  text: 'The docs say so.',
  usage,
});

describe('OpenAI API: the hosted mcp tool (svc as the MCP client)', function () {
  this.timeout(60_000);
  let remote: FakeMcpServer;
  let fx: OpenAiFixture;
  const logLines: string[] = [];

  const mcpTool = (extra: Json = {}): Json => ({
    type: 'mcp',
    server_label: 'docs',
    server_url: remote.url,
    headers: { Authorization: `Bearer ${FAKE_MCP_TOKEN}` },
    require_approval: 'never',
    ...extra,
  });

  async function post(key: string, body: Json): Promise<Response> {
    return fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  async function books(accountId: string): Promise<{ charged: bigint; charges: bigint[]; held: bigint }> {
    const { balance, held } = await fx.settled(accountId);
    const ledger = await fx.svc.ledger(accountId, 1000);
    const charges = ledger.filter((e) => e.kind === 'charge').map((e) => -e.amount);
    const topups = ledger.filter((e) => e.kind === 'topup').reduce((sum, e) => sum + e.amount, 0n);
    return { charged: topups - balance, charges, held };
  }

  before(async () => {
    remote = await startFakeMcpServer();
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    fx = await startOpenAiFixture({
      extraConfig: 'responses:\n  mcp_insecure_servers: true\n',
      logger: pino({ level: 'info' }, sink),
    });
  });
  after(async () => {
    await fx.close();
    await remote.close();
  });
  beforeEach(() => {
    fx.upstream.reset();
  });

  it('lists the tools, runs the call the model makes on the server, and charges only the turns', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(calling([{ name: 'mcp__docs__lookup', args: { word: 'svc' } }]), answer());
    const callsBefore = remote.calls.length;
    const res = await post(key, { model: 'svc-pro', input: 'what is svc?', tools: [mcpTool()] });
    const response = (await res.json()) as Json;
    assert.equal(res.status, 200, JSON.stringify(response));
    assertSchema('Response', response);
    const output = response['output'] as Json[];
    assert.deepEqual(
      output.map((i) => i['type']),
      ['mcp_list_tools', 'mcp_call', 'message'],
    );
    const list = output[0] as Json;
    assert.equal(list['server_label'], 'docs');
    assert.deepEqual(
      (list['tools'] as Json[]).map((t) => [t['name'], t['description'], t['input_schema']]),
      [
        ['lookup', 'Looks a word up in the docs.', { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] }],
        ['broken', 'Always fails.', { type: 'object', properties: {} }],
      ],
    );
    const call = output[1] as Json;
    assert.deepEqual(
      [call['server_label'], call['name'], call['arguments'], call['output'], call['error'], call['status']],
      ['docs', 'lookup', JSON.stringify({ word: 'svc' }), 'svc: a word found in the docs.', null, 'completed'],
    );
    assert.deepEqual(remote.calls.slice(callsBefore), [{ name: 'lookup', arguments: { word: 'svc' } }]);
    // The model was offered the server's tools as functions and got the output back.
    const first = fx.upstream.requests[0]?.body;
    assert.deepEqual(
      (first?.['tools'] as Json[]).map((t) => (t['function'] as Json)['name']),
      ['mcp__docs__lookup', 'mcp__docs__broken'],
    );
    const second = fx.upstream.requests[1]?.body;
    const toolMessage = (second?.['messages'] as Json[]).find((m) => m['role'] === 'tool');
    assert.equal(toolMessage?.['content'], 'svc: a word found in the docs.');
    // The headers went to the server, and nowhere else: not echoed, not logged.
    assert.ok(remote.requests.some((r) => r.headers['authorization'] === `Bearer ${FAKE_MCP_TOKEN}`));
    const echoed = (response['tools'] as Json[])[0] as Json;
    assert.equal(echoed['headers'], undefined);
    assert.equal(echoed['type'], 'mcp');
    assert.ok(!JSON.stringify(response).includes(FAKE_MCP_TOKEN));
    assert.ok(!logLines.join('').includes(FAKE_MCP_TOKEN));
    // One charge: the two turns; the remote call costs nothing here.
    const cost = expectedCost(60, 12) + expectedCost(200, 20);
    assert.equal((response['usage'] as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('streams mcp_list_tools and mcp_call with their documented events; a failing tool is the item error and the model goes on', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(calling([{ name: 'mcp__docs__broken', args: {} }]), answer());
    const res = await post(key, { model: 'svc-pro', input: 'try it', tools: [mcpTool()], stream: true });
    assert.equal(res.status, 200);
    const events = await sseEvents(res);
    for (const event of events) assertEvent(event);
    const types = events.map((e) => e['type']);
    const list = types.indexOf('response.mcp_list_tools.in_progress');
    assert.deepEqual(types.slice(list - 1, list + 3), [
      'response.output_item.added',
      'response.mcp_list_tools.in_progress',
      'response.mcp_list_tools.completed',
      'response.output_item.done',
    ]);
    const call = types.indexOf('response.mcp_call_arguments.done');
    assert.deepEqual(types.slice(call - 2, call + 4), [
      'response.output_item.added',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.in_progress',
      'response.mcp_call.failed',
      'response.output_item.done',
    ]);
    assert.ok(!types.includes('response.function_call_arguments.delta'), "the hosted call is not the client's");
    const completed = events[events.length - 1]?.['response'] as Json;
    assert.equal(events[events.length - 1]?.['type'], 'response.completed');
    assertSchema('Response', completed);
    const output = completed['output'] as Json[];
    assert.deepEqual(
      output.map((i) => i['type']),
      ['mcp_list_tools', 'mcp_call', 'message'],
    );
    assert.equal(output[1]?.['status'], 'failed');
    assert.deepEqual(output[1]?.['error'], {
      type: 'mcp_tool_execution_error',
      content: [{ type: 'text', text: 'the docs index is down' }],
    });
    const toolMessage = (fx.upstream.requests[1]?.body['messages'] as Json[]).find((m) => m['role'] === 'tool');
    assert.equal(toolMessage?.['content'], 'Error: the docs index is down');
    const cost = expectedCost(60, 12) + expectedCost(200, 20);
    assert.equal((completed['usage'] as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('a later turn chains on it: previous_response_id, and its output items sent back as input, are accepted', async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue(calling([{ name: 'mcp__docs__lookup', args: { word: 'svc' } }]), answer());
    const first = (await (await post(key, { model: 'svc-pro', input: 'what is svc?', tools: [mcpTool()] })).json()) as Json;
    fx.upstream.enqueue(answer(), answer());
    const chained = await post(key, { model: 'svc-pro', input: 'and then?', previous_response_id: first['id'] });
    assert.equal(chained.status, 200, await chained.clone().text());
    const resent = await post(key, {
      model: 'svc-pro',
      input: [{ role: 'user', content: 'what is svc?' }, ...(first['output'] as Json[]), { role: 'user', content: 'and then?' }],
    });
    assert.equal(resent.status, 200, await resent.clone().text());
    // The records stay with svc; the chat upstream gets the conversation's messages.
    const upstreamMessages = fx.upstream.requests[3]?.body['messages'] as Json[];
    assert.deepEqual(
      upstreamMessages.map((m) => m['role']),
      ['user', 'assistant', 'user'],
    );
  });

  it('tool_choice {type: mcp, server_label, name} forces that tool on the first turn; without a name, one of the server\'s', async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue(calling([{ name: 'mcp__docs__lookup', args: { word: 'x' } }]), answer());
    const forced = await post(key, {
      model: 'svc-pro',
      input: 'x',
      tools: [mcpTool(), { type: 'function', name: 'local', parameters: { type: 'object', properties: {} } }],
      tool_choice: { type: 'mcp', server_label: 'docs', name: 'lookup' },
    });
    const response = (await forced.json()) as Json;
    assert.equal(forced.status, 200, JSON.stringify(response));
    assert.deepEqual(response['tool_choice'], { type: 'mcp', server_label: 'docs', name: 'lookup' });
    assert.deepEqual(fx.upstream.requests[0]?.body['tool_choice'], { type: 'function', function: { name: 'mcp__docs__lookup' } });
    // Forced once, as at OpenAI: the next turn chooses for itself.
    assert.equal(fx.upstream.requests[1]?.body['tool_choice'], 'auto');
    fx.upstream.reset();
    fx.upstream.enqueue(answer());
    const any = await post(key, {
      model: 'svc-pro',
      input: 'x',
      tools: [mcpTool(), { type: 'function', name: 'local', parameters: { type: 'object', properties: {} } }],
      tool_choice: { type: 'mcp', server_label: 'docs' },
      max_tool_calls: 0,
    });
    assert.equal(any.status, 200, await any.clone().text());
    const unknown = await post(key, {
      model: 'svc-pro',
      input: 'x',
      tools: [mcpTool()],
      tool_choice: { type: 'mcp', server_label: 'docs', name: 'nope' },
    });
    assert.equal(unknown.status, 400);
    assert.equal(((await unknown.json()) as { error: Json }).error['param'], 'tool_choice.name');
  });

  it('a compaction_trigger with an mcp tool summarises without contacting the server', async () => {
    const { key } = await fx.fund(1_000_000);
    const before = remote.requests.length;
    fx.upstream.enqueue(answer());
    const res = await post(key, {
      model: 'svc-pro',
      input: [{ role: 'user', content: 'hello' }, { type: 'compaction_trigger' }],
      tools: [mcpTool()],
    });
    const response = (await res.json()) as Json;
    assert.equal(res.status, 200, JSON.stringify(response));
    assert.deepEqual(
      (response['output'] as Json[]).map((i) => i['type']),
      ['compaction'],
    );
    assert.equal(remote.requests.length, before);
  });

  it('max_tool_calls bounds the remote calls: one runs, the rest are not, and the model is told', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(
      calling([
        { name: 'mcp__docs__lookup', args: { word: 'a' } },
        { name: 'mcp__docs__lookup', args: { word: 'b' } },
        { name: 'mcp__docs__lookup', args: { word: 'c' } },
      ]),
      answer(),
    );
    const callsBefore = remote.calls.length;
    const res = await post(key, { model: 'svc-pro', input: 'look up', tools: [mcpTool()], max_tool_calls: 1 });
    const response = (await res.json()) as Json;
    assert.equal(res.status, 200, JSON.stringify(response));
    assert.equal(remote.calls.length - callsBefore, 1);
    assert.equal((response['output'] as Json[]).filter((i) => i['type'] === 'mcp_call').length, 1);
    const second = fx.upstream.requests[1]?.body;
    assert.equal(second?.['tool_choice'], 'none');
    const tools = (second?.['messages'] as Json[]).filter((m) => m['role'] === 'tool');
    assert.equal(tools.filter((m) => /^Not run/.test(String(m['content']))).length, 2);
    const cost = expectedCost(60, 12) + expectedCost(200, 20);
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('a server that refuses the headers (401) fails the request with 424 before any turn, and nothing is charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const res = await post(key, {
      model: 'svc-pro',
      input: 'x',
      tools: [mcpTool({ headers: { Authorization: 'Bearer wrong' } })],
    });
    const body = (await res.json()) as { error: Json };
    assert.equal(res.status, 424, JSON.stringify(body));
    assert.equal(body.error['code'], 'mcp_server_error');
    assert.equal(body.error['type'], 'external_connector_error');
    assert.equal(body.error['param'], 'tools[0].server_url');
    assert.match(String(body.error['message']), /MCP server 'docs'.*HTTP 401/);
    assert.equal(fx.upstream.requests.length, 0);
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });

  it('an unreachable server is a 424 too', async () => {
    const { key } = await fx.fund(1_000_000);
    const closed = await startFakeMcpServer();
    await closed.close();
    const res = await post(key, { model: 'svc-pro', input: 'x', tools: [mcpTool({ server_url: closed.url })] });
    const body = (await res.json()) as { error: Json };
    assert.equal(res.status, 424, JSON.stringify(body));
    assert.match(String(body.error['message']), /could not be reached/);
    assert.equal(fx.upstream.requests.length, 0);
  });

  it('a wallet with no credit is refused before svc contacts the server on its behalf', async () => {
    const { key, accountId } = await fx.fund(0);
    const before = remote.requests.length;
    const res = await post(key, { model: 'svc-pro', input: 'x', tools: [mcpTool({})] });
    const body = (await res.json()) as { error: Json };
    assert.equal(res.status, 429, JSON.stringify(body));
    assert.equal(body.error['code'], 'insufficient_quota');
    assert.equal(remote.requests.length, before, 'the server was not contacted');
    assert.equal((await fx.svc.wallet(accountId)).balance, 0n);
  });

  for (const [name, tool, param] of [
    ['require_approval absent (OpenAI would ask)', { require_approval: undefined }, 'tools[0].require_approval'],
    ['require_approval "always"', { require_approval: 'always' }, 'tools[0].require_approval'],
    ['server_url missing', { server_url: undefined }, 'tools[0].server_url'],
    ['server_url not a URL', { server_url: 'not a url' }, 'tools[0].server_url'],
  ] as const) {
    it(`${name} is a 400 naming ${param}, and the server is not contacted`, async () => {
      const { key } = await fx.fund(1_000_000);
      const before = remote.requests.length;
      const res = await post(key, { model: 'svc-pro', input: 'x', tools: [mcpTool(tool)] });
      const body = (await res.json()) as { error: Json };
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(body.error['param'], param);
      assert.equal(remote.requests.length, before);
    });
  }

  it('require_approval {never: {tool_names}} must cover every offered tool; allowed_tools narrows them', async () => {
    const { key } = await fx.fund(1_000_000);
    const partial = await post(key, {
      model: 'svc-pro',
      input: 'x',
      tools: [mcpTool({ require_approval: { never: { tool_names: ['lookup'] } } })],
    });
    const refused = (await partial.json()) as { error: Json };
    assert.equal(partial.status, 400, JSON.stringify(refused));
    assert.equal(refused.error['param'], 'tools[0].require_approval');
    assert.match(String(refused.error['message']), /'broken'/);
    fx.upstream.enqueue(answer());
    const narrowed = await post(key, {
      model: 'svc-pro',
      input: 'x',
      tools: [mcpTool({ require_approval: { never: { tool_names: ['lookup'] } }, allowed_tools: ['lookup'] })],
    });
    const response = (await narrowed.json()) as Json;
    assert.equal(narrowed.status, 200, JSON.stringify(response));
    assert.deepEqual(
      (fx.upstream.requests[0]?.body['tools'] as Json[]).map((t) => (t['function'] as Json)['name']),
      ['mcp__docs__lookup'],
    );
    assert.deepEqual(((response['output'] as Json[])[0]?.['tools'] as Json[]).map((t) => t['name']), ['lookup']);
  });

  it("after all of the above (failures included), the client's headers never reached svc's log", () => {
    assert.ok(logLines.length > 0, 'the log was captured');
    assert.ok(logLines.some((line) => line.includes('could not list its tools')), 'the failures were logged');
    const log = logLines.join('');
    assert.ok(!log.includes(FAKE_MCP_TOKEN));
    assert.ok(!log.includes('Bearer wrong'));
  });
});

describe('OpenAI API: the hosted mcp tool refuses internal addresses without the test switch', function () {
  this.timeout(60_000);
  let remote: FakeMcpServer;
  let fx: OpenAiFixture;

  before(async () => {
    remote = await startFakeMcpServer();
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
    await remote.close();
  });

  it('https on 127.0.0.1, http on 127.0.0.1 and the cloud metadata address: 424, the server never hears of it, nothing charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    for (const url of [`https://127.0.0.1:${remote.port}/mcp`, `http://127.0.0.1:${remote.port}/mcp`, 'https://169.254.169.254/mcp']) {
      const res = await fetch(`${fx.baseURL}/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'svc-pro',
          input: 'x',
          tools: [{ type: 'mcp', server_label: 'docs', server_url: url, require_approval: 'never' }],
        }),
      });
      const body = (await res.json()) as { error: Json };
      assert.equal(res.status, 424, `${url}: ${JSON.stringify(body)}`);
      assert.equal(body.error['code'], 'mcp_server_error');
      // The guard's reason (which address, which range) is not the client's to read.
      assert.ok(!String(body.error['message']).includes('127.0.0.1'));
    }
    assert.equal(remote.requests.length, 0);
    assert.equal(fx.upstream.requests.length, 0);
    const { balance, held } = await fx.settled(accountId);
    assert.deepEqual([balance, held], [1_000_000n, 0n]);
  });
});

describe("OpenAI API: the hosted mcp tool pointed at svc's own /v1/mcp", function () {
  this.timeout(60_000);
  let fakes: FakeToolProviders;
  let fx: OpenAiFixture;

  before(async () => {
    fakes = await startFakeToolProviders();
    fx = await startOpenAiFixture({ extraConfig: () => `${configB(fakes)}responses:\n  mcp_insecure_servers: true\n` });
  });
  after(async () => {
    await fx.close();
    await fakes.close();
  });

  it("runs svc's web_search through MCP: the search is charged to the key in headers, the turns to the caller, each once", async () => {
    const caller = await fx.fund(1_000_000);
    const owner = await fx.fund(1_000_000);
    fakes.set('searxng', 'ok');
    fx.upstream.enqueue(calling([{ name: 'mcp__self__web_search', args: { query: 'svc news' } }]), answer());
    const res = await fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${caller.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-pro',
        input: 'news?',
        tools: [
          {
            type: 'mcp',
            server_label: 'self',
            server_url: `${fx.svc.baseUrl}/v1/mcp`,
            headers: { Authorization: `Bearer ${owner.key}` },
            allowed_tools: ['web_search'],
            require_approval: 'never',
          },
        ],
      }),
    });
    const response = (await res.json()) as Json;
    assert.equal(res.status, 200, JSON.stringify(response));
    assertSchema('Response', response);
    const output = response['output'] as Json[];
    assert.deepEqual(
      output.map((i) => i['type']),
      ['mcp_list_tools', 'mcp_call', 'message'],
    );
    assert.equal(output[1]?.['status'], 'completed', JSON.stringify(output[1]));
    assert.equal(fakes.requestsTo('searxng').length, 1);
    const turns = expectedCost(60, 12) + expectedCost(200, 20);
    assert.equal((response['usage'] as Json)['cost'], Number(turns));
    const callerBooks = await fx.settled(caller.accountId);
    assert.deepEqual([callerBooks.balance, callerBooks.held], [1_000_000n - turns, 0n]);
    const ownerBooks = await fx.settled(owner.accountId);
    assert.deepEqual([ownerBooks.balance, ownerBooks.held], [1_000_000n - SEARCH_PRICE, 0n]);
    const ownerCharges = (await fx.svc.ledger(owner.accountId, 100)).filter((e) => e.kind === 'charge');
    assert.deepEqual(
      ownerCharges.map((e) => -e.amount),
      [SEARCH_PRICE],
    );
  });
});
