import assert from 'node:assert/strict';
import { parseConfig } from '../../core/config/load';

/* The media kinds of SPEC §14 in the configuration: each price form, and what is refused. */

const parse = (yaml: string) => parseConfig(yaml, {}, 'test config');

describe('media model kinds in the configuration (SPEC §14)', () => {
  it('reads each kind with its price form, and the upload and audio limits', () => {
    const config = parse(`models:
  pic:
    kind: image
    provider: openai
    base_url: https://api.openai.com/v1
    upstream_model: dall-e-3
    price: { per_image: { "1024x1024/standard": 2800, "1024x1024/hd": 5600 } }
  pic-tokens:
    kind: image
    provider: openai
    base_url: https://api.openai.com/v1
    upstream_model: gpt-image-1
    price: { input_per_1m: 700000, output_per_1m: 2800000 }
  tts:
    kind: speech
    provider: openai
    base_url: https://api.openai.com/v1
    upstream_model: tts-1
    price: { per_1m_characters: 1050000 }
  whisper:
    kind: transcription
    provider: openai
    base_url: https://api.openai.com/v1
    upstream_model: whisper-1
    price: { per_minute: 4200 }
  mod:
    kind: moderation
    provider: openai
    base_url: https://api.openai.com/v1
    upstream_model: omni-moderation-latest
  rr:
    kind: rerank
    provider: cohere
    base_url: https://api.cohere.com
    upstream_model: rerank-v3.5
    price: { per_search: 1400 }
limits:
  max_upload_bytes: 1048576
  max_audio_seconds: 600
`);
    const pic = config.models.get('pic');
    assert.equal(pic?.kind, 'image');
    assert.deepEqual(pic?.mediaPrice, {
      form: 'per_image',
      perImage: new Map([
        ['1024x1024/standard', 2800n],
        ['1024x1024/hd', 5600n],
      ]),
    });
    assert.deepEqual(config.models.get('pic-tokens')?.mediaPrice, { form: 'tokens' });
    assert.equal(config.models.get('pic-tokens')?.price.outputPer1m, 2_800_000n);
    assert.deepEqual(config.models.get('tts')?.mediaPrice, { form: 'per_1m_characters', credits: 1_050_000n });
    assert.deepEqual(config.models.get('whisper')?.mediaPrice, { form: 'per_minute', credits: 4200n });
    assert.deepEqual(config.models.get('mod')?.mediaPrice, { form: 'free' });
    assert.deepEqual(config.models.get('rr')?.mediaPrice, { form: 'per_search', credits: 1400n });
    assert.equal(config.limits.maxUploadBytes, 1_048_576);
    assert.equal(config.limits.maxAudioSeconds, 600);
  });

  it('refuses a missing price, a malformed per-image key, a provider that does not serve the kind, and cohere for chat', () => {
    const cases: [string, RegExp][] = [
      ['  m:\n    kind: speech\n    provider: sandbox\n', /models\.m\.price: is required/],
      [
        '  m:\n    kind: image\n    provider: sandbox\n    price: { per_image: { big: 5 } }\n',
        /models\.m\.price\.per_image\.big: is not "SIZE\/QUALITY"/,
      ],
      [
        '  m:\n    kind: image\n    provider: anthropic\n    base_url: https://x.example\n    upstream_model: x\n    price: { per_image: { "auto/auto": 5 } }\n',
        /models\.m\.provider: anthropic serves no image model/,
      ],
      [
        '  m:\n    provider: cohere\n    base_url: https://x.example\n    upstream_model: x\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
        /cohere serves rerank only/,
      ],
      [
        '  m:\n    kind: rerank\n    provider: sandbox\n    price: { input_per_1m: 1 }\n',
        /models\.m\.price: must be \{ per_search: N \}/,
      ],
    ];
    for (const [models, message] of cases) assert.throws(() => parse(`models:\n${models}`), message);
  });

  it('responses.image_generation_model must name an image model; the error names the key', () => {
    const models = `models:
  pic:
    kind: image
    provider: sandbox
    price: { per_image: { "1024x1024/auto": 500 } }
  talk:
    provider: sandbox
    price: { input_per_1m: 1, output_per_1m: 1 }
`;
    assert.equal(parse(`${models}responses:\n  image_generation_model: pic\n`).responses?.imageGenerationModel, 'pic');
    assert.throws(
      () => parse(`${models}responses:\n  image_generation_model: nope\n`),
      /responses\.image_generation_model: names no model of models \(got nope\)/,
    );
    assert.throws(
      () => parse(`${models}responses:\n  image_generation_model: talk\n`),
      /responses\.image_generation_model: must name a model of kind image \(talk is of kind chat\)/,
    );
  });
});
