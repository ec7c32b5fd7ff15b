import { startSampleUpstream, type SampleUpstream } from './sample-replay';

/*
 * A fake OpenAI Responses API (`POST /v1/responses`) that replays recorded samples
 * (samples/openai-responses/, provenance in samples/SOURCES.md). Like api.openai.com it refuses a
 * missing or wrong bearer key (401) and a body without `model` or `input` (400).
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

export async function startFakeResponsesUpstream(): Promise<FakeResponsesUpstream> {
  const server = await startSampleUpstream({
    check(url, headers, body) {
      if (url !== '/v1/responses') return error(404, 'Not found', 'invalid_request_error', null, null);
      if (headers['authorization'] !== `Bearer ${FAKE_RESPONSES_KEY}`)
        return error(401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key', null);
      for (const field of ['model', 'input']) {
        if (body[field] === undefined)
          return error(
            400,
            `Missing required parameter: '${field}'.`,
            'invalid_request_error',
            'missing_required_parameter',
            field,
          );
      }
      return undefined;
    },
    defaultReply: (body) =>
      body['stream'] === true
        ? { sample: 'openai-responses/stream-text.sse' }
        : { sample: 'openai-responses/response-reasoning.json' },
  });
  return { ...server, baseUrl: `${server.origin}/v1` };
}
