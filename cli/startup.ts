/**
 * What a person sees when svc runs in a terminal (SVC_LOG_FORMAT=text, or unset on a TTY): a
 * start-up summary with every address to use, and short log lines. Log collectors get pino's JSON
 * lines unchanged (SVC_LOG_FORMAT=json, or unset when standard output is not a terminal).
 */

const LEVELS: Readonly<Record<number, string>> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};
// Fields every line has, or that the summary already said: not repeated on each line.
const QUIET = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname']);

function valueText(value: unknown): string {
  if (typeof value === 'string') return /\s/.test(value) ? JSON.stringify(value) : value;
  return JSON.stringify(value);
}

/** One pino JSON line as `12:00:01 INFO  message key=value …`; a line that is not JSON passes through. */
export function textLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof record['time'] === 'number' ? new Date(record['time']).toISOString().slice(11, 19) : '';
  const level = LEVELS[Number(record['level'])] ?? String(record['level']);
  const fields = Object.entries(record)
    .filter(([k]) => !QUIET.has(k))
    .map(([k, v]) => `${k}=${valueText(v)}`);
  return `${[time, level, String(record['msg'] ?? ''), ...fields].filter((p) => p !== '').join(' ')}\n`;
}

export interface Summary {
  /** `http://HOST:PORT` of the HTTP adapters. */
  readonly url: string;
  /** The core's gRPC address, and whether the adapters call it over gRPC. */
  readonly grpc: string;
  readonly transport: 'in-process' | 'grpc' | 'thread';
  /** The database in use, password masked. */
  readonly database: string;
  /** SVC_CONFIG's path, or `built-in`. */
  readonly config: string;
  /** Models and tools served by the sandbox providers. */
  readonly sandbox: readonly string[];
  readonly operatorSignIn: boolean;
  /** How a user runs this installation's CLI, e.g. `./svc`. */
  readonly command: string;
}

/** The start-up summary: every endpoint's URL, the database and configuration, the sandbox warning. */
export function summaryText(s: Summary): string {
  const rows: [string, string][] = [
    ['OpenAI API', `${s.url}/v1/openai`],
    ['Anthropic API', `${s.url}/v1/anthropic`],
    ['Gemini API', `${s.url}/v1/gemini`],
    ['MCP tools', `${s.url}/v1/mcp`],
    ['Console', `${s.url}/console/`],
    ['Health', `${s.url}/healthz`],
    [
      'gRPC core',
      s.transport === 'in-process'
        ? `${s.grpc} (the adapters call it in process)`
        : s.transport === 'thread'
          ? `${s.grpc} (in a worker thread)`
          : s.grpc,
    ],
    ['Database', s.database],
    ['Configuration', s.config === 'built-in' ? 'built-in (SVC_CONFIG is not set)' : s.config],
    [
      'Operator',
      s.operatorSignIn ? 'console sign-in with SVC_ADMIN_TOKEN' : 'no operator sign-in (SVC_ADMIN_TOKEN is not set)',
    ],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  const lines = ['', 'svc is ready', '', ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`), ''];
  if (s.sandbox.length > 0) {
    lines.push(
      `  SANDBOX: ${s.sandbox.join(', ')} answer${s.sandbox.length === 1 ? 's' : ''} with offline, deterministic samples,`,
      '  not a real model or search. Configure real upstreams in SVC_CONFIG: see docs/providers.md.',
      '',
    );
  }
  lines.push(
    `  Next: ${s.command} account create --name NAME, then ${s.command} key create --account ID`,
    `  (${s.command} --help lists every command; SVC_LOG_FORMAT=json logs JSON lines instead of this)`,
    '',
  );
  return `${lines.join('\n')}\n`;
}
