// The gateway→core gRPC hop alone, in CPU µs per unary call (`npx tsx bench/hop-probe.ts [CALLS] [raw]`):
// a nice-grpc server with the real ChatService definition (a stub answering a fixed completion, a
// header and a trailer, as the core's createChatCompletion does) and the gateway's own core client
// (`connectCore` + `callCore`) on loopback, in one process, 32 calls in flight; process CPU over
// CALLS calls (default 20,000) after 3,000 to warm up. `raw` calls grpc-js's makeUnaryRequest
// directly instead, the floor under the gateway's client. CPU time, not wall time: it varies far
// less than req/s with the neighbours' load, so an A/B of the client (or the server's options) can
// be run on a busy machine, alternating runs.
import { createServer } from 'nice-grpc';
import { ChannelCredentials, Client as GrpcClient, Metadata as GrpcMetadata } from '@grpc/grpc-js';
import { ChatServiceDefinition, CreateChatCompletionResponse } from '../gen/svc/core/v1/chat';
import { connectCore, callCore } from '../adapters/http/core-client';
const response = CreateChatCompletionResponse.fromPartial({
  completion: {
    id: 'chatcmpl-abc123',
    created: 1700000000n,
    model: 'svc-0ms',
    systemFingerprint: 'fp',
    serviceTier: 'default',
    choices: [
      { index: 0, finishReason: 'stop', message: { role: 4, content: 'Hello benchmark! '.repeat(4) } } as never,
    ],
    usage: { promptTokens: 20n, completionTokens: 16n, totalTokens: 36n, cost: 45n } as never,
  },
  billing: { requestId: 'req_1234567890', cost: 45n, balanceAfter: 1000000n } as never,
});
async function main() {
  CreateChatCompletionResponse.encode(response).finish();
  const server = createServer({ 'grpc.enable_channelz': 0, 'grpc-node.max_session_memory': Number.MAX_SAFE_INTEGER });
  const impl: Record<string, unknown> = {};
  for (const name of Object.keys(ChatServiceDefinition.methods))
    impl[name] = async () => {
      throw new Error('unused');
    };
  impl['createChatCompletion'] = async (
    _req: unknown,
    ctx: { header: Map<string, string>; trailer: Map<string, string> },
  ) => {
    ctx.header.set('x-request-id', 'req_1234567890');
    ctx.trailer.set('x-svc-outcome', 'ok');
    return response;
  };
  server.add(ChatServiceDefinition, impl as never);
  const port = await server.listen('127.0.0.1:0');
  const conn = connectCore(`127.0.0.1:${port}`);
  const params = {
    model: 'svc-0ms',
    messages: [{ role: 3, content: 'Say hello to the benchmark, in a dozen words or so.' }],
    maxTokens: 64,
    stop: [],
    n: 1,
    tools: [],
    user: '',
    maxTokensParam: '',
  } as never;
  const raw = new GrpcClient(`127.0.0.1:${port}`, ChannelCredentials.createInsecure(), { 'grpc.enable_channelz': 0 });
  const def = ChatServiceDefinition.methods.createChatCompletion;
  const ser = (m: unknown) => Buffer.from(def.requestType.encode(m as never).finish());
  const des = (b: Buffer) => def.responseType.decode(b);
  const direct = () =>
    new Promise((resolve, reject) => {
      const md = new GrpcMetadata();
      md.set('authorization', 'Bearer svc_sk_5NeSpKb2F5hbgtKPeQ3kpuXU8I9ygpOum8mvf3N60PrOae');
      const call = raw.makeUnaryRequest(
        '/svc.core.v1.ChatService/CreateChatCompletion',
        ser,
        des,
        def.requestType.fromPartial({ params }),
        md,
        (e, r) => (e ? reject(e) : resolve(r)),
      );
      call.on('metadata', () => undefined);
      call.on('status', () => undefined);
    });
  const viaNice = () =>
    callCore(
      {
        authorization: 'Bearer svc_sk_5NeSpKb2F5hbgtKPeQ3kpuXU8I9ygpOum8mvf3N60PrOae',
        ids: { client: undefined, adopt() {} } as never,
      },
      (o) => conn.clients.chat.createChatCompletion({ params }, o),
    );
  const one = process.argv[3] === 'raw' ? direct : viaNice;
  const N = Number(process.argv[2] ?? 20000);
  const run = async (n: number) => {
    let i = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (i++ < n) await one();
      }),
    );
  };
  // One call first: a failure says why, rather than counting failures as calls.
  await one();
  await run(3000);
  const c0 = process.cpuUsage();
  const t0 = Date.now();
  await run(N);
  const c = process.cpuUsage(c0);
  console.log(
    `hop (${process.argv[3] ?? 'nice'}): ${((c.user + c.system) / N).toFixed(1)} µs CPU/call, ${(N / ((Date.now() - t0) / 1000)).toFixed(0)} calls/s`,
  );
  conn.close();
  raw.close();
  server.forceShutdown();
}
main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
