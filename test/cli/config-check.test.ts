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
