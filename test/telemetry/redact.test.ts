import assert from 'node:assert/strict';
import { createRedactor } from '../../core/telemetry/redact';

describe('the redactor (logs, spans and error messages)', () => {
  const redactor = createRedactor();
  redactor.add(['upstream-secret-123', 'short', undefined]);

  const cases: readonly (readonly [string, string])[] = [
    ['key svc_sk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF', 'key [redacted]'],
    ['oauth svc_oat_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF', 'oauth [redacted]'],
    ['refresh_token svc_ort_abcdefghijklmnopqrstuvwxyz0123456789AB', 'refresh_token [redacted]'],
    ['/cb?code=svc_oac_abcdefghijklmnopqrstuvwxyz0123456789AB&state=s', '/cb?code=[redacted]&state=s'],
    ['Incorrect API key provided: sk-proj-abcdefghijklmnop1234', 'Incorrect API key provided: sk-[redacted]'],
    ['x-goog-api-key AIzaSyA1234567890abcdefghijklmnopqrstu', 'x-goog-api-key [redacted]'],
    ['authorization: Bearer abc123def456ghi789', 'authorization: Bearer [redacted]'],
    ['authorization: Session 3kT9qLr7Zx2mWv8Yb1Nc4Pd6', 'authorization: Session [redacted]'],
    ['a session is over', 'a session is over'],
    ['/v1/gemini/v1beta/models?key=AIzaSyA1&alt=sse', '/v1/gemini/v1beta/models?key=[redacted]&alt=sse'],
    ['GET /models?api_key=whatever', 'GET /models?api_key=[redacted]'],
    [
      'the upstream said upstream-secret-123 twice: upstream-secret-123',
      'the upstream said [redacted] twice: [redacted]',
    ],
  ];
  for (const [input, expected] of cases) {
    it(`masks ${JSON.stringify(input.slice(0, 40))}`, () => assert.equal(redactor.scrub(input), expected));
  }

  it('leaves ordinary text alone, short configured values included', () => {
    for (const text of [
      'a basic understanding of the key ideas',
      'short answers only',
      'سلام دنیا',
      '{"model":"svc-pro","tokens":12}',
    ])
      assert.equal(redactor.scrub(text), text);
  });
});
