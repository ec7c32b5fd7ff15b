// The benchmark runner (`npm run bench [-- --quick] [-- --only NAME] [-- --publish]`): runs every
// module in bench/scenarios/, prints one table with ratios between the variants of each scenario
// and metric, and writes bench/results/<timestamp>.json|md|svg and bench/results/latest.json|md
// with latency-vs-load.svg; `--publish` then puts latest.md into docs/performance.md
// and the chart into bench/latency-vs-load.svg.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { textTable, withRatios } from './lib/report';
import { killChildren } from './lib/children';
import { goalsTable, judgeGoals } from './lib/goals';
import { publish, rerender, writeResults } from './lib/results';
import type { BenchOptions, BenchRow, BenchScenarioModule } from './types';

interface Args {
  readonly quick: boolean;
  readonly only: readonly string[];
  readonly publish: boolean;
  /** Judge the last run again with the current goals and publish it; measures nothing. */
  readonly republish: boolean;
}

function parseArgs(argv: readonly string[]): Args {
  let quick = false;
  let publishing = false;
  let republish = false;
  const only: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') quick = true;
    else if (arg === '--publish') publishing = true;
    else if (arg === '--republish') republish = true;
    else if (arg === '--only') {
      const name = argv[++i];
      if (name === undefined) throw new Error('--only needs a scenario name (a file in bench/scenarios/ without .ts)');
      only.push(...name.split(','));
    } else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- [--quick] [--only SCENARIO[,SCENARIO]] [--publish] | --republish');
      process.exit(0);
    } else throw new Error(`unknown argument ${JSON.stringify(arg)} (try --help)`);
  }
  return { quick, only, publish: publishing, republish };
}

function isScenarioModule(value: unknown): value is BenchScenarioModule {
  return typeof value === 'object' && value !== null && typeof (value as { run?: unknown }).run === 'function';
}

async function loadScenario(file: string): Promise<BenchScenarioModule> {
  const mod: unknown = await import(pathToFileURL(file).href);
  // A CommonJS module imported as ESM may arrive wrapped in `default`.
  const candidates = [mod, (mod as { default?: unknown }).default];
  const found = candidates.find(isScenarioModule);
  if (found === undefined) throw new Error(`${file} does not export run(opts)`);
  return found;
}

function checkRows(name: string, rows: unknown): BenchRow[] {
  if (!Array.isArray(rows)) throw new Error(`${name}: run() must resolve to an array of rows`);
  for (const row of rows as BenchRow[]) {
    if (
      typeof row.scenario !== 'string' ||
      typeof row.variant !== 'string' ||
      typeof row.metric !== 'string' ||
      typeof row.unit !== 'string' ||
      !Number.isFinite(row.value)
    ) {
      throw new Error(`${name}: malformed row ${JSON.stringify(row)}`);
    }
  }
  return rows as BenchRow[];
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.republish) {
    const results = path.join(__dirname, 'results');
    const written = [...rerender(results), ...publish(path.join(__dirname, '..'), results)];
    console.log(`wrote ${written.map((f) => path.relative(process.cwd(), f)).join(', ')}`);
    return;
  }
  const dir = path.join(__dirname, 'scenarios');
  let names = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => f.slice(0, -3))
    .sort();
  if (args.only.length > 0) {
    const unknown = args.only.filter((n) => !names.includes(n));
    if (unknown.length > 0) throw new Error(`no scenario ${unknown.join(', ')} (have: ${names.join(', ')})`);
    names = names.filter((n) => args.only.includes(n));
  }
  const startedAt = new Date().toISOString();
  const loadAverage = os.loadavg();
  const argv = process.argv.slice(2);
  const command = `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`;
  const rows: BenchRow[] = [];
  const failures: { scenario: string; error: string }[] = [];
  const options: BenchOptions = {
    quick: args.quick,
    fail(what, error) {
      const message = error instanceof Error ? error.message : String(error);
      failures.push({ scenario: what, error: message });
      console.error(`  ${what} FAILED: ${message}`);
    },
  };
  console.log(`bench: ${names.length} scenario(s)${args.quick ? ', quick' : ''}: ${names.join(', ')}`);
  for (const name of names) {
    const t0 = Date.now();
    console.log(`\n== ${name}`);
    try {
      const scenario = await loadScenario(path.join(dir, `${name}.ts`));
      const got = checkRows(name, await scenario.run(options));
      rows.push(...got);
      console.log(`== ${name}: ${got.length} row(s) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      failures.push({ scenario: name, error: message });
      console.error(`== ${name} FAILED: ${error instanceof Error ? (error.stack ?? message) : message}`);
    }
  }
  const report = withRatios(rows);
  console.log(`\n${textTable(report)}\n`);
  console.log(`Goals of issues 7, 18, 35 and 46:\n${goalsTable(judgeGoals(report))}\n`);
  const written = writeResults(
    path.join(__dirname, 'results'),
    {
      startedAt,
      finishedAt: new Date().toISOString(),
      quick: args.quick,
      command,
      scenarios: names,
      failures,
      loadAverage,
    },
    report,
  );
  if (args.publish) written.push(...publish(path.join(__dirname, '..'), path.join(__dirname, 'results')));
  console.log(`wrote ${written.map((f) => path.relative(process.cwd(), f)).join(', ')}`);
  if (failures.length > 0) {
    console.error(`${failures.length} scenario(s) failed: ${failures.map((f) => f.scenario).join(', ')}`);
    process.exitCode = 1;
  }
}

// Servers and load clients run in child processes: none may outlive the run, however it ends.
process.on('exit', killChildren);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

main().then(
  // Scenarios close what they open; exit anyway so that one leaked handle cannot hang the run.
  () => process.exit(),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  },
);
