import assert from 'node:assert/strict';
import { ChannelCredentials } from '@grpc/grpc-js';
import { createChannel, createClient, Metadata } from 'nice-grpc';
import { ChatRole, ChatServiceDefinition, type StreamChatCompletionResponse } from '../../gen/svc/core/v1/chat';
import { STREAM_BATCH_HEADER } from '../../core/chat/stream-batch';
import { callCore, streamCore } from '../../adapters/http/core-client';
import { callerIds } from '../../adapters/http/request';
import { SvcError } from '../../core/errors';
import { startSvc, type TestSvc } from '../helpers/harness';

describe('ChatService over gRPC (internal callers), on the built-in sandbox config', function () {
  let svc: TestSvc;

  before(async () => {
    svc = await startSvc();
  });
  after(async () => {
    await svc.close();
  });

  const meta = (key: string | undefined, clientRequestId: string) => ({
    authorization: key === undefined ? undefined : `Bearer ${key}`,
    ids: callerIds(clientRequestId),
  });
  const params = { model: 'svc-pro', messages: [{ role: ChatRole.CHAT_ROLE_USER, content: 'hello core' }] };

  it('answers unary calls with the completion and its billing, under a request id the core minted', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const m = meta(key, 'req_grpc_unary_1');
    const result = await callCore(m, (o) => svc.connection.clients.chat.createChatCompletion({ params }, o));
    assert.match(result.completion?.choices[0]?.message?.content ?? '', /^\[sandbox\].*hello core/);
    assert.equal(result.completion?.systemFingerprint, 'fp_svc_sandbox');
    // The caller's id is correlation only; the charge's identity is the core's own, sent back in the headers.
    assert.match(result.billing?.requestId ?? '', /^req_[0-9a-f]{35}$/);
    assert.notEqual(result.billing?.requestId, 'req_grpc_unary_1');
    assert.equal(m.ids.current, result.billing?.requestId);
    assert.equal(result.billing?.cost, result.completion?.usage?.cost);
    assert.ok((result.billing?.cost ?? 0n) >= 1n);
    const wallet = await svc.wallet(accountId);
    assert.equal(result.billing?.balanceAfter, wallet.balance);
    assert.equal(wallet.balance, 10_000n - (result.billing?.cost ?? 0n));
  });

  it('streams chunks and ends with one message carrying usage and billing', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const messages = [];
    for await (const m of streamCore(meta(key, 'req_grpc_stream_1'), (o) =>
      svc.connection.clients.chat.streamChatCompletion({ params }, o),
    ))
      messages.push(m);
    const last = messages[messages.length - 1];
    assert.ok(last?.billing);
    assert.deepEqual(last.chunk?.choices, []);
    assert.equal(last.chunk?.usage?.cost, last.billing.cost);
    assert.ok(messages.slice(0, -1).every((m) => m.billing === undefined && (m.chunk?.choices.length ?? 0) === 1));
    assert.equal((await svc.wallet(accountId)).balance, 10_000n - last.billing.cost);
  });

  it('batches chunks only for a caller that asks, and the batches hold the same chunks and one billing', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const channel = createChannel(svc.coreAddress, ChannelCredentials.createInsecure());
    const chat = createClient(ChatServiceDefinition, channel);
    const run = async (batched: boolean): Promise<StreamChatCompletionResponse[]> => {
      const metadata = new Metadata({ authorization: `Bearer ${key}` });
      if (batched) metadata.set(STREAM_BATCH_HEADER, '1');
      const out: StreamChatCompletionResponse[] = [];
      for await (const m of chat.streamChatCompletion({ params }, { metadata })) out.push(m);
      return out;
    };
    try {
      const plain = await run(false);
      const batched = await run(true);
      // Without the ask: one chunk per message, as older gateways read them.
      assert.ok(plain.every((m) => m.chunk !== undefined && m.chunks.length === 0));
      // With it: every message holds its chunks in `chunk` (one) or `chunks` (several), never both.
      assert.ok(batched.every((m) => (m.chunk === undefined) !== (m.chunks.length === 0)));
      assert.ok(batched.every((m) => m.chunks.length !== 1));
      const flat = (ms: StreamChatCompletionResponse[]) =>
        ms.flatMap((m) => (m.chunk === undefined ? m.chunks : [m.chunk])).map((c) => ({ ...c, id: '', created: 0n }));
      assert.deepEqual(flat(batched), flat(plain));
      assert.ok(batched.length <= plain.length);
      // The billing once, on the last message, and each run charged once.
      for (const ms of [plain, batched]) {
        assert.ok(ms.slice(0, -1).every((m) => m.billing === undefined));
        assert.ok(ms.at(-1)?.billing);
      }
      const costs = [plain, batched].map((ms) => ms.at(-1)?.billing?.cost ?? 0n);
      assert.equal((await svc.wallet(accountId)).balance, 10_000n - (costs[0] ?? 0n) - (costs[1] ?? 0n));
    } finally {
      channel.close();
    }
  });

  it('needs a key, with the domain error codes in trailers', async () => {
    const missing = await callCore(meta(undefined, 'r1'), (o) =>
      svc.connection.clients.chat.createChatCompletion({ params }, o),
    ).catch((e: unknown) => e);
    assert.ok(missing instanceof SvcError && missing.code === 'missing_api_key');
    const md = new Metadata();
    md.set('authorization', `Bearer ${svc.adminToken}`);
    const admin = await svc.connection.clients.models.listModels({}, { metadata: md }).catch((e: unknown) => e);
    assert.ok(admin instanceof Error);
    const { key } = await svc.createFundedKey(10);
    const models = await callCore(meta(key, 'r2'), (o) => svc.connection.clients.models.listModels({}, o));
    assert.deepEqual(
      models.models.map((m) => [m.id, m.sandbox]),
      [
        ['svc-pro', true],
        ['svc-embed', true],
        // The media models of SPEC §14 (docs/media.md).
        ['svc-image', true],
        ['svc-tts', true],
        ['svc-transcribe', true],
        ['svc-moderation', true],
        ['svc-rerank', true],
      ],
    );
    const bad = await callCore(meta(key, 'r3'), (o) =>
      svc.connection.clients.chat.createChatCompletion(
        { params: { ...params, messages: [{ role: ChatRole.CHAT_ROLE_UNSPECIFIED, content: 'x' }] } },
        o,
      ),
    ).catch((e: unknown) => e);
    assert.ok(bad instanceof SvcError);
    assert.deepEqual([bad.code, bad.param], ['invalid_argument', 'messages[0].role']);
  });
});
