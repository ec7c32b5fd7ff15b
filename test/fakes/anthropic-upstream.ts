import { startSampleUpstream, type SampleUpstream } from './sample-replay';

/*
 * A fake Anthropic Messages API (`POST /v1/messages`) that replays recorded samples
 * (samples/anthropic/, provenance in samples/SOURCES.md). Like api.anthropic.com it refuses a
 * missing or wrong `x-api-key` (401 authentication_error), a missing `anthropic-version` and a
 * body without `model`, `messages` or an integer `max_tokens` (400 invalid_request_error).
 */

export const FAKE_ANTHROPIC_KEY = 'sk-ant-fake-upstream-key-0001';

export interface FakeAnthropicUpstream extends SampleUpstream {
  /** The Anthropic SDK's base URL form: http://127.0.0.1:PORT (the provider adds /v1/messages). */
  readonly baseUrl: string;
}

const error = (type: string, message: string): unknown => ({ type: 'error', error: { type, message } });

export async function startFakeAnthropicUpstream(): Promise<FakeAnthropicUpstream> {
  const server = await startSampleUpstream({
    check(url, headers, body) {
      if (url !== '/v1/messages') return [404, error('not_found_error', 'Not found')];
      if (headers['x-api-key'] !== FAKE_ANTHROPIC_KEY) return [401, error('authentication_error', 'invalid x-api-key')];
      if (headers['anthropic-version'] === undefined)
        return [400, error('invalid_request_error', 'anthropic-version: header is required')];
      for (const field of ['model', 'messages', 'max_tokens']) {
        if (body[field] === undefined) return [400, error('invalid_request_error', `${field}: Field required`)];
      }
      if (!Number.isInteger(body['max_tokens']))
        return [400, error('invalid_request_error', 'max_tokens: Input should be a valid integer')];
      return undefined;
    },
    defaultReply: (body) =>
      body['stream'] === true
        ? { sample: 'anthropic/stream-basic.sse' }
        : { sample: 'anthropic/message-tool-use.json' },
  });
  return { ...server, baseUrl: server.origin };
}
