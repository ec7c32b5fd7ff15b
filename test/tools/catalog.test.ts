import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { TOOL_CATALOG } from '../../core';
import { parseConfig, loadConfig } from '../../core/config/load';
import { TOOL_NAMES, TOOL_SPECS, TOOLS } from '../../core/tools/catalog';
import { toJsonSchema } from '../../core/tools/schema';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser } from '../console/helpers';
import { connectClient } from '../mcp/helpers';

/*
 * One tool is one module in core/tools/ plus its line in catalog.ts: the names, the config
 * loader, the built-in sandbox entries and their prices, tools/list, MCP's instructions and the
 * console's labels all come from that list. These fail when a tool is added in one place only.
 */

const TOOLS_DIR = path.join(__dirname, '../../core/tools');

/** Exports of a core/tools/*.ts module that have the shape of a tool module. */
function toolLikeExports(file: string): { name: string }[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const exports = require(path.join(TOOLS_DIR, file)) as Record<string, unknown>;
  return Object.values(exports).filter(
    (value): value is { name: string } =>
      typeof value === 'object' &&
      value !== null &&
      typeof (value as { name?: unknown }).name === 'string' &&
      typeof (value as { parse?: unknown }).parse === 'function' &&
      typeof (value as { providers?: unknown }).providers === 'object',
  );
}

describe('the tool list (core/tools/catalog.ts) is the one source of the tools', function () {
  it('lists every tool module of core/tools/, once each, under a unique name', function () {
    const declared = fs
      .readdirSync(TOOLS_DIR)
      .filter((file) => file.endsWith('.ts') && file !== 'catalog.ts')
      .flatMap((file) => toolLikeExports(file).map((tool) => ({ file, tool })));
    assert.ok(declared.length >= TOOLS.length);
    for (const { file, tool } of declared)
      assert.ok(
        (TOOL_SPECS as readonly unknown[]).includes(tool),
        `core/tools/${file} declares the tool ${tool.name} but catalog.ts does not list it`,
      );
    assert.deepEqual(
      TOOL_NAMES,
      TOOLS.map((tool) => tool.name),
    );
    assert.equal(new Set(TOOL_NAMES).size, TOOL_NAMES.length, 'tool names are unique');
  });

  it('gives every tool a built-in sandbox entry at the price its module declares', function () {
    const config = loadConfig(undefined, {});
    assert.deepEqual([...config.tools.keys()], TOOL_NAMES);
    for (const tool of TOOL_SPECS) {
      const entry = config.tools.get(tool.name);
      assert.equal(entry?.provider, 'sandbox', tool.name);
      assert.deepEqual(entry?.price, tool.sandboxPrice, `${tool.name}: the default price`);
      assert.ok('sandbox' in tool.providers, `${tool.name} has a sandbox provider`);
    }
  });

  it('validates tools.<name> against the tool list and each module’s providers', function () {
    assert.throws(() => parseConfig('tools:\n  no_such_tool:\n    provider: sandbox\n    price: 1\n', {}, 't.yaml'), {
      message: `config tools.no_such_tool: unknown tool (expected one of: ${TOOL_NAMES.join(', ')})`,
    });
    for (const tool of TOOL_SPECS) {
      const kinds = Object.keys(tool.providers);
      assert.throws(
        () => parseConfig(`tools:\n  ${tool.name}:\n    provider: nope\n    price: 1\n`, {}, 't.yaml'),
        {
          message: `config tools.${tool.name}.provider: unknown provider "nope" (expected one of: ${kinds.join(', ')})`,
        },
        tool.name,
      );
      for (const [provider, kind] of Object.entries(tool.providers)) {
        const lines = [
          `tools:`,
          `  ${tool.name}:`,
          `    provider: ${provider}`,
          `    price: 7`,
          ...(kind.defaultBaseUrl === undefined ? ['    base_url: http://127.0.0.1:9'] : []),
          ...(kind.needsApiKey ? ['    api_key: k'] : []),
        ];
        const entry = parseConfig(`${lines.join('\n')}\n`, {}, 't.yaml').tools.get(tool.name);
        assert.equal(entry?.provider, provider, `${tool.name} accepts ${provider}`);
        assert.deepEqual(entry?.price, { kind: 'flat', credits: 7n });
        assert.equal(entry?.model, kind.defaultModel);
      }
    }
  });

  it('gives every tool the words the adapters show (MCP instructions, console labels)', function () {
    assert.deepEqual(
      TOOL_CATALOG.map((entry) => entry.name),
      TOOL_NAMES,
    );
    for (const entry of TOOL_CATALOG) {
      assert.ok(entry.title !== '' && entry.summary !== '', entry.name);
      assert.ok(entry.labels.en !== '' && entry.labels.fa !== '', entry.name);
    }
  });

  describe('over MCP against the sandbox', function () {
    let svc: TestSvc;
    let client: Client | undefined;
    before(async function () {
      svc = await startSvc();
    });
    after(async function () {
      await client?.close();
      await svc?.close();
    });

    it('tools/list shows every tool with its module’s schema and price; initialize names each', async function () {
      const { key } = await svc.createFundedKey(10_000);
      client = await connectClient(svc.baseUrl, key);
      const { tools } = await client.listTools();
      assert.deepEqual(
        tools.map((t) => t.name),
        TOOL_NAMES,
      );
      for (const tool of TOOL_SPECS) {
        const listed = tools.find((t) => t.name === tool.name);
        assert.equal(listed?.title, tool.title);
        assert.deepEqual(listed?.inputSchema, toJsonSchema(tool.input, 'input'), `${tool.name} input schema`);
        const price =
          tool.sandboxPrice.kind === 'flat' ? tool.sandboxPrice.credits : tool.sandboxPrice.tariff.inputPer1m;
        assert.ok(listed?.description?.includes(` ${price} `), `${tool.name}: price ${price} in its description`);
      }
      const instructions = client.getInstructions() ?? '';
      for (const entry of TOOL_CATALOG)
        assert.ok(instructions.includes(`${entry.name} (${entry.summary})`), `${entry.name} in the instructions`);
    });

    it("the console's prices page names every tool by its module's label, in each locale", async function () {
      const user = await createConsoleUser(svc, { name: 'P', email: 'p@example.com', balance: 0n, keyName: 'k' });
      for (const locale of ['en', 'fa'] as const) {
        const c = consoleClient(svc.baseUrl, { 'accept-language': locale });
        await c.signIn(user.email, user.password);
        const page = await c.get('/prices');
        assert.equal(page.status, 200);
        for (const entry of TOOL_CATALOG)
          assert.ok(
            page.body.includes(`${entry.labels[locale]} <span class="mono hint">${entry.name}</span>`),
            `${entry.name} labelled in ${locale}`,
          );
      }
    });
  });
});
