import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runSvc } from './run-svc';

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

const FILE = `models:
  svc-pro:
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    aliases: [gpt-4o-mini]
    upstreams:
      - provider: openai
        base_url: https://a.example.com/v1
        api_key: \${A_KEY}
        upstream_model: m-a
        headers:
          X-Team: \${TEAM}
tools:
  maps_search_places:
    provider: neshan
    api_key: \${NESHAN_KEY}
    price: 460
`;
const SECRETS = { A_KEY: 'sk-upstream-secret-1', TEAM: 'team-secret-2', NESHAN_KEY: 'service.secret-3' };

describe('svc config check', () => {
  let dir: string;
  let file: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-config-check-'));
    file = path.join(dir, 'svc.yaml');
    fs.writeFileSync(file, FILE);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('says what SVC_CONFIG configures, and never prints a secret', async () => {
    const human = await runSvc(['config', 'check'], { ...SECRETS, SVC_CONFIG: file });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^configuration .*svc\.yaml: valid$/m);
    assert.match(
      human.stdout,
      /^svc-pro, gpt-4o-mini +chat +svc-pro#1:openai@a\.example\.com +150000 in \/ 600000 out/m,
    );
    assert.match(human.stdout, /^maps_search_places +neshan +460 per call$/m);
    const json = await runSvc(['config', 'check', '--json', '--file', file], SECRETS);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as {
      ok: boolean;
      models: { id: string; upstreams: { api_key: boolean; headers: string[] }[] }[];
      tools: { name: string; provider: string; price: { per_call?: number } }[];
    };
    assert.equal(parsed.ok, true);
    assert.deepEqual(parsed.models[0]?.upstreams[0], {
      ...parsed.models[0]?.upstreams[0],
      api_key: true,
      headers: ['x-team'],
    });
    assert.deepEqual(parsed.tools.find((t) => t.name === 'maps_search_places')?.price, { per_call: 460 });
    for (const out of [human.stdout, json.stdout])
      for (const secret of Object.values(SECRETS)) assert.ok(!out.includes(secret), `printed ${secret}`);
  });

  it('refuses a bad file as svc serve would, naming the key, with a non-zero exit', async () => {
    const { A_KEY: _unset, ...env } = SECRETS;
    const missing = await runSvc(['config', 'check', '--file', file], env);
    assert.notEqual(missing.code, 0);
    assert.match(
      missing.stderr,
      /config models\.svc-pro\.upstreams\.0\.api_key: environment variable A_KEY is not set/,
    );
    fs.writeFileSync(path.join(dir, 'typo.yaml'), 'limits:\n  requests_per_minut: 5\n');
    const typo = await runSvc(['config', 'check', '--file', path.join(dir, 'typo.yaml')], {});
    assert.notEqual(typo.code, 0);
    assert.match(
      typo.stderr,
      /config limits\.requests_per_minut: unknown key \(did you mean "requests_per_minute"\? expected one of: requests_per_minute, /,
    );
    // The file, the line number and the line itself.
    assert.ok(
      typo.stderr.includes(`\n  in ${path.join(dir, 'typo.yaml')}, line 2:\n    2 |   requests_per_minut: 5\n`),
      typo.stderr,
    );
    assert.equal(typo.stdout, '');
    // A YAML syntax error: its position once, the line and a caret, no dangling colon.
    fs.writeFileSync(path.join(dir, 'broken.yaml'), 'models:\n  svc-pro:\n    price: { input_per_1m: 1\n');
    const broken = await runSvc(['config', 'check', '--file', path.join(dir, 'broken.yaml')], {});
    assert.equal(broken.code, 1);
    const [first, ...rest] = broken.stderr.trimEnd().split('\n');
    assert.match(first ?? '', /^svc: config file .*broken\.yaml: invalid YAML at line \d+, column \d+: [^:]*[^:]$/);
    assert.equal((first ?? '').match(/line \d+/g)?.length, 1, 'the position is given once');
    assert.match(rest.join('\n'), /^ {2}in .*broken\.yaml, line \d+:\n( +\d+ \| .*\n)+ +\^$/);
  });

  it('shows a dollar-priced model’s credit prices with the dollar price, rate and margin behind them (SPEC §15)', async () => {
    const priced = path.join(dir, 'priced.yaml');
    fs.writeFileSync(
      priced,
      `pricing: { rate: 98000, margin: 0.2 }
models:
  svc-pro:
    provider: sandbox
    price_usd: { input_per_1m: 1.25, cached_input_per_1m: 0.125, output_per_1m: 10 }
    margin: 0.3
  gpt-pic:
    kind: image
    provider: sandbox
    price_usd: { input_per_1m: 5, image_input_per_1m: 10, output_per_1m: 40 }
  dalle:
    kind: image
    provider: sandbox
    price_usd: { per_image: { "1024x1024/standard": 0.04 } }
  plain:
    provider: sandbox
    price: { input_per_1m: 100, output_per_1m: 200 }
`,
    );
    const human = await runSvc(['config', 'check', '--file', priced], {});
    assert.equal(human.code, 0, human.stderr);
    // ceil(1.25 × 98000 × 1.3) = 159250; ceil(10 × 98000 × 1.3) = 1274000.
    assert.match(
      human.stdout,
      /^svc-pro +chat +\S+ +159250 in \/ 1274000 out per 1M tokens \(from \$1\.25 in \/ \$10 out \/ \$0\.125 cached in per 1M tokens at rate 98000, margin 0\.3\)$/m,
    );
    // The input images apart: ceil(5 × 98000 × 1.2) = 588000, ceil(10 × …) = 1176000, ceil(40 × …) = 4704000.
    assert.match(
      human.stdout,
      /^gpt-pic +image +\S+ +588000 in \/ 1176000 image in \/ 4704000 out per 1M tokens \(from \$5 in \/ \$10 image in \/ \$40 out per 1M tokens at rate 98000, margin 0\.2\)$/m,
    );
    assert.match(
      human.stdout,
      /^dalle +image +\S+ +4704 per image 1024x1024\/standard \(from \$0\.04 per image 1024x1024\/standard at rate 98000, margin 0\.2\)$/m,
    );
    assert.match(human.stdout, /^plain +chat +\S+ +100 in \/ 200 out per 1M tokens$/m);
    // The file's rate is only the first: a stored rate wins at run time.
    assert.match(
      human.stdout,
      /^pricing: rate 98000 toman per US dollar \(the file's pricing\.rate\).*stored rate wins at run time/m,
    );

    const json = await runSvc(['config', 'check', '--json', '--file', priced], {});
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as {
      pricing: unknown;
      models: { id: string; price: Record<string, number>; price_usd?: unknown; margin?: unknown }[];
    };
    assert.deepEqual(parsed.pricing, { rate: 98000, margin: 0.2, rate_from: 'file' });
    const byId = Object.fromEntries(parsed.models.map((m) => [m.id, m]));
    assert.deepEqual(
      [byId['gpt-pic']?.price_usd, byId['gpt-pic']?.margin, byId['gpt-pic']?.price['image_input_per_1m']],
      [{ input_per_1m: 5, output_per_1m: 40, image_input_per_1m: 10 }, 0.2, 1176000],
    );
    assert.deepEqual([byId['svc-pro']?.margin, byId['svc-pro']?.price['image_input_per_1m']], [0.3, undefined]);
    assert.deepEqual([byId['plain']?.price_usd, byId['plain']?.margin], [undefined, undefined]);
  });

  it('checks the built-in configuration when there is no file', async () => {
    const builtIn = await runSvc(['config', 'check', '--json'], { SVC_CONFIG: '' });
    assert.equal(builtIn.code, 0, builtIn.stderr);
    const parsed = JSON.parse(builtIn.stdout) as { source: string; models: { id: string; media_price?: string }[] };
    assert.equal(parsed.source, 'built-in');
    assert.equal(parsed.models.find((m) => m.id === 'svc-tts')?.media_price, '150000 per 1M characters');
    assert.deepEqual(
      parsed.models.map((m) => m.id),
      BUILT_IN_MODELS,
    );
  });
});
