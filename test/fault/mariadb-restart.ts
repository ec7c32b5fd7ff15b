import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { withMysqlServer } from '../helpers/database';

/*
 * A real restart of the MariaDB on this machine that the tests use: `SHUTDOWN` over SQL, wait
 * until the port is closed and the server process gone, start the same binary with the same
 * arguments the way `.ci/run` starts it (start-stop-daemon, or mysqld_safe), wait until
 * `SELECT 1` answers. Only for a server on loopback that this process may restart (root or
 * passwordless sudo); `planMariadbRestart` says why not otherwise.
 *
 * As a script, to try it by hand: `npx tsx test/fault/mariadb-restart.ts [mysql://root@127.0.0.1:3306/]`.
 */

const WAIT_MS = 60_000;
const SERVER_BINARIES = ['/usr/sbin/mariadbd', '/usr/sbin/mysqld', '/usr/bin/mariadbd', '/usr/bin/mysqld'];

export interface MariadbRestarter {
  /** How the server is started again, for the test's log. */
  readonly description: string;
  /** Shuts the server down and starts it again; resolves once `SELECT 1` answers. */
  restart(): Promise<{ downMs: number; totalMs: number }>;
  /** Starts the server unless it answers; resolves once `SELECT 1` answers. */
  ensureUp(): Promise<void>;
}

export type RestartPlan = { readonly restarter: MariadbRestarter } | { readonly skipped: string };

async function answers(url: string): Promise<boolean> {
  try {
    await withMysqlServer(url, (c) => c.query('SELECT 1'));
    return true;
  } catch {
    return false;
  }
}

function portOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(2000);
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('timeout', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

function processAlive(pid: number): boolean {
  return fs.existsSync(`/proc/${pid}`);
}

async function waitFor(what: string, done: () => Promise<boolean> | boolean, ms = WAIT_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`MariaDB restart: ${what} not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function onPath(command: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(':').concat(['/usr/sbin', '/sbin'])) {
    const file = path.join(dir, command);
    if (dir !== '' && fs.existsSync(file)) return file;
  }
  return undefined;
}

/**
 * Whether (and how) the server of `url` can be restarted from here. The server must answer now:
 * its pid file, binary and arguments are read from the running process, so the restarted one has
 * the same datadir, socket, port and options.
 */
export async function planMariadbRestart(url: string): Promise<RestartPlan> {
  const u = new URL(url);
  const host = u.hostname;
  const port = u.port === '' ? 3306 : Number(u.port);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(host))
    return { skipped: `the database is on ${host}, not this machine's loopback` };
  let asRoot: string[] = [];
  if (process.getuid?.() !== 0) {
    if (spawnSync('sudo', ['-n', 'true']).status !== 0) return { skipped: 'not root and no passwordless sudo' };
    asRoot = ['sudo', '-n'];
  }
  const launcher = onPath('start-stop-daemon') ?? onPath('mysqld_safe');
  if (launcher === undefined) return { skipped: 'neither start-stop-daemon nor mysqld_safe is installed' };
  let vars: { datadir: string; socket: string; pidFile: string; port: number; bind: string | null };
  try {
    vars = await withMysqlServer(url, async (c) => {
      const [rows] = await c.query(
        'SELECT @@datadir AS datadir, @@socket AS socket, @@pid_file AS pidFile, @@port AS port, @@bind_address AS bind',
      );
      return (rows as (typeof vars)[])[0]!;
    });
  } catch (error) {
    return { skipped: `the server does not answer as ${u.username || 'anonymous'}: ${(error as Error).message}` };
  }
  if (Number(vars.port) !== port) return { skipped: `port ${port} is forwarded to a server on port ${vars.port}` };
  let pid: number;
  let exe: string;
  let args: string[];
  try {
    pid = Number(fs.readFileSync(vars.pidFile, 'utf8').trim());
    exe = fs.readlinkSync(`/proc/${pid}/exe`);
    args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(1, -1);
  } catch {
    return { skipped: `the server's pid file ${vars.pidFile} names no process of this machine` };
  }
  if (!SERVER_BINARIES.includes(exe)) return { skipped: `the server runs ${exe}, not a known MariaDB binary` };
  // The running one's own arguments, then what it runs with (from wherever it got it).
  const serverArgs = [
    ...args,
    ...(args.some((a) => a.startsWith('--user')) ? [] : ['--user=mysql']),
    `--datadir=${vars.datadir}`,
    `--socket=${vars.socket}`,
    `--pid-file=${vars.pidFile}`,
    `--port=${port}`,
    ...(vars.bind === null || vars.bind === '' ? [] : [`--bind-address=${vars.bind}`]),
  ];
  const useDaemon = path.basename(launcher) === 'start-stop-daemon';
  const command = useDaemon
    ? [...asRoot, launcher, '--start', '--oknodo', '--background', '--exec', exe, '--', ...serverArgs]
    : [...asRoot, launcher, ...serverArgs];

  let serverPid = pid;
  const start = async (): Promise<void> => {
    if (useDaemon) {
      const run = spawnSync(command[0]!, command.slice(1), { encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`${command.join(' ')} failed (${run.status}): ${run.stderr}`);
    } else {
      spawn(command[0]!, command.slice(1), { detached: true, stdio: 'ignore' }).unref();
    }
    await waitFor('SELECT 1 answering after the start', () => answers(url));
    const now = Number(fs.readFileSync(vars.pidFile, 'utf8').trim());
    if (Number.isInteger(now) && now > 0) serverPid = now;
  };
  return {
    restarter: {
      description: command.join(' '),
      async restart() {
        const began = Date.now();
        await withMysqlServer(url, (c) => c.query('SHUTDOWN')).catch((error: { errno?: number }) => {
          // The server answering no (a privilege) is a failure; the connection dropping is not.
          if (error.errno !== undefined) throw error;
        });
        // InnoDB keeps its files locked until the process has exited: the new one waits for that.
        await waitFor('the port closing', async () => !(await portOpen(host, port)));
        await waitFor(`process ${serverPid} exiting`, () => !processAlive(serverPid));
        const down = Date.now();
        await start();
        return { downMs: Date.now() - down, totalMs: Date.now() - began };
      },
      async ensureUp() {
        if (await answers(url)) return;
        // Still shutting down: starting now would find the old one (--oknodo) and do nothing.
        await waitFor(`process ${serverPid} exiting`, () => !processAlive(serverPid));
        await start();
      },
    },
  };
}

if (require.main === module) {
  const url = process.argv[2] ?? 'mysql://root@127.0.0.1:3306/';
  void (async () => {
    const plan = await planMariadbRestart(url);
    if ('skipped' in plan) throw new Error(`cannot restart MariaDB: ${plan.skipped}`);
    process.stdout.write(`${plan.restarter.description}\n`);
    process.stdout.write(`${JSON.stringify(await plan.restarter.restart())}\n`);
  })().catch((error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exitCode = 1;
  });
}
