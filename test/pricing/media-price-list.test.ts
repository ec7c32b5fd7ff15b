import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { runSvc, svcJson } from '../cli/run-svc';

/*
 * `svc price list` for media models (SPEC §14): a model priced per image, per 1M characters, per
 * minute or per search shows those prices in words, not token prices it does not have.
 */

const CONFIG = `
models:
  pic:
    kind: image
    provider: sandbox
    price: { per_image: { "1024x1024/high": 1700, "1024x1024/low": 400 } }
  voice:
    kind: speech
    provider: sandbox
    price: { per_1m_characters: 150000 }
  ears:
    kind: transcription
    provider: sandbox
    price: { per_minute: 600 }
  ranker:
    kind: rerank
    provider: sandbox
    price: { per_search: 20 }
  mini:
    provider: sandbox
    price: { input_per_1m: 1000, output_per_1m: 4000 }
`;

describe('svc price list: media models by their units (SPEC §14)', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  before(async () => {
    db = await createTestDatabase('sqlite');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-media-price-'));
    fs.writeFileSync(path.join(dir, 'svc.yaml'), CONFIG);
    env = { SVC_DATABASE_URL: db.url, SVC_CONFIG: path.join(dir, 'svc.yaml') };
    await svcJson(['migrate'], env);
  });
  after(async () => {
    await db?.drop();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('shows each unit price in words, in text and in --json; a chat model keeps its token prices', async () => {
    const list = (await svcJson(['price', 'list'], env)) as {
      models: { id: string; price_units?: { credits: number; unit: string }[] }[];
    };
    const units = Object.fromEntries(list.models.map((m) => [m.id, m.price_units]));
    assert.deepEqual(units['pic'], [
      { credits: 1700, unit: 'per image, 1024×1024 high' },
      { credits: 400, unit: 'per image, 1024×1024 low' },
    ]);
    assert.deepEqual(units['voice'], [{ credits: 150000, unit: 'per 1M characters' }]);
    assert.deepEqual(units['ears'], [{ credits: 600, unit: 'per minute' }]);
    assert.deepEqual(units['ranker'], [{ credits: 20, unit: 'per search' }]);
    assert.equal(units['mini'], undefined);
    const text = await runSvc(['price', 'list'], env);
    assert.equal(text.code, 0, text.stderr);
    const line = (id: string): string => text.stdout.split('\n').find((l) => l.startsWith(`${id} `)) ?? '';
    assert.match(line('pic'), /1700 per image, 1024×1024 high; 400 per image, 1024×1024 low/);
    assert.match(line('ears'), /600 per minute/);
    assert.doesNotMatch(line('ears'), /0\/0/);
    assert.match(line('mini'), /1000\/4000/);
  });
});
