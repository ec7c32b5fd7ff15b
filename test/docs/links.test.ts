import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { runSvc } from '../cli/run-svc';

const ROOT = path.resolve(__dirname, '..', '..');
const DOCS = [
  'README.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a Markdown file has (outside code blocks), with GitHub's -1, -2 for repeats. */
function anchors(text: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (m === null) continue;
    const base = slug(m[1] ?? '');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  return found;
}

/** Markdown links `[text](target)` outside code blocks and inline code. */
function links(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) out.push(m[1] ?? '');
  }
  return out;
}

/** The fenced code blocks of a Markdown text. */
function codeBlocks(text: string): string[] {
  return [...text.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map((m) => m[1] ?? '');
}

describe('the README and docs/ (issue 33: everything the front door says is true)', function () {
  this.timeout(60_000);

  it('README.md is a front door: under 15 KB', () => {
    assert.ok(fs.statSync(path.join(ROOT, 'README.md')).size <= 15 * 1024);
  });

  it('every relative link in README.md and docs/ resolves, anchors included', () => {
    const broken: string[] = [];
    for (const file of DOCS) {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const target of links(text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const [rel = '', anchor] = target.split('#');
        const resolved = rel === '' ? path.join(ROOT, file) : path.resolve(path.dirname(path.join(ROOT, file)), rel);
        if (!fs.existsSync(resolved)) {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !anchors(fs.readFileSync(resolved, 'utf8')).has(anchor))
          broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it("every svc command in the README's code blocks exists, with the options it uses", async () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const help = await runSvc(['--help'], {});
    assert.equal(help.code, 0);
    const used: string[][] = [];
    for (const block of codeBlocks(readme))
      for (const m of block.matchAll(/(?:^|[|&;]\s*)\.\/svc((?: [^\s#|&;]+)+)/gm))
        used.push((m[1] ?? '').trim().split(' '));
    assert.ok(used.length >= 5, `found ${used.length} svc commands`);
    for (const words of used) {
      const [first = '', second = ''] = words;
      const name = new RegExp(`^ {2}${first} ${second} `, 'm').test(help.stdout) ? `${first} ${second}` : first;
      assert.match(help.stdout, new RegExp(`^ {2}${name} `, 'm'), `svc ${words.join(' ')}: no such command`);
      const own = await runSvc([...name.split(' '), '--help'], {});
      for (const flag of words.filter((w) => w.startsWith('--')))
        assert.ok(
          own.stdout.includes(`${flag} `) || own.stdout.includes(`${flag}\n`),
          `svc ${name}: no option ${flag}`,
        );
    }
  });

  it('sends nobody to npx svc outside the checkout (there it is an unrelated npm package)', () => {
    for (const file of DOCS) {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const line of text.split('\n'))
        if (/npx svc\b/.test(line)) assert.match(line, /(inside|in) the\s+checkout|outside/i, `${file}: ${line}`);
    }
  });
});
