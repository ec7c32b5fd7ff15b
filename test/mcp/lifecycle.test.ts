import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClientError, Metadata, Status } from 'nice-grpc';
import pino from 'pino';
import { tokenCost } from '../../core/tools/service';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertMcpResponse } from '../helpers/mcp-schema';
import { post, toolCall } from './helpers';

/** Waits (without asserting on time) until `check` holds; fails after many rounds. */
async function eventually(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await sleep(10);
  }
  assert.fail(`never happened: ${what}`);
}

describe('tool calls: token pricing, rate limits and cancellation', () => {
  describe('tokenCost', () => {
    const price = { kind: 'tokens', tariff: { inputPer1m: 100_000n, outputPer1m: 300_000n }, cap: 50n } as const;
    it('rounds up, charges at least 1 and never more than the hold', () => {
      assert.equal(tokenCost(price, 12, 215), 50n); // 1.2 + 64.5 = 65.7 → 66, but the hold (cap) was 50
      assert.equal(tokenCost({ ...price, cap: 1000n }, 12, 215), 66n);
      assert.equal(tokenCost({ ...price, cap: 1000n }, 0, 0), 1n);
      assert.equal(tokenCost({ ...price, cap: 1000n }, 10, 0), 1n);
      assert.equal(tokenCost({ ...price, cap: 1000n }, 10, 1), 2n);
    });
  });

  describe('against svc', () => {
    let fakes: FakeToolProviders;
    let svc: TestSvc;
    const logLines: string[] = [];
    before(async () => {
      fakes = await startFakeToolProviders();
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          logLines.push(
            ...chunk
              .toString('utf8')
              .split('\n')
              .filter((l) => l !== ''),
          );
          done();
        },
      });
      svc = await startSvc({
        logger: pino({ level: 'debug' }, sink),
        config: `
tools:
  web_search:
    provider: perplexity
    base_url: ${fakes.baseUrl('perplexity')}
    api_key: pplx-test-key
    price: { input_per_1m: 100000, output_per_1m: 100000, cap: 500 }
    timeout_ms: 60000
limits:
  requests_per_minute: 5
`,
      });
    });
    after(async () => {
      await svc?.close();
      await fakes?.close();
    });

    it('a client that goes away cancels the upstream request, releases the hold and pays nothing', async () => {
      const { key, accountId } = await svc.createFundedKey(1_000);
      fakes.set('perplexity', 'hang');
      const sent = fakes.requestsTo('perplexity').length;
      const hungUp = fakes.hungUp();
      const controller = new AbortController();
      const pending = fetch(`${svc.baseUrl}/v1/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(toolCall('web_search', { query: 'x' })),
        signal: controller.signal,
      });
      await eventually('the upstream was called', () => fakes.requestsTo('perplexity').length > sent);
      assert.equal((await svc.wallet(accountId)).held, 500n, 'the token cap is held while the call runs');
      controller.abort();
      await assert.rejects(pending);
      await eventually('the upstream request was aborted', () => fakes.hungUp() > hungUp);
      await eventually('the usage record was written', async () => {
        const rows = await svc.store.db
          .selectFrom('usage_records')
          .selectAll()
          .where('account_id', '=', accountId)
          .execute();
        return rows.length === 1;
      });
      const [usage] = await svc.store.db
        .selectFrom('usage_records')
        .selectAll()
        .where('account_id', '=', accountId)
        .execute();
      assert.equal(usage?.status, 'cancelled');
      assert.equal(usage?.cost, 0n);
      assert.deepEqual(await svc.wallet(accountId), { ...(await svc.wallet(accountId)), balance: 1_000n, held: 0n });
    });

    it('notifications/cancelled, on a POST of its own, aborts the upstream call; the hold is released, nothing charged', async () => {
      const { key, accountId } = await svc.createFundedKey(1_000);
      fakes.set('perplexity', 'hang');
      const sent = fakes.requestsTo('perplexity').length;
      const hungUp = fakes.hungUp();
      const auth = { authorization: `Bearer ${key}` };
      const pending = post(svc.baseUrl, toolCall('web_search', { query: 'x' }, 'call-to-cancel'), auth);
      await eventually('the upstream was called', () => fakes.requestsTo('perplexity').length > sent);
      // Another key naming the same id must not cancel it.
      const stranger = await svc.createFundedKey(0);
      const foreign = await post(
        svc.baseUrl,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'call-to-cancel' } },
        { authorization: `Bearer ${stranger.key}` },
      );
      assert.equal(foreign.status, 202);
      assert.ok((await svc.wallet(accountId)).held > 0n, "still running after a stranger's cancellation");
      const cancel = await post(
        svc.baseUrl,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'call-to-cancel', reason: 'user' } },
        auth,
      );
      assert.equal(cancel.status, 202);
      const reply = await pending;
      assertMcpResponse(reply.message, 'CallToolResult');
      assert.match(JSON.stringify(reply.message?.['error']), /cancelled/);
      await eventually('the upstream request was aborted', () => fakes.hungUp() > hungUp);
      await eventually('the usage record was written', async () => {
        const rows = await svc.store.db
          .selectFrom('usage_records')
          .selectAll()
          .where('account_id', '=', accountId)
          .execute();
        return rows.length === 1 && rows[0]?.status === 'cancelled' && rows[0]?.cost === 0n;
      });
      const wallet = await svc.wallet(accountId);
      assert.equal(wallet.balance, 1_000n);
      assert.equal(wallet.held, 0n);
    });

    it('a wallet below the token cap can still search: the hold is what it has free, the charge the tokens', async () => {
      // The cap is 500; the fake's search uses 12 + 215 tokens at 100,000 per 1M each: 23 credits.
      const { key, accountId } = await svc.createFundedKey(100);
      fakes.set('perplexity', 'ok');
      const reply = await post(svc.baseUrl, toolCall('web_search', { query: 'x' }), { authorization: `Bearer ${key}` });
      const result = reply.message?.['result'] as { isError: boolean; _meta: Record<string, unknown> };
      assert.equal(result.isError, false, reply.text);
      assert.equal(result._meta['svc/cost'], 23);
      assert.deepEqual(await svc.wallet(accountId), { ...(await svc.wallet(accountId)), balance: 77n, held: 0n });
    });

    it('a nearly empty wallet pays at most what it has; an empty one is refused for 1 credit, not the cap', async () => {
      const { key, accountId } = await svc.createFundedKey(10);
      fakes.set('perplexity', 'ok');
      const auth = { authorization: `Bearer ${key}` };
      const paid = await post(svc.baseUrl, toolCall('web_search', { query: 'x' }), auth);
      assert.equal((paid.message?.['result'] as { _meta: Record<string, unknown> })._meta['svc/cost'], 10);
      assert.equal((await svc.wallet(accountId)).balance, 0n);
      const refused = await post(svc.baseUrl, toolCall('web_search', { query: 'x' }), auth);
      const result = refused.message?.['result'] as { isError: boolean; _meta: Record<string, unknown> };
      assert.equal(result.isError, true);
      assert.equal(result._meta['svc/error_code'], 'insufficient_credit');
      assert.equal(result._meta['svc/price'], 1);
    });

    it('logs the operator detail of a provider failure, never a key', async () => {
      const { key } = await svc.createFundedKey(1_000);
      fakes.set('perplexity', 'error-401');
      const reply = await post(svc.baseUrl, toolCall('web_search', { query: 'x' }), {
        authorization: `Bearer ${key}`,
        'x-request-id': 'req_log_check',
      });
      const result = reply.message?.['result'] as { isError: boolean; content: Array<{ text: string }> };
      assert.equal(result.isError, true);
      assert.doesNotMatch(result.content[0]?.text ?? '', /401|Invalid API key/, 'the model sees no operator detail');
      const line = logLines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l['msg'] === 'tool provider failed' && l['requestId'] === reply.headers.get('x-request-id'));
      assert.ok(line !== undefined, 'the failure is logged with its request id');
      assert.equal(line['clientRequestId'], 'req_log_check', "and the client's own id beside it");
      assert.match(String(line['detail']), /perplexity: HTTP 401: Invalid API key/);
      assert.equal(line['errorCode'], 'upstream_error');
      const all = logLines.join('\n');
      assert.ok(!all.includes('pplx-test-key'), 'the upstream key is never logged');
      assert.ok(!all.includes(key), 'the caller key is never logged');
    });

    it('the gRPC ToolService: bad arguments and an empty wallet are is_error results with a code and details; an unknown tool NOT_FOUND', async () => {
      const { key, accountId } = await svc.createFundedKey(100);
      const metadata = new Metadata({ authorization: `Bearer ${key}` });
      const tools = svc.connection.clients.tools;
      const bad = await tools.callTool(
        { name: 'maps_search_places', arguments: { query: 'x', limit: 0 } },
        { metadata },
      );
      assert.equal(bad.isError, true);
      assert.equal(bad.errorCode, 'invalid_argument');
      assert.deepEqual({ ...bad.errorDetails }, { param: 'limit' });
      assert.match(bad.text, /"limit".*between 1 and 30.*Nothing was charged/);
      assert.equal(bad.billing, undefined, 'a refusal carries no cost');
      const poor = await tools.callTool({ name: 'maps_search_places', arguments: { query: 'داروخانه' } }, { metadata });
      assert.equal(poor.isError, true);
      assert.equal(poor.errorCode, 'insufficient_credit');
      assert.deepEqual({ ...poor.errorDetails }, { balance: 100, held: 0, available: 100, price: 460 });
      assert.match(poor.text, /needs 460 credits.*100 available.*Nothing was charged/);
      assert.equal((await svc.wallet(accountId)).balance, 100n);
      let unknown: unknown;
      try {
        await tools.callTool({ name: 'image_search', arguments: {} }, { metadata });
      } catch (error) {
        unknown = error;
      }
      assert.ok(unknown instanceof ClientError);
      assert.equal(unknown.code, Status.NOT_FOUND);
      let anonymous: unknown;
      try {
        await tools.callTool({ name: 'maps_search_places', arguments: { query: 'x' } }, {});
      } catch (error) {
        anonymous = error;
      }
      assert.ok(anonymous instanceof ClientError, 'authentication stays a gRPC error');
      assert.equal(anonymous.code, Status.UNAUTHENTICATED);
    });

    it('past the per-key rate limit: HTTP 429 with Retry-After and a JSON-RPC error, nothing charged', async () => {
      const { key, accountId } = await svc.createFundedKey(1_000);
      fakes.set('perplexity', 'empty');
      const replies = [];
      for (let i = 0; i < 6; i++)
        replies.push(
          await post(svc.baseUrl, toolCall('web_search', { query: 'x' }, i), { authorization: `Bearer ${key}` }),
        );
      assert.deepEqual(
        replies.map((r) => r.status),
        [200, 200, 200, 200, 200, 429],
      );
      const limited = replies[5];
      assert.ok(Number(limited?.headers.get('retry-after')) >= 1);
      assertMcpResponse(limited?.message, 'Result');
      const error = limited?.message?.['error'] as { code: number; message: string };
      assert.equal(error.code, -32029);
      assert.match(error.message, /Rate limit/);
      assert.equal((await svc.wallet(accountId)).balance, 1_000n);
    });
  });
});
