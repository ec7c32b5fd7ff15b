import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { consoleClient, createConsoleUser } from '../console/helpers';
import { clientBin, requireClient } from '../helpers/clients';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * Issue 33: the Connect page's settings, exactly as a signed-in person sees them, run each coding
 * assistant against svc. The test signs in to the console, makes a key with the API keys page's
 * form, reads the Connect page's snippets out of its HTML, puts the key in only where the page
 * says to paste it (`export SVC_API_KEY=svc_sk_…`), writes the config files to the paths the page
 * names under a temporary HOME, and runs the snippets' shell lines in bash, adding only what
 * print mode needs (the prompt, and JSON output). svc runs its built-in configuration: svc-pro on
 * the offline sandbox model, which calls a tool a prompt names, and the sandbox tools at their
 * SPEC prices (maps_search_places: 460 credits).
 *
 * Each assistant runs from a bin directory that links the test clients' binaries (or the SVC_*_BIN
 * overrides) under the names the snippets call, with stdin closed, and every connection other than
 * to 127.0.0.1 sent to a dead proxy. Under CI=true a missing client fails.
 */

const CLIENTS = {
  codex: { bin: clientBin('codex', process.env['SVC_CODEX_BIN']), what: 'Codex CLI', variable: 'SVC_CODEX_BIN' },
  claude: { bin: clientBin('claude', process.env['SVC_CLAUDE_BIN']), what: 'Claude Code', variable: 'SVC_CLAUDE_BIN' },
  gemini: { bin: clientBin('gemini', process.env['SVC_GEMINI_BIN']), what: 'Gemini CLI', variable: 'SVC_GEMINI_BIN' },
} as const;

const FUNDS = 10_000_000n;
const MAPS_PRICE = 460n;
const PROMPT = 'Call maps_search_places to find Tajrish Square in Tehran.';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a bash script to its end with stdin closed (asynchronously, so svc keeps answering). */
function bash(script: string, env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const detail = (r: Run): string =>
  `exit ${r.code}\nstdout:\n${r.stdout.slice(-4000)}\nstderr:\n${r.stderr.slice(-4000)}`;

function unescape(text: string): string {
  return text
    .replace(/<[^>]*>/g, '')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** One card of the Connect page: its title, the words beside it, its snippets and hints, as shown. */
interface Card {
  readonly title: string;
  readonly where: string;
  readonly snippets: string[];
  readonly hints: string[];
}

function cardsOf(page: string): Card[] {
  return [...page.matchAll(/<section class="panel"[^>]*>([\s\S]*?)<\/section>/g)].map((m) => {
    const body = m[1] ?? '';
    const heading = /<h2[^>]*>\s*<span[^>]*>([\s\S]*?)<\/span>\s*<small[^>]*>([\s\S]*?)<\/small>/.exec(body);
    return {
      title: unescape(heading?.[1] ?? '').trim(),
      where: unescape(heading?.[2] ?? '').trim(),
      snippets: [...body.matchAll(/<code id="snippet-\d+">([\s\S]*?)<\/code>/g)].map((s) => unescape(s[1] ?? '')),
      hints: [...body.matchAll(/<p class="hint">([\s\S]*?)<\/p>/g)].map((s) => unescape(s[1] ?? '').trim()),
    };
  });
}

/** The file a card's words name (`~/.codex/config.toml: …`), under `home`. */
function namedFile(words: string, home: string): string {
  const match = /~\/([^\s:]+)/.exec(words.replace(/\u200e/g, ''));
  assert.ok(match?.[1] !== undefined, `the page names a file: ${words}`);
  return path.join(home, match[1]);
}

describe('the Connect page’s snippets, exactly as shown, run Codex, Claude Code and Gemini CLI on svc', function () {
  this.timeout(240_000);
  let svc: TestSvc;
  let root: string;
  let bin: string;
  let people = 0;

  before(async function () {
    svc = await startSvc();
    root = await mkdtemp(path.join(os.tmpdir(), 'svc-connect-'));
    bin = path.join(root, 'bin');
    await mkdir(bin);
    for (const [name, client] of Object.entries(CLIENTS)) await symlink(client.bin, path.join(bin, name));
  });
  after(async () => {
    await svc?.close();
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  });

  /**
   * A person with a funded account signs in, makes a key on the API keys page and opens the
   * Connect page; a fresh HOME for their assistant.
   */
  async function visit(): Promise<{ accountId: string; key: string; cards: Card[]; home: string; work: string }> {
    people += 1;
    const email = `person${people}@example.com`;
    const user = await createConsoleUser(svc, { name: `P${people}`, email, balance: FUNDS, keyName: 'first' });
    const c = consoleClient(svc.baseUrl);
    const signedIn = await c.signIn(email, user.password);
    assert.equal(signedIn.status, 303, signedIn.body);
    const { page: made } = await c.createKey({ name: 'assistant' });
    const key = /data-testid="new-key">([^<]+)</.exec(made.body)?.[1] ?? '';
    assert.match(key, /^svc_sk_/, 'the keys page showed the new secret');
    const connect = await c.get('/connect');
    assert.equal(connect.status, 200);
    const home = path.join(root, `home-${people}`);
    const work = path.join(home, 'work');
    await mkdir(work, { recursive: true });
    return { accountId: user.accountId, key, cards: cardsOf(connect.body), home, work };
  }

  function card(cards: Card[], title: string): Card {
    const found = cards.find((c) => c.title === title);
    assert.ok(found !== undefined, `a ${title} card: ${cards.map((c) => c.title).join(', ')}`);
    return found;
  }

  /** The base-URLs card's line that sets the key, with the key pasted where the page shows svc_sk_…. */
  function keyLine(cards: Card[], key: string): string {
    const first = cards[0]?.snippets[0] ?? '';
    const line = first.split('\n').find((l) => l.startsWith('export SVC_API_KEY='));
    assert.ok(line !== undefined && line.includes('svc_sk_…'), `the page says where the key goes: ${first}`);
    return line.replace('svc_sk_…', key);
  }

  /** Only PATH (the clients first), HOME, and no way out but 127.0.0.1. */
  function environment(home: string): NodeJS.ProcessEnv {
    return {
      PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      HOME: home,
      NO_COLOR: '1',
      HTTPS_PROXY: 'http://127.0.0.1:9',
      HTTP_PROXY: 'http://127.0.0.1:9',
      NO_PROXY: '127.0.0.1,localhost',
    };
  }

  async function usage(accountId: string): Promise<{ kind: string; resource: string; cost: bigint; status: string }[]> {
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'resource', 'cost', 'status'])
      .where('account_id', '=', accountId)
      .execute();
    return rows.map((r) => ({ kind: r.kind, resource: r.resource, cost: BigInt(r.cost), status: r.status }));
  }

  /** The maps tool ran once on svc, charged 460 once; every record charged once; the wallet down by their sum. */
  async function assertBilled(accountId: string, r: Run): Promise<void> {
    const records = await usage(accountId);
    const shown = `${JSON.stringify(records, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}\n${detail(r)}`;
    const tools = records.filter((x) => x.kind === 'tool');
    assert.deepEqual(
      tools.map((x) => [x.resource, x.cost, x.status]),
      [['maps_search_places', MAPS_PRICE, 'ok']],
      shown,
    );
    // The model turns: on svc-pro (the page's model), over the assistant's own wire.
    const turns = records.filter((x) => x.kind !== 'tool');
    assert.ok(turns.length >= 2, `a turn that called the tool and one that answered: ${shown}`);
    assert.ok(
      turns.every((x) => ['chat', 'responses'].includes(x.kind) && x.resource === 'svc-pro'),
      shown,
    );
    assert.ok(
      records.every((x) => x.status === 'ok'),
      shown,
    );
    const total = records.reduce((sum, x) => sum + x.cost, 0n);
    const charges = (await svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, records.length, `one charge per record: ${shown}`);
    assert.equal(
      charges.filter((e) => e.amount === -MAPS_PRICE).length >= 1,
      true,
      `the maps tool's charge in the ledger: ${shown}`,
    );
    assert.equal(
      charges.reduce((sum, e) => sum - e.amount, 0n),
      total,
      shown,
    );
    assert.equal((await svc.wallet(accountId)).balance, FUNDS - total, shown);
  }

  it('Codex: config.toml as shown at ~/.codex/config.toml, the key exported as shown; codex exec calls the maps tool', async function () {
    requireClient(this, CLIENTS.codex.bin, CLIENTS.codex.what, CLIENTS.codex.variable);
    const { accountId, key, cards, home, work } = await visit();
    const codex = card(cards, 'Codex');
    assert.equal(codex.snippets.length, 1);
    const file = namedFile(codex.where, home);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, codex.snippets[0] ?? '');
    const r = await bash(
      `${keyLine(cards, key)}\ncodex exec --skip-git-repo-check --json "$PROMPT"`,
      { ...environment(home), PROMPT },
      work,
    );
    assert.equal(r.code, 0, detail(r));
    const events = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { type?: string; item?: Record<string, unknown> });
    const items = events.filter((e) => e.type === 'item.completed').map((e) => e.item ?? {});
    const call = items.find((i) => i['type'] === 'mcp_tool_call');
    assert.equal(call?.['server'], 'svc', detail(r));
    assert.equal(call?.['tool'], 'maps_search_places', detail(r));
    assert.equal(call?.['status'], 'completed', detail(r));
    const message = items.filter((i) => i['type'] === 'agent_message').at(-1);
    assert.match(String(message?.['text']), /\[sandbox\] The tool returned/, detail(r));
    assert.ok(
      events.some((e) => e.type === 'turn.completed'),
      detail(r),
    );
    // The snippet's model_catalog_url gives Codex svc's model metadata (no fallback warning).
    assert.doesNotMatch(r.stdout + r.stderr, /Model metadata for/, detail(r));
    await assertBilled(accountId, r);
  });

  it('Claude Code: the exports, claude mcp add and the claude command line as shown, in print mode; the maps tool is called', async function () {
    requireClient(this, CLIENTS.claude.bin, CLIENTS.claude.what, CLIENTS.claude.variable);
    const { accountId, key, cards, home, work } = await visit();
    const claude = card(cards, 'Claude Code');
    assert.equal(claude.snippets.length, 1);
    const lines = (claude.snippets[0] ?? '').split('\n');
    // The snippet's last line starts the assistant; print mode adds the prompt and JSON output.
    const last = lines.at(-1) ?? '';
    assert.match(last, /^claude /, 'the snippet ends with the command that starts Claude Code');
    const script = [
      'set -e',
      keyLine(cards, key),
      ...lines.slice(0, -1),
      `${last} -p "$PROMPT" --output-format json`,
    ].join('\n');
    const r = await bash(script, { ...environment(home), PROMPT }, work);
    assert.equal(r.code, 0, detail(r));
    // `claude mcp add` prints first; print mode's JSON result is the last line.
    const result = r.stdout.trim().split('\n').at(-1) ?? '';
    const out = JSON.parse(result) as { is_error?: boolean; result?: string; permission_denials?: unknown[] };
    assert.equal(out.is_error, false, detail(r));
    assert.deepEqual(out.permission_denials, [], detail(r));
    assert.match(String(out.result), /\[sandbox\] The tool returned/, detail(r));
    await assertBilled(accountId, r);
  });

  it('Gemini CLI: settings.json as shown at ~/.gemini/settings.json, the exports and the gemini command line as shown, in print mode; the maps tool is called', async function () {
    requireClient(this, CLIENTS.gemini.bin, CLIENTS.gemini.what, CLIENTS.gemini.variable);
    const { accountId, key, cards, home, work } = await visit();
    const gemini = card(cards, 'Gemini CLI');
    assert.equal(gemini.snippets.length, 2, 'the shell lines and the settings file');
    const [shell = '', settings = ''] = gemini.snippets;
    const file = namedFile(gemini.hints[0] ?? '', home);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, settings);
    const lines = shell.split('\n');
    const last = lines.at(-1) ?? '';
    assert.match(last, /^gemini /, 'the snippet ends with the command that starts Gemini CLI');
    // A script's run of a folder not trusted yet: the page says what to add (exit 55 without it).
    assert.ok(
      lines.some((l) => l.startsWith('#') && l.includes('gemini -p') && l.includes('--skip-trust')),
      shell,
    );
    const script = [
      'set -e',
      keyLine(cards, key),
      ...lines.slice(0, -1),
      `${last} --skip-trust -p "$PROMPT" --output-format json`,
    ].join('\n');
    const r = await bash(script, { ...environment(home), PROMPT }, work);
    assert.equal(r.code, 0, detail(r));
    const out = JSON.parse(r.stdout) as { response?: string; error?: unknown };
    assert.equal(out.error, undefined, detail(r));
    assert.match(String(out.response), /\[sandbox\] The tool returned/, detail(r));
    await assertBilled(accountId, r);
  });
});
