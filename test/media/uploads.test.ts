import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import { sandboxWav, SANDBOX_TRANSCRIPT } from '../../core/providers/media/sandbox';
import {
  FAKE_DELTAS,
  FAKE_STREAM_USAGE,
  FAKE_TRANSCRIPT,
  startFakeMediaUpstream,
  type FakeMediaUpstream,
} from '../fakes/media-upstream';

/*
 * SPEC §14's uploads: a multipart body streamed through svc (spooled to disk, never gathered in
 * memory) and cut with a 413 the moment it crosses `limits.max_upload_bytes`, the books untouched;
 * and streamed transcription (`stream: true`): the upstream's `transcript.text.delta` events as
 * they come, `transcript.text.done` last, billed once on done and not at all when the upstream
 * fails midway.
 */

const MAX_UPLOAD = 1024 * 1024;
const TRANSCRIBE_PER_MINUTE = 600n; // svc-transcribe's built-in price (docs/media.md)
const INPUT_PER_1M = 2_500_000n;
const OUTPUT_PER_1M = 10_000_000n;

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

function config(upstream: FakeMediaUpstream): string {
  return `limits:
  max_upload_bytes: ${MAX_UPLOAD}
models:
  up-whisper:
    kind: transcription
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: up-secret
    upstream_model: whisper-1
    price: { per_minute: 4200 }
  up-4o-transcribe:
    kind: transcription
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: up-secret
    upstream_model: gpt-4o-transcribe
    max_output_tokens: 2000
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
  svc-transcribe:
    kind: transcription
    provider: sandbox
    price: { per_minute: ${TRANSCRIBE_PER_MINUTE} }
`;
}

describe('media uploads: streamed, bounded; streamed transcription (SPEC §14)', function () {
  this.timeout(60_000);
  let upstream: FakeMediaUpstream;
  let svc: TestSvc;
  let baseURL: string;
  let spoolDir: string;
  const savedTmp = process.env['TMPDIR'];

  before(async () => {
    // The server's spool directories go here, so that each test can see them all removed.
    spoolDir = await mkdtemp(join(tmpdir(), 'svc-uploads-test-'));
    process.env['TMPDIR'] = spoolDir;
    upstream = await startFakeMediaUpstream();
    svc = await startSvc({ config: config(upstream) });
    baseURL = `${svc.baseUrl}/v1/openai`;
  });
  after(async () => {
    await svc.close();
    await upstream.close();
    if (savedTmp === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = savedTmp;
    await rm(spoolDir, { recursive: true, force: true });
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });

  async function balanceIs(accountId: string, expected: bigint): Promise<void> {
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, expected);
    assert.equal(wallet.held, 0n, 'no hold is left');
  }

  async function usageOf(accountId: string): Promise<[string, bigint, string][]> {
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'cost', 'status'])
      .where('account_id', '=', accountId)
      .execute();
    return rows.map((r) => [r.kind, BigInt(r.cost), r.status]);
  }

  async function spoolIsEmpty(): Promise<void> {
    const left = (await readdir(spoolDir)).filter((name) => name.startsWith('svc-upload-'));
    assert.deepEqual(left, [], 'every spooled upload is removed');
  }

  it('an upload cut at the limit: a 413 before the client finished sending, nothing held, charged or sent upstream', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const seen = upstream.requests.length;
    const boundary = 'svc-test-boundary';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nup-whisper\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n` +
        'Content-Type: audio/wav\r\n\r\n',
    );
    // No content-length: svc learns the size only by counting what arrives.
    const url = new URL(`${baseURL}/audio/transcriptions`);
    const req = http.request(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'transfer-encoding': 'chunked',
      },
    });
    const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
    });
    req.write(head);
    // One byte past the bound in 64 KiB pieces, then the request is left open: never ended.
    const piece = Buffer.alloc(64 * 1024, 1);
    let sent = head.length;
    while (sent <= MAX_UPLOAD) {
      const chunk = piece.subarray(0, Math.min(piece.length, MAX_UPLOAD + 1 - sent));
      req.write(chunk);
      sent += chunk.length;
    }
    const { status, body } = await answered;
    req.destroy();
    assert.equal(status, 413);
    const json = JSON.parse(body) as { error: { code: string; type: string } };
    assertSchema('ErrorResponse', json);
    assert.equal(json.error.code, 'request_too_large');
    await balanceIs(accountId, 100_000n);
    assert.deepEqual(await usageOf(accountId), []);
    assert.equal(upstream.requests.length, seen, 'nothing reached the upstream');
    // Over gRPC the core learns of the cut after the client got its 413: its spool goes then.
    for (let i = 0; i < 200 && (await readdir(spoolDir)).some((n) => n.startsWith('svc-upload-')); i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    await spoolIsEmpty();
  });

  it('an upload under the limit reaches the upstream whole, streamed from the spool, and the spool is removed', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    // 2 s of 8 kHz 16-bit WAV plus silence to 900 KiB: the duration is what its header says.
    const wav = sandboxWav(440, 2, 8000);
    const padded = Buffer.concat([wav, Buffer.alloc(900 * 1024 - wav.length)]);
    padded.writeUInt32LE(padded.length - 8, 4);
    padded.writeUInt32LE(padded.length - 44, 40);
    const result = await client(key).audio.transcriptions.create({
      model: 'up-whisper',
      file: await toFile(padded, 'long.wav', { type: 'audio/wav' }),
    });
    assert.equal(result.text, FAKE_TRANSCRIPT);
    const last = upstream.requests.at(-1);
    assert.equal(last?.path, '/v1/audio/transcriptions');
    assert.deepEqual(last?.files, [{ field: 'file', filename: 'long.wav', size: padded.length }]);
    // Settled at the 2 s the upstream reports: 2 s of 4,200 a minute.
    await balanceIs(accountId, 100_000n - ceilDiv(2n * 4200n, 60n));
    await spoolIsEmpty();
  });

  it('stream: true — the upstream’s deltas as they come, then transcript.text.done; billed once on done from its usage', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const stream = await client(key).audio.transcriptions.create({
      model: 'up-4o-transcribe',
      file: await toFile(sandboxWav(440, 2, 8000), 'a.wav', { type: 'audio/wav' }),
      stream: true,
    });
    const events: { type: string; delta?: string; text?: string; usage?: unknown }[] = [];
    for await (const event of stream) {
      assertSchema('CreateTranscriptionResponseStreamEvent', event);
      events.push(event as (typeof events)[number]);
    }
    assert.deepEqual(
      events.map((e) => e.type),
      [...FAKE_DELTAS.map(() => 'transcript.text.delta'), 'transcript.text.done'],
    );
    assert.deepEqual(
      events.filter((e) => e.type === 'transcript.text.delta').map((e) => e.delta),
      FAKE_DELTAS,
    );
    const done = events.at(-1);
    assert.equal(done?.text, FAKE_TRANSCRIPT);
    assert.deepEqual(done?.usage, FAKE_STREAM_USAGE);
    const last = upstream.requests.at(-1);
    assert.equal(last?.body['stream'], 'true');
    assert.equal(last?.body['model'], 'gpt-4o-transcribe');
    const cost = ceilDiv(
      BigInt(FAKE_STREAM_USAGE.input_tokens) * INPUT_PER_1M + BigInt(FAKE_STREAM_USAGE.output_tokens) * OUTPUT_PER_1M,
      1_000_000n,
    );
    await balanceIs(accountId, 100_000n - cost);
    assert.deepEqual(await usageOf(accountId), [['transcription', cost, 'ok']]);
    await spoolIsEmpty();
  });

  it('stream: true with the upstream cut after its first delta: an error event, nothing charged', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    upstream.cutStreamNext();
    const stream = await client(key).audio.transcriptions.create({
      model: 'up-4o-transcribe',
      file: await toFile(sandboxWav(440, 2, 8000), 'a.wav', { type: 'audio/wav' }),
      stream: true,
    });
    const deltas: string[] = [];
    await assert.rejects(async () => {
      for await (const event of stream) if (event.type === 'transcript.text.delta') deltas.push(event.delta);
    }, OpenAI.APIError);
    assert.deepEqual(deltas, FAKE_DELTAS.slice(0, 1));
    await balanceIs(accountId, 100_000n);
    assert.deepEqual(
      (await usageOf(accountId)).map(([kind, cost]) => [kind, cost]),
      [['transcription', 0n]],
    );
    await spoolIsEmpty();
  });

  it('stream: true on the sandbox: its words as deltas, charged for the WAV’s duration by the second; srt does not stream', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const stream = await client(key).audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await toFile(sandboxWav(440, 2.5, 8000), 'a.wav', { type: 'audio/wav' }),
      stream: true,
    });
    let text = '';
    let doneText: string | undefined;
    for await (const event of stream) {
      assertSchema('CreateTranscriptionResponseStreamEvent', event);
      if (event.type === 'transcript.text.delta') text += event.delta;
      if (event.type === 'transcript.text.done') doneText = event.text;
    }
    assert.equal(text, SANDBOX_TRANSCRIPT);
    assert.equal(doneText, SANDBOX_TRANSCRIPT);
    const cost = ceilDiv(3n * TRANSCRIBE_PER_MINUTE, 60n);
    await balanceIs(accountId, 10_000n - cost);
    await assert.rejects(
      client(key).audio.transcriptions.create({
        model: 'svc-transcribe',
        file: await toFile(sandboxWav(440, 1, 8000), 'a.wav', { type: 'audio/wav' }),
        response_format: 'srt',
        stream: true,
      }),
      (e: unknown) =>
        e instanceof OpenAI.BadRequestError && (e.error as { param?: string }).param === 'response_format',
    );
    await balanceIs(accountId, 10_000n - cost);
    await spoolIsEmpty();
  });
});
