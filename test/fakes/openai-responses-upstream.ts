import { startSampleUpstream, type SampleUpstream } from './sample-replay';

/*
 * A fake OpenAI Responses API (`POST /v1/responses`, `POST /v1/responses/compact`) that replays
 * recorded samples (samples/openai-responses/, provenance in samples/SOURCES.md). Like
 * api.openai.com it refuses a missing or wrong bearer key (401), a body without `model` or `input`
 * (400), a compaction endpoint body with fields it does not take, and a `compaction` input item
 * whose `encrypted_content` it did not make (its own are Fernet tokens, `gAAAAA…`). An input
 * ending in a `compaction_trigger` gets a compaction Response by default, /responses/compact the
 * documented `response.compaction`.
 */

export const FAKE_RESPONSES_KEY = 'sk-fake-responses-upstream-0001';

export interface FakeResponsesUpstream extends SampleUpstream {
  /** The OpenAI SDK's base URL form: http://127.0.0.1:PORT/v1 (the provider adds /responses). */
  readonly baseUrl: string;
}

const error = (
  status: number,
  message: string,
  type: string,
  code: string | null,
  param: string | null,
): [number, unknown] => [status, { error: { message, type, param, code } }];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const inputOf = (body: Obj): unknown[] => (Array.isArray(body['input']) ? (body['input'] as unknown[]) : []);

function triggered(body: Obj): boolean {
  const input = inputOf(body);
  const last = input[input.length - 1];
  return isObj(last) && last['type'] === 'compaction_trigger';
}

export async function startFakeResponsesUpstream(): Promise<FakeResponsesUpstream> {
  const server = await startSampleUpstream({
    check(url, headers, body) {
      const compact = url === '/v1/responses/compact';
      if (url !== '/v1/responses' && !compact) return error(404, 'Not found', 'invalid_request_error', null, null);
      if (headers['authorization'] !== `Bearer ${FAKE_RESPONSES_KEY}`)
        return error(401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key', null);
      for (const field of compact ? ['model'] : ['model', 'input']) {
        if (body[field] === undefined)
          return error(
            400,
            `Missing required parameter: '${field}'.`,
            'invalid_request_error',
            'missing_required_parameter',
            field,
          );
      }
      if (compact)
        for (const field of ['stream', 'store', 'max_output_tokens'])
          if (body[field] !== undefined)
            return error(400, `Unknown parameter: '${field}'.`, 'invalid_request_error', 'unknown_parameter', field);
      for (const [i, item] of inputOf(body).entries()) {
        if (!isObj(item)) continue;
        if (item['type'] === 'compaction' && !String(item['encrypted_content']).startsWith('gAAAAA'))
          return error(
            400,
            'The encrypted content could not be decrypted or parsed.',
            'invalid_request_error',
            'invalid_encrypted_content',
            `input[${i}].encrypted_content`,
          );
        if (item['type'] === 'compaction_trigger' && (compact || i !== inputOf(body).length - 1))
          return error(
            400,
            `Invalid 'input[${i}]': a compaction_trigger must be the final input item.`,
            'invalid_request_error',
            'invalid_value',
            `input[${i}]`,
          );
      }
      return undefined;
    },
    defaultReply: (body, url) =>
      url === '/v1/responses/compact'
        ? { sample: 'openai-responses/compact.json' }
        : triggered(body)
          ? {
              sample:
                body['stream'] === true
                  ? 'openai-responses/stream-compaction.sse'
                  : 'openai-responses/response-compaction.json',
            }
          : body['stream'] === true
            ? { sample: 'openai-responses/stream-text.sse' }
            : { sample: 'openai-responses/response-reasoning.json' },
  });
  return { ...server, baseUrl: `${server.origin}/v1` };
}
