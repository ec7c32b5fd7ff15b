import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, parseConfig } from '../../core/config/load';
import { fastPathEnabled } from '../../core/chat/fast-path';

/** The built-in models (SPEC §14 added the media ones: docs/media.md). */
const BUILT_IN_MODELS = [
  'svc-pro',
  'svc-embed',
  'svc-image',
  'svc-tts',
  'svc-transcribe',
  'svc-moderation',
  'svc-rerank',
];

const FULL = `
models:
  svc-pro:
    provider: openai              # any OpenAI-compatible chat-completions upstream
    base_url: https://api.example.com/v1
    api_key: \${UPSTREAM_API_KEY}
    upstream_model: some-model
    price: { input_per_1m: 150000, output_per_1m: 600000 }   # credits per 1M tokens
    context_window: 128000
    max_output_tokens: 8192
tools:
  web_search:
    provider: perplexity          # perplexity | searxng | sandbox
    base_url: https://api.perplexity.ai
    api_key: \${PERPLEXITY_API_KEY}
    model: sonar
    price: { input_per_1m: 100000, output_per_1m: 100000 }   # token tariff; a flat integer also allowed
  maps_search_places:
    provider: neshan              # neshan | nominatim | sandbox
    base_url: https://api.neshan.org
    api_key: \${NESHAN_API_KEY}
    price: 460
  shopping_search:
    provider: torob               # torob | digikala | sandbox
    base_url: https://api.torob.com
    price: 230
limits:
  requests_per_minute: 600        # per API key
  max_body_bytes: 1048576
`;

const ENV = { UPSTREAM_API_KEY: 'up-secret', PERPLEXITY_API_KEY: 'pplx-secret', NESHAN_API_KEY: 'service.neshan' };

function parse(text: string, env: NodeJS.ProcessEnv = ENV) {
  return parseConfig(text, env, 'test.yaml');
}

function rejects(text: string, message: string | RegExp, env: NodeJS.ProcessEnv = ENV): void {
  assert.throws(
    () => parse(text, env),
    (error: unknown) => {
      assert.ok(error instanceof Error);
      if (typeof message === 'string') assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    },
  );
}

describe('loadConfig', () => {
  it('returns the built-in sandbox configuration when there is no file', () => {
    const config = loadConfig(undefined, {});
    assert.equal(config.source, 'built-in');
    assert.deepEqual([...config.models.keys()], BUILT_IN_MODELS);
    assert.equal(config.models.get('svc-embed')?.kind, 'embedding');
    const model = config.models.get('svc-pro');
    assert.equal(model?.provider, 'sandbox');
    assert.equal(typeof model?.price.inputPer1m, 'bigint');
    assert.deepEqual(
      [...config.tools.values()].map((t) => [t.name, t.provider, t.price]),
      [
        ['web_search', 'sandbox', { kind: 'flat', credits: 200n }],
        ['maps_search_places', 'sandbox', { kind: 'flat', credits: 460n }],
        ['shopping_search', 'sandbox', { kind: 'flat', credits: 230n }],
      ],
    );
    assert.deepEqual(config.limits, {
      requestsPerMinute: 600,
      maxBodyBytes: 1048576,
      holdTtlSeconds: 600,
      streamStallSeconds: 60,
      upstreamConnections: 128,
      upstreamQueueMs: 5000,
      maxConnections: 4096,
      maxConnectionsPerAddress: 256,
      headersTimeoutSeconds: 10,
      requestTimeoutSeconds: 30,
      bodyIdleSeconds: 10,
    });
  });

  it('parses the SPEC example, substituting ${NAME} from the environment', () => {
    const config = parse(FULL);
    assert.equal(config.source, 'test.yaml');
    assert.deepEqual(config.models.get('svc-pro'), {
      id: 'svc-pro',
      aliases: [],
      // The single-upstream form is a list of one.
      upstreams: [
        {
          name: 'svc-pro#1:openai@api.example.com',
          provider: 'openai',
          baseUrl: 'https://api.example.com/v1',
          apiKey: 'up-secret',
          upstreamModel: 'some-model',
          priority: 1,
          weight: 1,
          headers: {},
          timeoutMs: 120000,
          extraParams: new Set(),
        },
      ],
      breaker: { failures: 5, openS: 30 },
      provider: 'openai',
      baseUrl: 'https://api.example.com/v1',
      apiKey: 'up-secret',
      upstreamModel: 'some-model',
      price: { inputPer1m: 150000n, outputPer1m: 600000n },
      contextWindow: 128000,
      maxOutputTokens: 8192,
      timeoutMs: 120000,
      extraParams: new Set(),
    });
    const web = config.tools.get('web_search');
    assert.equal(web?.provider, 'perplexity');
    assert.equal(web?.apiKey, 'pplx-secret');
    assert.equal(web?.model, 'sonar');
    // No cap configured: the hold is the price of 20,000 input + 4,000 output tokens.
    assert.deepEqual(web?.price, { kind: 'tokens', tariff: { inputPer1m: 100000n, outputPer1m: 100000n }, cap: 2400n });
    assert.deepEqual(config.tools.get('maps_search_places')?.price, { kind: 'flat', credits: 460n });
    assert.equal(config.tools.get('maps_search_places')?.apiKey, 'service.neshan');
    assert.equal(config.tools.get('shopping_search')?.baseUrl, 'https://api.torob.com');
    assert.equal(config.limits.requestsPerMinute, 600);
    assert.equal(config.limits.holdTtlSeconds, 600);
  });

  it('reads the cache tiers of a price; one-hour writes default to the five-minute price (SPEC §13)', () => {
    const tiers = parse(
      FULL.replace(
        'output_per_1m: 600000 }',
        'output_per_1m: 600000, cached_input_per_1m: 15000, cache_write_per_1m: 187500, cache_write_1h_per_1m: 300000 }',
      ),
    ).models.get('svc-pro')?.price;
    assert.deepEqual(tiers, {
      inputPer1m: 150000n,
      outputPer1m: 600000n,
      cachedInputPer1m: 15000n,
      cacheWritePer1m: 187500n,
      cacheWrite1hPer1m: 300000n,
    });
    const without = parse(
      FULL.replace('output_per_1m: 600000 }', 'output_per_1m: 600000, cache_write_per_1m: 187500 }'),
    ).models.get('svc-pro')?.price;
    assert.equal(without?.cacheWrite1hPer1m, undefined, 'absent: priced at cache_write_per_1m');
    rejects(
      FULL.replace('output_per_1m: 600000 }', 'output_per_1m: 600000, cache_write_1h_per_1m: -1 }'),
      /^config models\.svc-pro\.price\.cache_write_1h_per_1m: /,
    );
  });

  it('reads the file from disk and names it as the source', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-config-'));
    try {
      const file = path.join(dir, 'svc.yaml');
      fs.writeFileSync(file, FULL);
      assert.equal(loadConfig(file, ENV).source, file);
      assert.throws(
        () => loadConfig(path.join(dir, 'missing.yaml'), ENV),
        /^Error: config file .*missing\.yaml: cannot be read \(ENOENT\)$/,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps secrets with YAML metacharacters intact (substitution happens after parsing)', () => {
    const config = parse(FULL, { ...ENV, UPSTREAM_API_KEY: 'a#b: "c" ${D} {e}' });
    assert.equal(config.models.get('svc-pro')?.apiKey, 'a#b: "c" ${D} {e}');
  });

  it('reads the oauth switches: registration limits and the test-only insecure documents', () => {
    assert.deepEqual(parse('models: {}\n').oauth, {
      registrationsPerAddressPerHour: 20,
      registrationsPerMinute: 30,
      insecureMetadataDocuments: false,
    });
    const config = parse(
      'oauth:\n  registrations_per_address_per_hour: 5\n  registrations_per_minute: 50\n  insecure_metadata_documents: ${INSECURE}\n',
      { INSECURE: 'true' },
    );
    assert.deepEqual(config.oauth, {
      registrationsPerAddressPerHour: 5,
      registrationsPerMinute: 50,
      insecureMetadataDocuments: true,
    });
    rejects(
      'oauth:\n  insecure_metadata_documents: yes please\n',
      /oauth\.insecure_metadata_documents: must be true or false/,
    );
    rejects('oauth:\n  registrations_per_minute: 0\n', /oauth\.registrations_per_minute: must be a positive integer/);
  });

  it('names an unset environment variable and the key that uses it', () => {
    const { NESHAN_API_KEY: _omit, ...env } = ENV;
    rejects(FULL, 'config tools.maps_search_places.api_key: environment variable NESHAN_API_KEY is not set', env);
  });

  it('ignores ${NAME} in comments', () => {
    const config = parse(`# uses \${NOT_SET}\nlimits:\n  requests_per_minute: 5 # \${ALSO_NOT_SET}\n`);
    assert.equal(config.limits.requestsPerMinute, 5);
  });

  it('reads an integer from a substituted variable, and rejects a non-integer one without echoing it', () => {
    const text = 'tools:\n  maps_search_places:\n    provider: sandbox\n    price: ${MAPS_PRICE}\n';
    assert.deepEqual(parse(text, { MAPS_PRICE: '500' }).tools.get('maps_search_places')?.price, {
      kind: 'flat',
      credits: 500n,
    });
    rejects(
      text,
      'config tools.maps_search_places.price: must be a non-negative integer (got a value from the environment)',
      { MAPS_PRICE: 'sk-12' },
    );
  });

  it('rejects a negative price, naming the key path', () => {
    rejects(
      FULL.replace('input_per_1m: 150000', 'input_per_1m: -1'),
      'config models.svc-pro.price.input_per_1m: must be a non-negative integer (got -1)',
    );
    rejects(
      FULL.replace('price: 460', 'price: -460'),
      'config tools.maps_search_places.price: must be a non-negative integer (got -460)',
    );
  });

  it('rejects fractional and textual money', () => {
    rejects(
      FULL.replace('output_per_1m: 600000', 'output_per_1m: 0.5'),
      'config models.svc-pro.price.output_per_1m: must be a non-negative integer (got the fraction 0.5)',
    );
    rejects(
      FULL.replace('price: 230', 'price: "230"'),
      'config tools.shopping_search.price: must be a non-negative integer (got the string "230")',
    );
  });

  it('reads chat.fast_path (absent: on), and SVC_FAST_PATH overrides it', () => {
    assert.equal(parse(FULL).chat, undefined);
    assert.equal(fastPathEnabled(parse(FULL).chat?.fastPath, {}), true);
    assert.deepEqual(parse(`${FULL}chat:\n  fast_path: false\n`).chat, { fastPath: false });
    assert.equal(fastPathEnabled(false, {}), false);
    assert.equal(fastPathEnabled(false, { SVC_FAST_PATH: '1' }), true);
    assert.equal(fastPathEnabled(true, { SVC_FAST_PATH: '0' }), false);
    rejects(`${FULL}chat:\n  fast_path: 2\n`, /^config chat\.fast_path: /);
    rejects(`${FULL}chat:\n  fastpath: true\n`, /^config chat\.fastpath: unknown key/);
  });

  it("reads a model's cache (defaults: key account, breakpoints auto) and anthropic.strip_billing_header (default on)", () => {
    assert.equal(parse(FULL).models.get('svc-pro')?.cache, undefined);
    assert.equal(parse(FULL).anthropic, undefined);
    const cached = FULL.replace(
      '    context_window: 128000',
      '    context_window: 128000\n    cache: { key: session }',
    );
    assert.deepEqual(parse(cached).models.get('svc-pro')?.cache, { key: 'session', breakpoints: 'auto' });
    const off = FULL.replace(
      '    context_window: 128000',
      '    context_window: 128000\n    cache: { key: off, breakpoints: off }',
    );
    assert.deepEqual(parse(off).models.get('svc-pro')?.cache, { key: 'off', breakpoints: 'off' });
    assert.deepEqual(parse(`${FULL}anthropic:\n  strip_billing_header: false\n`).anthropic, {
      stripBillingHeader: false,
    });
    rejects(
      FULL.replace('    context_window: 128000', '    context_window: 128000\n    cache: { key: request }'),
      /^config models\.svc-pro\.cache\.key: /,
    );
    rejects(`${FULL}anthropic:\n  strip_billing_header: 2\n`, /^config anthropic\.strip_billing_header: /);
  });

  it('rejects unknown keys at every level', () => {
    rejects(
      `${FULL}extra: 1\n`,
      /^config extra: unknown key \(expected one of: models, tools, limits, oauth, responses, chat, anthropic, payments, console, pricing\)$/,
    );
    rejects(
      FULL.replace('    context_window: 128000', '    context_windw: 128000'),
      /^config models\.svc-pro\.context_windw: unknown key/,
    );
    rejects(
      FULL.replace('model: sonar', 'model: sonar\n    temperature: 1'),
      /^config tools\.web_search\.temperature: unknown key/,
    );
    rejects(
      FULL.replace('output_per_1m: 600000 }', 'output_per_1m: 600000, cached_per_1m: 1 }'),
      /^config models\.svc-pro\.price\.cached_per_1m: unknown key/,
    );
    rejects(
      FULL.replace('max_body_bytes: 1048576', 'max_body_byte: 1048576'),
      /^config limits\.max_body_byte: unknown key/,
    );
  });

  it('rejects unknown providers and tools', () => {
    rejects(
      FULL.replace('provider: openai ', 'provider: bedrock '),
      'config models.svc-pro.provider: unknown provider "bedrock" (expected one of: openai, openai-responses, anthropic, gemini, sandbox, cohere)',
    );
    rejects(
      FULL.replace('provider: neshan ', 'provider: google '),
      'config tools.maps_search_places.provider: unknown provider "google" (expected one of: sandbox, neshan, nominatim)',
    );
    rejects(
      `tools:\n  image_search:\n    provider: sandbox\n    price: 1\n`,
      'config tools.image_search: unknown tool (expected one of: web_search, maps_search_places, shopping_search)',
    );
  });

  it('rejects wrong types', () => {
    rejects(
      FULL.replace('context_window: 128000', 'context_window: big'),
      'config models.svc-pro.context_window: must be a positive integer (got the string "big")',
    );
    rejects(
      FULL.replace('upstream_model: some-model', 'upstream_model: [a, b]'),
      'config models.svc-pro.upstream_model: must be a string (got a list)',
    );
    rejects('models: [svc-pro]\n', 'config models: must be a mapping (got a list)');
    rejects('- a\n- b\n', /^config file test\.yaml: the top level must be a mapping/);
    rejects(
      FULL.replace('requests_per_minute: 600', 'requests_per_minute: 0'),
      'config limits.requests_per_minute: must be a positive integer (got 0)',
    );
  });

  it('requires what an upstream provider needs', () => {
    rejects(
      FULL.replace('    base_url: https://api.example.com/v1\n', ''),
      'config models.svc-pro.base_url: is required for provider openai',
    );
    rejects(
      FULL.replace('    upstream_model: some-model\n', ''),
      'config models.svc-pro.upstream_model: is required for provider openai',
    );
    rejects(
      FULL.replace('    price: { input_per_1m: 150000, output_per_1m: 600000 }   # credits per 1M tokens\n', ''),
      /^config models\.svc-pro\.price: is required/,
    );
    rejects(
      FULL.replace('    api_key: ${NESHAN_API_KEY}\n', ''),
      'config tools.maps_search_places.api_key: is required for provider neshan',
    );
    rejects(
      'tools:\n  web_search:\n    provider: searxng\n    price: 10\n',
      'config tools.web_search.base_url: is required for provider searxng (it is self-hosted)',
    );
    rejects(
      FULL.replace('base_url: https://api.example.com/v1', 'base_url: ftp://example.com'),
      'config models.svc-pro.base_url: must be an http(s) URL',
    );
    rejects(
      FULL.replace('base_url: https://api.example.com/v1', 'base_url: https://u:p@example.com'),
      'config models.svc-pro.base_url: must not contain credentials (use api_key)',
    );
    rejects(
      FULL.replace('max_output_tokens: 8192', 'max_output_tokens: 200000'),
      'config models.svc-pro.max_output_tokens: must not exceed context_window (128000)',
    );
  });

  it('accepts the native providers anthropic and openai-responses, which need a base_url and an upstream model', () => {
    for (const provider of ['anthropic', 'openai-responses'] as const) {
      const config = parse(FULL.replace('provider: openai ', `provider: ${provider} `));
      const model = config.models.get('svc-pro');
      assert.equal(model?.provider, provider);
      assert.equal(model?.baseUrl, 'https://api.example.com/v1');
      assert.equal(model?.upstreamModel, 'some-model');
      rejects(
        FULL.replace('provider: openai ', `provider: ${provider} `).replace('    upstream_model: some-model\n', ''),
        `config models.svc-pro.upstream_model: is required for provider ${provider}`,
      );
    }
  });

  it('reads max_tokens_field, the name the output limit goes upstream in, and rejects any other name', () => {
    assert.equal(parse(FULL).models.get('svc-pro')?.maxTokensField, undefined);
    const reasoning = parse(
      FULL.replace('max_output_tokens: 8192', 'max_output_tokens: 8192\n    max_tokens_field: max_completion_tokens'),
    );
    assert.equal(reasoning.models.get('svc-pro')?.maxTokensField, 'max_completion_tokens');
    rejects(
      FULL.replace('max_output_tokens: 8192', 'max_output_tokens: 8192\n    max_tokens_field: max_output_tokens'),
      'config models.svc-pro.max_tokens_field: unknown max_tokens_field "max_output_tokens" (expected one of: max_tokens, max_completion_tokens)',
    );
  });

  it("reads a model's extra_params, refusing names that are not parameters or that OpenAI documents", () => {
    const withExtra = (list: string): string =>
      FULL.replace('max_output_tokens: 8192', `max_output_tokens: 8192\n    extra_params: ${list}`);
    assert.deepEqual(
      parse(withExtra('[top_k, min_p]')).models.get('svc-pro')?.extraParams,
      new Set(['top_k', 'min_p']),
    );
    assert.deepEqual(parse(FULL).models.get('svc-pro')?.extraParams, new Set());
    rejects(
      withExtra('top_k'),
      'config models.svc-pro.extra_params: must be a list of parameter names (got the string "top_k")',
    );
    rejects(
      withExtra('[top_k, "min-p"]'),
      'config models.svc-pro.extra_params.1: must be a parameter name of letters, digits and "_" (got the string "min-p")',
    );
    rejects(
      withExtra('[temperature]'),
      "config models.svc-pro.extra_params.0: 'temperature' is an OpenAI chat parameter already: list only others",
    );
    rejects(
      withExtra('[functions]'),
      "config models.svc-pro.extra_params.0: 'functions' is an OpenAI chat parameter already: list only others",
    );
  });

  it('explains the usual YAML mistake: ${NAME} unquoted inside a flow mapping', () => {
    rejects(
      'models:\n  m:\n    provider: sandbox\n    headers: { X-Team: ${TEAM} }\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
      /^config file test\.yaml: invalid YAML at line 4, column \d+: .*\(an unquoted \$\{NAME\} inside \{ … \} or \[ … \] is not valid YAML: quote it, "\$\{NAME\}", or write that mapping in block style\)$/,
      { TEAM: 'x' },
    );
    assert.equal(
      parse(
        'models:\n  m:\n    provider: sandbox\n    headers: { X-Team: "${TEAM}" }\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
        {
          TEAM: 'core',
        },
      ).models.get('m')?.upstreams[0]?.headers['x-team'],
      'core',
    );
  });

  it('reports YAML syntax errors and duplicate keys with their line', () => {
    rejects('models:\n  svc-pro: {\n', /^config file test\.yaml: invalid YAML at line \d+, column \d+: /);
    rejects(
      'limits:\n  max_body_bytes: 2048\n  max_body_bytes: 4096\n',
      /^config file test\.yaml: invalid YAML at line 3, column 3: Map keys must be unique/,
    );
  });

  it('keeps the built-in sandbox entries for what the file does not configure', () => {
    const config = parse('tools:\n  shopping_search:\n    provider: digikala\n    price: 300\n');
    assert.equal(config.models.get('svc-pro')?.provider, 'sandbox');
    assert.equal(config.tools.get('shopping_search')?.provider, 'digikala');
    assert.equal(config.tools.get('shopping_search')?.baseUrl, 'https://api.digikala.com');
    assert.equal(config.tools.get('web_search')?.provider, 'sandbox');
    assert.deepEqual(config.limits, {
      requestsPerMinute: 600,
      maxBodyBytes: 1048576,
      holdTtlSeconds: 600,
      streamStallSeconds: 60,
      upstreamConnections: 128,
      upstreamQueueMs: 5000,
      maxConnections: 4096,
      maxConnectionsPerAddress: 256,
      headersTimeoutSeconds: 10,
      requestTimeoutSeconds: 30,
      bodyIdleSeconds: 10,
    });
    assert.equal(parse('').models.size, BUILT_IN_MODELS.length);
  });

  it('lists exactly the configured models when models is present', () => {
    const config = parse('models:\n  mini:\n    provider: sandbox\n    price: { input_per_1m: 1, output_per_1m: 2 }\n');
    assert.deepEqual([...config.models.keys()], ['mini']);
    assert.equal(config.models.get('mini')?.upstreamModel, 'mini');
  });

  it('accepts a token tariff with a cap for a tool, and rejects a zero cap', () => {
    const text =
      'tools:\n  web_search:\n    provider: perplexity\n    api_key: k\n    price: { input_per_1m: 1000, output_per_1m: 2000, cap: 50 }\n';
    assert.deepEqual(parse(text).tools.get('web_search')?.price, {
      kind: 'tokens',
      tariff: { inputPer1m: 1000n, outputPer1m: 2000n },
      cap: 50n,
    });
    rejects(text.replace('cap: 50', 'cap: 0'), 'config tools.web_search.price.cap: must be a positive integer (got 0)');
    rejects(
      text.replace('perplexity', 'sandbox').replace('    api_key: k\n', '    model: m\n'),
      'config tools.web_search.model: is not used by provider sandbox',
    );
  });

  it('keeps money exact beyond 2^53 only up to the safe-integer limit', () => {
    rejects(
      FULL.replace('price: 230', 'price: 9007199254740993'),
      'config tools.shopping_search.price: must be at most 9007199254740991 (got 9007199254740993)',
    );
  });
});

describe('loadConfig: embedding models', () => {
  const parse = (text: string): ReturnType<typeof parseConfig> => parseConfig(text, {}, 'test');
  it('reads kind, dimensions (one or a list) and an optional output price', () => {
    const config = parse(`models:
  e1:
    provider: openai
    kind: embedding
    base_url: https://api.example.com/v1
    upstream_model: text-embedding-3-small
    dimensions: [1536, 512]
    price: { input_per_1m: 20000 }
  e2:
    provider: gemini
    kind: embedding
    base_url: https://generativelanguage.googleapis.com/v1beta
    upstream_model: gemini-embedding-001
    dimensions: 768
    price: { input_per_1m: 15000 }
  c:
    provider: sandbox
    price: { input_per_1m: 1, output_per_1m: 2 }
`);
    const e1 = config.models.get('e1');
    assert.equal(e1?.kind, 'embedding');
    assert.deepEqual(e1?.dimensions, [1536, 512]);
    assert.equal(e1?.price.outputPer1m, 0n);
    assert.equal(e1?.contextWindow, 8192);
    assert.deepEqual(config.models.get('e2')?.dimensions, [768]);
    assert.equal(config.models.get('e2')?.provider, 'gemini');
    assert.equal(config.models.get('c')?.kind, undefined);
  });

  it('refuses a bad kind, bad dimensions, and dimensions on a chat model, naming the key', () => {
    const model = (extra: string): string =>
      `models:\n  m:\n    provider: sandbox\n    price: { input_per_1m: 1, output_per_1m: 1 }\n${extra}`;
    assert.throws(() => parse(model('    kind: vision\n')), /config models\.m\.kind: unknown kind/);
    assert.throws(() => parse(model('    kind: embedding\n    dimensions: 0\n')), /config models\.m\.dimensions/);
    assert.throws(() => parse(model('    kind: embedding\n    dimensions: [8, x]\n')), /models\.m\.dimensions\.1/);
    assert.throws(() => parse(model('    dimensions: 8\n')), /models\.m\.dimensions/);
    assert.throws(
      () => parse('models:\n  m:\n    provider: sandbox\n    price: { input_per_1m: 1 }\n'),
      /models\.m\.price\.output_per_1m: is required/,
    );
  });

  it('reads compaction: native on an openai-responses upstream (default off) and refuses it elsewhere, naming the key', () => {
    const upstream = (provider: string, extra: string): string =>
      `models:\n  m:\n    provider: ${provider}\n    base_url: https://api.example.com/v1\n    upstream_model: x\n    price: { input_per_1m: 1, output_per_1m: 1 }\n${extra}`;
    const native = parse(upstream('openai-responses', '    compaction: native\n')).models.get('m');
    assert.equal(native?.upstreams[0]?.nativeCompaction, true);
    assert.equal(parse(upstream('openai-responses', '')).models.get('m')?.upstreams[0]?.nativeCompaction, undefined);
    assert.equal(
      parse(upstream('openai-responses', '    compaction: svc\n')).models.get('m')?.upstreams[0]?.nativeCompaction,
      undefined,
    );
    rejects(
      upstream('openai', '    compaction: native\n'),
      /config models\.m\.compaction: native compaction is the Responses API's own/,
    );
    rejects(
      upstream('openai-responses', '    compaction: yes\n'),
      /config models\.m\.compaction: unknown compaction "yes"/,
    );
    const listed = parse(
      'models:\n  m:\n    price: { input_per_1m: 1, output_per_1m: 1 }\n    upstreams:\n' +
        '      - { provider: openai-responses, base_url: https://a.example/v1, upstream_model: x, compaction: native }\n' +
        '      - { provider: openai-responses, base_url: https://b.example/v1, upstream_model: x }\n',
    ).models.get('m');
    assert.deepEqual(
      listed?.upstreams.map((u) => u.nativeCompaction === true),
      [true, false],
    );
  });
});

describe('loadConfig: values from the environment and odd YAML', () => {
  const SECRET = 'sk live/0123456789abcdef';
  const refusal = (text: string, env: NodeJS.ProcessEnv = {}): string => {
    try {
      parseConfig(text, env, 'test.yaml');
    } catch (error) {
      assert.ok(error instanceof Error);
      return error.message;
    }
    assert.fail(`accepted: ${text}`);
  };

  it('never shows a value that came from the environment, whatever is wrong with it', () => {
    const cases: [string, RegExp][] = [
      [
        'models:\n  m:\n    provider: ${S}\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
        /^config models\.m\.provider: unknown provider the value from the environment \(expected one of: /,
      ],
      [
        'models:\n  m:\n    provider: sandbox\n    context_window: ${S}\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
        /^config models\.m\.context_window: must be a positive integer \(got a value from the environment\)$/,
      ],
      ['limits: ${S}\n', /^config limits: must be a mapping \(got a value from the environment\)$/],
      [
        'models:\n  m:\n    provider: sandbox\n    aliases: ["${S}"]\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
        /^config models\.m\.aliases\.0: must be 1-100 letters, .* \(got a value from the environment\)$/,
      ],
      [
        'tools:\n  maps_search_places:\n    provider: sandbox\n    price:\n      input_per_1m: ${S}\n      output_per_1m: 1\n',
        /^config tools\.maps_search_places\.price\.input_per_1m: must be a non-negative integer \(got a value from the environment\)$/,
      ],
    ];
    for (const [text, expected] of cases) {
      const message = refusal(text, { S: SECRET });
      assert.match(message, expected);
      assert.ok(!message.includes(SECRET), message);
    }
  });

  it('reads list items from the environment like any other', () => {
    const config = parseConfig(
      'models:\n  m:\n    provider: sandbox\n    aliases: ["${A}"]\n    extra_params: ["${P}"]\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
      { A: 'gpt-4o-mini', P: 'top_k' },
      't',
    );
    assert.deepEqual(config.models.get('m')?.aliases, ['gpt-4o-mini']);
    assert.deepEqual(config.models.get('m')?.extraParams, new Set(['top_k']));
  });

  it('says an empty value from the environment is empty, pointing at the variable', () => {
    assert.equal(
      refusal('tools:\n  web_search:\n    provider: perplexity\n    api_key: ${K}\n    price: 1\n', { K: ' ' }),
      'config tools.web_search.api_key: is empty (check the environment variable it names)',
    );
  });

  it('takes a key without a value as absent, and refuses __proto__ as an unknown key', () => {
    const config = parseConfig('models:\nlimits:\n  requests_per_minute:\n  max_body_bytes: 2048\n', {}, 't');
    assert.deepEqual([...config.models.keys()], BUILT_IN_MODELS);
    assert.equal(config.limits.requestsPerMinute, 600);
    assert.equal(config.limits.maxBodyBytes, 2048);
    assert.match(
      refusal('limits:\n  __proto__: { x: 1 }\n'),
      /^config limits\.__proto__: unknown key \(expected one of: /,
    );
    assert.equal(Object.getPrototypeOf(parseConfig('limits: {}\n', {}, 't').limits), Object.prototype);
  });

  it('names the first problem in document order, each with its full key path', () => {
    assert.equal(
      refusal(
        'models:\n  m:\n    price: { input_per_1m: 1 }\n    upstreams:\n      - provider: sandbox\n      - provider: openai\n        base_url: https://x.example\n',
      ),
      'config models.m.price.output_per_1m: is required',
    );
    assert.equal(
      refusal(
        'models:\n  m:\n    price: { input_per_1m: 1, output_per_1m: 1 }\n    upstreams:\n      - provider: sandbox\n      - provider: openai\n        base_url: https://x.example\n',
      ),
      'config models.m.upstreams.1.upstream_model: is required for provider openai',
    );
    assert.equal(
      refusal('models:\n  m:\n    price: { input_per_1m: 1, output_per_1m: 1 }\n    upstreams: [sandbox]\n'),
      'config models.m.upstreams.0: must be a mapping (got the string "sandbox")',
    );
    assert.equal(
      refusal(
        'models:\n  m:\n    provider: sandbox\n    dimensions: 8\n    price: { input_per_1m: 1, output_per_1m: 1 }\n',
      ),
      'config models.m.dimensions: is only for embedding models (kind: embedding)',
    );
    assert.equal(
      refusal('tools:\n  web_search: sandbox\n'),
      'config tools.web_search: must be a mapping (got the string "sandbox")',
    );
  });
});
