// The bench's load client for conversations on svc's Responses API, as a coding agent drives it:
// `sessions` conversations at once, each a run of `turns` turns one after the other, every turn
// streamed, over one of three transports:
// - `ws`: the WebSocket mode (`GET /v1/openai/responses` upgraded; one connection per
//   conversation; each turn a `response.create` message with `store: false` and, after the
//   first, `previous_response_id` naming the connection's last response: what Codex does with
//   `supports_websockets`);
// - `http-previous`: `POST /v1/openai/responses` with `stream: true`, `store: true` and
//   `previous_response_id` (svc loads the stored conversation);
// - `http-replay`: `POST` with `stream: true`, `store: false` and the whole conversation so far as
//   `input` (the earlier turns' output items replayed: what Codex does over HTTP).
// Per turn it measures the time to the first event and to `response.completed`; a WebSocket's
// handshake is timed apart. `runTurns(spec)` runs it in a child process
// (`node -r tsx/cjs bench/lib/turns.ts SPEC_JSON`, which prints one JSON result), never in the
// process of the server it measures.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { WebSocket } from 'ws';
import { track, TSX } from './children';
import { percentile } from './measure';

export type TurnsMode = 'ws' | 'http-previous' | 'http-replay';

export interface TurnsSpec {
  /** http://127.0.0.1:PORT/v1/openai */
  readonly baseUrl: string;
  readonly key: string;
  readonly model: string;
  readonly mode: TurnsMode;
  /** Conversations at once (closed loop: a finished one is followed by a new one). */
  readonly sessions: number;
  /** Turns per conversation. */
  readonly turns: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /**
   * At most this many conversations started per phase (each still cut at the window's end):
   * a run bounded by a count, whose turns do not depend on the machine's speed (the tests').
   */
  readonly conversations?: number;
}

export interface TurnsResult {
  readonly mode: TurnsMode;
  /** Turns started in the measured window that ended in response.completed. */
  readonly ok: number;
  readonly errors: number;
  readonly firstError: string | null;
  /** Turns that continued an earlier one (previous_response_id or a replayed history). */
  readonly continued: number;
  readonly seconds: number;
  readonly turnsPerSecond: number;
  /** From sending the turn to its response.completed, ms. */
  readonly latency: { readonly p50: number; readonly p99: number; readonly max: number };
  /** From sending the turn to its first event (response.created), ms. */
  readonly firstEvent: { readonly p50: number; readonly p99: number };
  /** WebSocket handshakes (ws only): from connecting to open, ms. */
  readonly connect: { readonly count: number; readonly p50: number; readonly p99: number } | null;
  /** Every measured value, ascending (to merge several runs). */
  readonly samples: { readonly latency: number[]; readonly firstEvent: number[]; readonly connect: number[] };
}

/** The results of several runs of one mode as one: counts added, percentiles over all samples. */
export function mergeTurns(runs: readonly TurnsResult[]): TurnsResult {
  const first = runs[0];
  if (first === undefined) throw new Error('nothing to merge');
  const all = (pick: (r: TurnsResult) => number[]): number[] => runs.flatMap(pick).sort((a, b) => a - b);
  const latency = all((r) => r.samples.latency);
  const firstEvent = all((r) => r.samples.firstEvent);
  const connect = all((r) => r.samples.connect);
  const ok = runs.reduce((n, r) => n + r.ok, 0);
  const seconds = runs.reduce((n, r) => n + r.seconds, 0);
  return {
    mode: first.mode,
    ok,
    errors: runs.reduce((n, r) => n + r.errors, 0),
    firstError: runs.find((r) => r.firstError !== null)?.firstError ?? null,
    continued: runs.reduce((n, r) => n + r.continued, 0),
    seconds,
    turnsPerSecond: ok / seconds,
    latency: { p50: percentile(latency, 0.5), p99: percentile(latency, 0.99), max: latency.at(-1) ?? 0 },
    firstEvent: { p50: percentile(firstEvent, 0.5), p99: percentile(firstEvent, 0.99) },
    connect:
      first.connect === null
        ? null
        : { count: connect.length, p50: percentile(connect, 0.5), p99: percentile(connect, 0.99) },
    samples: { latency, firstEvent, connect },
  };
}

type Obj = Record<string, unknown>;

interface Turn {
  readonly ok: boolean;
  readonly error?: string;
  readonly latency: number;
  readonly firstEvent: number;
  readonly continued: boolean;
}

/** One conversation's transport: sends a turn, resolves its timings and the completed response. */
interface Conversation {
  turn(body: Obj): Promise<{ firstEvent: number; latency: number; completed: Obj }>;
  close(): void;
}

function userText(session: number, turn: number): string {
  return `Session ${session}, turn ${turn}: say something short about the benchmark.`;
}

/** Reads an SSE body: every event parsed (as a client would), the first timed, the completed one kept. */
async function readSse(body: AsyncIterable<Buffer>, t0: number): Promise<{ firstEvent: number; completed: Obj }> {
  let firstEvent = -1;
  let completed: Obj | undefined;
  let failure: string | undefined;
  let buffer = '';
  for await (const chunk of body) {
    if (firstEvent < 0) firstEvent = performance.now() - t0;
    buffer += chunk.toString('utf8');
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      const data = frame.split('\n').find((l) => l.startsWith('data: '));
      if (data === undefined) continue;
      const event = JSON.parse(data.slice(6)) as Obj;
      if (event['type'] === 'response.completed') completed = event['response'] as Obj;
      else if (event['type'] === 'response.failed' || event['type'] === 'error') failure = data.slice(0, 300);
    }
  }
  if (completed === undefined) throw new Error(failure ?? 'the stream ended without response.completed');
  return { firstEvent, completed };
}

function httpConversation(pool: Pool, spec: TurnsSpec): Conversation {
  const url = new URL(`${spec.baseUrl}/responses`);
  return {
    async turn(body) {
      const t0 = performance.now();
      const res = await pool.request({
        path: url.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${spec.key}` },
        body: JSON.stringify({ ...body, stream: true }),
      });
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
      const { firstEvent, completed } = await readSse(res.body as AsyncIterable<Buffer>, t0);
      return { firstEvent, latency: performance.now() - t0, completed };
    },
    close: () => undefined,
  };
}

async function wsConversation(spec: TurnsSpec, connects: number[]): Promise<Conversation> {
  const t0 = performance.now();
  const ws = new WebSocket(`${spec.baseUrl.replace(/^http/, 'ws')}/responses`, {
    headers: { authorization: `Bearer ${spec.key}` },
    perMessageDeflate: false,
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)));
  });
  connects.push(performance.now() - t0);
  // One response at a time on a connection: the pending turn takes every message until its end.
  let pending: ((message: Obj) => void) | undefined;
  let closed: Error | undefined;
  ws.on('message', (data) => pending?.(JSON.parse(String(data)) as Obj));
  ws.on('close', (code) => {
    closed = new Error(`the WebSocket closed (${code})`);
    pending?.({ type: 'error', error: { message: closed.message } });
  });
  return {
    turn(body) {
      if (closed !== undefined) return Promise.reject(closed);
      return new Promise((resolve, reject) => {
        const start = performance.now();
        let firstEvent = -1;
        pending = (message) => {
          if (firstEvent < 0) firstEvent = performance.now() - start;
          if (message['type'] === 'response.completed') {
            pending = undefined;
            resolve({ firstEvent, latency: performance.now() - start, completed: message['response'] as Obj });
          } else if (message['type'] === 'error' || message['type'] === 'response.failed') {
            pending = undefined;
            reject(new Error(JSON.stringify(message).slice(0, 300)));
          }
        };
        ws.send(JSON.stringify({ type: 'response.create', ...body }));
      });
    },
    close: () => ws.close(1000, 'done'),
  };
}

/** One conversation of `spec.turns` turns; stops starting turns once `end` has passed. */
async function conversation(
  spec: TurnsSpec,
  pool: Pool,
  session: number,
  end: number,
  out: Turn[],
  connects: number[],
): Promise<void> {
  let conv: Conversation;
  try {
    conv = spec.mode === 'ws' ? await wsConversation(spec, connects) : httpConversation(pool, spec);
  } catch (error) {
    out.push({ ok: false, error: String(error), latency: 0, firstEvent: 0, continued: false });
    return;
  }
  let previous: string | undefined;
  let history: unknown[] = [];
  try {
    for (let turn = 0; turn < spec.turns && performance.now() < end; turn++) {
      const message = { role: 'user', content: userText(session, turn) };
      const body: Obj =
        spec.mode === 'http-replay'
          ? { model: spec.model, store: false, input: [...history, message] }
          : {
              model: spec.model,
              store: spec.mode === 'http-previous',
              input: [message],
              ...(previous === undefined ? {} : { previous_response_id: previous }),
            };
      const continued = turn > 0;
      try {
        const { firstEvent, latency, completed } = await conv.turn(body);
        if (typeof completed['id'] !== 'string') throw new Error('response.completed without an id');
        previous = completed['id'];
        history = [...history, message, ...((completed['output'] as unknown[] | undefined) ?? [])];
        out.push({ ok: true, latency, firstEvent, continued });
      } catch (error) {
        out.push({
          ok: false,
          error: error instanceof Error ? error.message : String(error),
          latency: 0,
          firstEvent: 0,
          continued,
        });
        return;
      }
    }
  } finally {
    conv.close();
  }
}

async function phase(
  spec: TurnsSpec,
  pool: Pool,
  durationMs: number,
): Promise<{ turns: Turn[]; connects: number[]; seconds: number }> {
  const turns: Turn[] = [];
  const connects: number[] = [];
  const start = performance.now();
  const end = start + durationMs;
  const most = spec.conversations ?? Infinity;
  let next = 0;
  await Promise.all(
    Array.from({ length: spec.sessions }, async () => {
      while (performance.now() < end && next < most) await conversation(spec, pool, next++, end, turns, connects);
    }),
  );
  return { turns, connects, seconds: (performance.now() - start) / 1000 };
}

/** Runs the load described by `spec` in this process (the child's side). */
export async function driveTurns(spec: TurnsSpec): Promise<TurnsResult> {
  const pool = new Pool(new URL(spec.baseUrl).origin, {
    connections: spec.sessions,
    pipelining: 1,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  try {
    if (spec.warmupMs > 0) await phase(spec, pool, spec.warmupMs);
    const { turns, connects, seconds } = await phase(spec, pool, spec.durationMs);
    const good = turns.filter((t) => t.ok);
    const latencies = good.map((t) => t.latency).sort((a, b) => a - b);
    const firsts = good.map((t) => t.firstEvent).sort((a, b) => a - b);
    connects.sort((a, b) => a - b);
    return {
      mode: spec.mode,
      ok: good.length,
      errors: turns.length - good.length,
      firstError: turns.find((t) => !t.ok)?.error ?? null,
      continued: good.filter((t) => t.continued).length,
      seconds,
      turnsPerSecond: good.length / seconds,
      latency: { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: latencies.at(-1) ?? 0 },
      firstEvent: { p50: percentile(firsts, 0.5), p99: percentile(firsts, 0.99) },
      connect:
        spec.mode === 'ws'
          ? { count: connects.length, p50: percentile(connects, 0.5), p99: percentile(connects, 0.99) }
          : null,
      samples: { latency: latencies, firstEvent: firsts, connect: connects },
    };
  } finally {
    await pool.close();
  }
}

/** Runs `spec` in a child process and resolves with its result. */
export async function runTurns(spec: TurnsSpec): Promise<TurnsResult> {
  const timeout = spec.warmupMs + spec.durationMs + 120_000;
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['-r', TSX, path.join(__dirname, 'turns.ts'), JSON.stringify(spec)],
      { maxBuffer: 16 * 1024 * 1024, timeout },
      (error, out, err) =>
        error === null ? resolve(out) : reject(new Error(`turns client: ${error.message}\n${err}`)),
    );
    track(child);
  });
  return JSON.parse(stdout) as TurnsResult;
}

if (require.main === module) {
  driveTurns(JSON.parse(process.argv[2] ?? '{}') as TurnsSpec).then(
    (result) => {
      // Exit once the result is written: a large one (every turn's samples) leaves the pipe in
      // several writes, and an exit right after the call cut it (seen: at 219,264 bytes).
      process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
