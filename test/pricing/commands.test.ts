import assert from 'node:assert/strict';
import type { AuditTables } from '../../core/accounts/audit';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';
import { runSvc, svcJson } from '../cli/run-svc';
import { openStore } from '../../core/store/db';

/** The audit log's deployment-wide entries (rate changes, the file's margins), oldest first. */
async function deploymentAudit(url: string): Promise<{ action: string; detail: string }[]> {
  const store = openStore(url);
  try {
    return await store.db
      .withTables<AuditTables>()
      .selectFrom('console_audit')
      .select(['action', 'detail'])
      .where('account_id', '=', '*')
      .orderBy('seq')
      .execute();
  } finally {
    await store.close();
  }
}

const CONFIG = `
pricing:
  rate: 98000
  margin: 0.2
models:
  svc-pro:
    provider: sandbox
    price_usd: { input_per_1m: 0.55, cached_input_per_1m: 0.125, output_per_1m: 10 }
    margin: 0.3
  svc-mini:
    provider: sandbox
    price: { input_per_1m: 1000, output_per_1m: 4000 }
  emb:
    kind: embedding
    provider: sandbox
    price_usd: { input_per_1m: 0.02 }
`;

for (const dialect of ['sqlite', 'mysql'] as const) {
  describe(`svc price commands (${dialect}, SPEC §15)`, function () {
    this.timeout(120_000);
    let db: TestDatabase;
    let env: NodeJS.ProcessEnv;
    let dir: string;

    before(async function () {
      if (dialect === 'mysql') requireMysql(this);
      db = await createTestDatabase(dialect);
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-price-'));
      fs.writeFileSync(path.join(dir, 'svc.yaml'), CONFIG);
      env = { SVC_DATABASE_URL: db.url, SVC_CONFIG: path.join(dir, 'svc.yaml') };
      await svcJson(['migrate'], env);
    });

    after(async () => {
      await db?.drop();
      if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
    });

    it("lists every model's credit prices from the file's rate, then history shows it as the first rate", async () => {
      const list = await svcJson(['price', 'list'], env);
      assert.deepEqual(list, {
        rate: 98000,
        margin: 0.2,
        models: [
          {
            id: 'svc-pro',
            kind: 'chat',
            margin: 0.3,
            price_usd: { input_per_1m: 0.55, output_per_1m: 10, cached_input_per_1m: 0.125 },
            price: {
              // ceil(0.55 × 98000 × 1.3) = 70070; ceil(10 × 98000 × 1.3); ceil(0.125 × 98000 × 1.3) = 15925
              input_per_1m: 70070,
              output_per_1m: 1274000,
              cached_input_per_1m: 15925,
              cache_write_per_1m: 70070,
              cache_write_1h_per_1m: 70070,
            },
          },
          {
            id: 'svc-mini',
            kind: 'chat',
            margin: null,
            price_usd: null,
            price: {
              input_per_1m: 1000,
              output_per_1m: 4000,
              cached_input_per_1m: 1000,
              cache_write_per_1m: 1000,
              cache_write_1h_per_1m: 1000,
            },
          },
          {
            id: 'emb',
            kind: 'embedding',
            margin: 0.2,
            price_usd: { input_per_1m: 0.02 },
            price: {
              input_per_1m: 2352,
              output_per_1m: 0,
              cached_input_per_1m: 2352,
              cache_write_per_1m: 2352,
              cache_write_1h_per_1m: 2352,
            },
          },
        ],
      });
      const history = await svcJson(['price', 'history'], env);
      const rates = history['rates'] as { rate: number; set_at: string; by: string }[];
      assert.equal(rates.length, 1);
      assert.equal(rates[0]?.rate, 98000);
      assert.equal(rates[0]?.by, 'config');
    });

    it('refuses 0, a negative rate and a step over 50 % without --force: exit 2, the reason on stderr, nothing written', async () => {
      for (const [rate, why] of [
        ['0', /above 0/],
        ['-5', /above 0/],
        ['147001', /more than 50 % above the current rate 98000; run again with --force/],
        ['48999', /more than 50 % below the current rate 98000/],
        ['9.5', /whole number/],
      ] as const) {
        const run = await runSvc(['price', 'rate', 'set', '--json', '--', rate], env);
        assert.equal(run.code, 2, `${rate}: ${run.stderr}`);
        assert.match(run.stderr, why);
        assert.equal(run.stdout, '');
      }
      const zeroForced = await runSvc(['price', 'rate', 'set', '--force', '0'], env);
      assert.equal(zeroForced.code, 2, 'zero is refused even with --force');
      assert.equal(((await svcJson(['price', 'history'], env))['rates'] as unknown[]).length, 1, 'nothing written');
      assert.deepEqual(await deploymentAudit(db.url), [], 'no refusal is in the audit log');
    });

    it('sets a rate (50 % exactly is allowed; more with --force); the stored rate wins over the file from then on', async () => {
      const set = await svcJson(['price', 'rate', 'set', '147000'], env);
      assert.equal(set['rate'], 147000);
      assert.equal(set['previous'], 98000);
      assert.match(String(set['set_at']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const forced = await svcJson(['price', 'rate', 'set', '--force', '300000'], env);
      assert.deepEqual([forced['rate'], forced['previous']], [300000, 147000]);
      const list = await svcJson(['price', 'list'], env);
      assert.equal(list['rate'], 300000);
      const pro = (list['models'] as { id: string; price: Record<string, number> }[]).find((m) => m.id === 'svc-pro');
      // ceil(0.55 × 300000 × 1.3) = 214500
      assert.equal(pro?.price['input_per_1m'], 214500);
      const rates = (await svcJson(['price', 'history'], env))['rates'] as { rate: number; by: string }[];
      assert.deepEqual(
        rates.map((r) => r.rate),
        [300000, 147000, 98000],
        'newest first',
      );
      assert.match(rates[0]?.by ?? '', /^cli/);
      // Every change is in the audit log, with who made it and whether it was forced.
      const audit = await deploymentAudit(db.url);
      assert.deepEqual(
        audit.map((e) => e.action),
        ['rate_set', 'rate_set'],
      );
      assert.match(audit[0]?.detail ?? '', /^rate 147000 toman per US dollar \(was 98000\) by cli\S*$/);
      assert.match(audit[1]?.detail ?? '', /^rate 300000 toman per US dollar \(was 147000\) by cli\S* \(forced\)$/);
    });
  });
}
