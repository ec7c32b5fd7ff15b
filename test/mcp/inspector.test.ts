import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startSvc, type TestSvc } from '../helpers/harness';
import { clientFile, requireClient } from '../helpers/clients';
import { assertMcp } from '../helpers/mcp-schema';

const run = promisify(execFile);

// @modelcontextprotocol/inspector 0.16.8: the last line whose CLI has `--header`, and it runs on
// Node 20 (its package asks for Node 22 but its CLI needs nothing newer). Installed in test/clients.
const INSPECTOR = clientFile('@modelcontextprotocol/inspector/cli/build/cli.js');

describe('the MCP Inspector CLI against svc', () => {
  let svc: TestSvc;
  let key: string;
  let accountId: string;

  before(async function () {
    requireClient(this, INSPECTOR, 'MCP Inspector CLI');
    svc = await startSvc();
    ({ key, accountId } = await svc.createFundedKey(1_000));
  });
  after(async () => {
    await svc?.close();
  });

  // Asynchronous on purpose: svc runs in this process, so a synchronous spawn would block it.
  async function inspector(...args: string[]): Promise<unknown> {
    const { stdout } = await run(
      process.execPath,
      [
        INSPECTOR,
        '--cli',
        `${svc.baseUrl}/v1/mcp`,
        '--transport',
        'http',
        '--header',
        `Authorization: Bearer ${key}`,
        ...args,
      ],
      { timeout: 60_000 },
    );
    return JSON.parse(stdout) as unknown;
  }

  it('tools/list shows the three tools', async () => {
    const result = await inspector('--method', 'tools/list');
    assertMcp('ListToolsResult', result);
    assert.deepEqual((result as { tools: Array<{ name: string }> }).tools.map((t) => t.name).sort(), [
      'maps_search_places',
      'shopping_search',
      'web_search',
    ]);
  });

  it('tools/call runs a tool and charges for it', async () => {
    const result = (await inspector(
      '--method',
      'tools/call',
      '--tool-name',
      'shopping_search',
      '--tool-arg',
      'query=گوشی سامسونگ',
      'limit=2',
    )) as {
      isError: boolean;
      structuredContent: { results: unknown[] };
      _meta: Record<string, unknown>;
    };
    assertMcp('CallToolResult', result);
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.results.length, 2);
    assert.equal(result._meta['svc/cost'], 230);
    assert.equal((await svc.wallet(accountId)).balance, 770n);
  });

  it('fails with a bad key', async () => {
    await assert.rejects(
      run(
        process.execPath,
        [
          INSPECTOR,
          '--cli',
          `${svc.baseUrl}/v1/mcp`,
          '--transport',
          'http',
          '--header',
          'Authorization: Bearer svc_sk_wrong',
          '--method',
          'tools/list',
        ],
        {
          timeout: 60_000,
        },
      ),
      (error: { stdout?: string; stderr?: string }) =>
        /invalid_api_key|401/.test(`${error.stdout ?? ''}${error.stderr ?? ''}`),
    );
  });
});
