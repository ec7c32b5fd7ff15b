import assert from 'node:assert/strict';
import net from 'node:net';
import { startOpenAiFixture, type OpenAiFixture } from './fixture';

// Issue 20.5: a client that stops reading a large stream must not make svc buffer the whole
// stream. svc waits for the client (and so stops reading the upstream), cuts a client that stays
// blocked past `limits.stream_stall_seconds`, charges what was produced, and keeps nothing held.

// 80,000 pieces of 256 bytes (~25 MB framed): what the path may hold for a stalled client (the
// loopback sockets' kernel buffers both sides, the SSE writer's 256 KiB, the gRPC hop's HTTP/2
// windows) comes to ~20,000 pieces over gRPC, so half the stream is well above a bounded buffer
// and well below a stream read to its end (at 40,000 pieces that bound sat at the line: flaky).
const PIECES = 80_000;
const PIECE_BYTES = 256;

async function until<T>(read: () => Promise<T> | T, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 3000; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never happened: ${what}`);
}

/** Sends a streamed chat request over a raw socket and stops reading once the headers are in. */
function stuckReader(url: URL, key: string): Promise<{ socket: net.Socket; head: string }> {
  const body = JSON.stringify({
    model: 'svc-pro',
    messages: [{ role: 'user', content: 'flood me' }],
    stream: true,
  });
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(
        `POST /v1/openai/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${key}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
    let head = '';
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      // From here on nothing is read: the kernel buffers fill and the writes back up into svc.
      socket.pause();
      resolve({ socket, head: head.slice(0, head.indexOf('\r\n\r\n')) });
    };
    socket.on('data', onData);
    socket.on('error', reject);
  });
}

describe('OpenAI API: a streaming client that stops reading', function () {
  this.timeout(60_000);
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({ extraConfig: 'limits:\n  stream_stall_seconds: 2\n' });
  });
  after(async () => {
    await fx.close();
  });

  it('holds back the upstream, cuts the client after the stall timeout, and charges what was produced', async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    fx.upstream.enqueue({ kind: 'flood', pieces: PIECES, pieceBytes: PIECE_BYTES });
    const { socket, head } = await stuckReader(new URL(fx.svc.baseUrl), key);
    try {
      assert.match(head, /^HTTP\/1\.1 200/);
      // The call ends (cut by svc) without the client ever reading again.
      await until(
        () => fx.upstream.aborted,
        (n) => n === 1,
        'the upstream request was dropped',
      );
      // Back-pressure reached the upstream: it could not send the whole stream into svc.
      assert.ok(
        fx.upstream.flooded < PIECES / 2,
        `the upstream wrote ${fx.upstream.flooded} of ${PIECES} chunks: svc kept reading for a client that was not`,
      );
      const { held } = await fx.settled(accountId);
      assert.equal(held, 0n);
      const usage = await until(
        () =>
          fx.svc.store.db
            .selectFrom('usage_records')
            .select(['status', 'cost', 'output_tokens'])
            .where('account_id', '=', accountId)
            .execute(),
        (rows) => rows.length === 1,
        'a usage record',
      );
      assert.equal(usage[0]?.status, 'cancelled');
      assert.ok((usage[0]?.cost ?? 0n) > 0n, 'the tokens produced before the cut are charged');
      const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
      assert.equal(charges.length, 1);
      assert.equal(-(charges[0]?.amount ?? 0n), usage[0]?.cost);
    } finally {
      socket.destroy();
    }
  });
});
