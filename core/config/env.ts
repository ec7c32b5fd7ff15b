import fs from 'node:fs';
import path from 'node:path';
import { parseDatabaseUrl } from '../store/url';

/** A TCP listen or dial address. `text` is the form grpc-js and Node's `listen` accept. */
export interface TcpAddress {
  readonly kind: 'tcp';
  readonly host: string;
  /** 0 lets the system pick a free port (tests). */
  readonly port: number;
  readonly text: string;
}

export interface UnixAddress {
  readonly kind: 'unix';
  readonly path: string;
  /** `unix:PATH`, the grpc-js form. */
  readonly text: string;
}

export type GrpcAddress = TcpAddress | UnixAddress;

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** The process settings of SPEC §4, read once by the composition root. */
export interface SvcEnv {
  /**
   * `sqlite:PATH` or `mysql://…`. Default: `data/svc.db` in the installation's own folder
   * (`defaultDatabaseUrl()`), the same file whichever folder a command runs from. Contains the
   * password: log `maskUrl(databaseUrl)`.
   */
  readonly databaseUrl: string;
  /** Whether databaseUrl came from SVC_DATABASE_URL or is the default. */
  readonly databaseFrom: 'SVC_DATABASE_URL' | 'default';
  /** Where the adapters listen (default 127.0.0.1:8080). */
  readonly httpAddr: TcpAddress;
  /** Where the core listens (default 127.0.0.1:50051; `unix:PATH` allowed). */
  readonly grpcAddr: GrpcAddress;
  /** The core `svc gateway` calls (default: grpcAddr). */
  readonly coreAddr: GrpcAddress;
  /** SVC_CONFIG: the YAML file, or undefined for the built-in configuration. */
  readonly configPath: string | undefined;
  /** SVC_ADMIN_TOKEN, or undefined when admin RPCs are disabled. Never log it. */
  readonly adminToken: string | undefined;
  /** SVC_LOG_LEVEL (default info). */
  readonly logLevel: LogLevel;
  /**
   * SVC_LOG_FORMAT: `json` (one JSON object a line, for log collectors) or `text` (a start-up
   * summary and short lines for a person); unset, text when standard output is a terminal.
   */
  readonly logFormat: 'json' | 'text' | undefined;
  /** SVC_REDIS_URL (`redis://` or `rediss://`): rate limits shared by every core on it; undefined = per process. May hold a password. */
  readonly redisUrl?: string;
  /**
   * SVC_CORE_THREAD=1: `svc serve` runs the core in a worker thread of its process (the adapters
   * still call it over gRPC), so that the gateway and the core each have a CPU core. More
   * requests per second on a multi-core machine, for a second V8 heap (~150 MB more RSS under load).
   */
  readonly coreThread: boolean;
  /**
   * SVC_WORKERS: how many processes `svc serve` runs (`--workers` overrides it); undefined: one
   * per CPU this process may use (see cli/cluster.ts).
   */
  readonly workers?: number;
  /**
   * SVC_SERVE_TRANSPORT: how `svc serve`'s adapters reach its core. `in-process` (default): the
   * same services and middleware called directly; `grpc`: a real loopback (or Unix socket) hop.
   * With SVC_CORE_THREAD=1 it is always gRPC (the core lives in another thread).
   */
  readonly serveTransport: 'in-process' | 'grpc';
  /**
   * SVC_CORE_TUNNELS: how many tunnels a gateway keeps open to its cores (default 0: none, each
   * call a gRPC call of its own; 4 is what the bench measures).
   * Over a tunnel, a call of the core is a frame on a long-lived stream rather than a gRPC call of
   * its own (adapters/http/tunnel.ts); 0 makes each call its own, as before.
   */
  readonly coreTunnels: number;
  /**
   * SVC_PUBLIC_URL: where clients reach svc (`https://svc.example.com`, no path). It is the OAuth
   * issuer and the base of the MCP resource in the OAuth metadata; unset, each request's Host is
   * used (fine locally, wrong behind a proxy that rewrites it).
   */
  readonly publicUrl?: string;
  /**
   * SVC_METRICS_ADDR: `GET /metrics` on a listener of its own, with no credential (keep it on a
   * private address); the public HTTP server answers it only with the admin token.
   */
  readonly metricsAddr?: TcpAddress;
  /**
   * SVC_ALLOWED_ORIGINS: browser origins (`https://app.example.com`, comma-separated; `*` for
   * any) allowed to call the MCP server besides localhost. Requests without `Origin` always pass.
   */
  readonly allowedOrigins: readonly string[];
}

let installation: string | undefined;

/**
 * The folder svc is installed in (the checkout, or /app in the image): the nearest folder above
 * this file whose package.json is svc's, from the sources and from dist/ alike. Resolved once.
 */
export function installationDir(): string {
  if (installation !== undefined) return installation;
  let dir = __dirname;
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      try {
        if ((JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'svc') break;
      } catch {
        // Not svc's manifest: keep looking above.
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) {
      // Not inside svc's package (bundled elsewhere): the folder of this file's package root guess.
      dir = path.resolve(__dirname, '..', '..');
      break;
    }
    dir = parent;
  }
  installation = dir;
  return dir;
}

/**
 * The embedded database when SVC_DATABASE_URL is unset: `data/svc.db` in the installation's
 * folder, not in the current one, so that `svc wallet show` run from anywhere reads the database
 * `npm start` serves.
 */
export function defaultDatabaseUrl(): string {
  return `sqlite:${path.join(installationDir(), 'data', 'svc.db')}`;
}

// An admin token guards every account's money; a short one could be guessed.
const MIN_ADMIN_TOKEN_LENGTH = 16;

/** Reads and validates the SVC_* variables; every error names the variable at fault. */
export function loadEnv(env: NodeJS.ProcessEnv): SvcEnv {
  const configured = setting(env, 'SVC_DATABASE_URL');
  const databaseUrl = configured ?? defaultDatabaseUrl();
  parseDatabaseUrl(databaseUrl);
  const grpcAddr = parseGrpcAddress('SVC_GRPC_ADDR', setting(env, 'SVC_GRPC_ADDR') ?? '127.0.0.1:50051');
  const core = setting(env, 'SVC_CORE_ADDR');
  const adminToken = setting(env, 'SVC_ADMIN_TOKEN');
  if (adminToken !== undefined) {
    if (adminToken.length < MIN_ADMIN_TOKEN_LENGTH)
      throw new Error(`SVC_ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters`);
    if (/\s/.test(adminToken)) throw new Error('SVC_ADMIN_TOKEN must not contain whitespace');
  }
  const logLevel = setting(env, 'SVC_LOG_LEVEL') ?? 'info';
  const redis = redisUrl(setting(env, 'SVC_REDIS_URL'));
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new Error(`SVC_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(logLevel)})`);
  }
  const publicUrl = publicBase(setting(env, 'SVC_PUBLIC_URL'));
  const logFormat = setting(env, 'SVC_LOG_FORMAT');
  if (logFormat !== undefined && logFormat !== 'json' && logFormat !== 'text')
    throw new Error(`SVC_LOG_FORMAT must be json or text (got ${JSON.stringify(logFormat)})`);
  const metrics = setting(env, 'SVC_METRICS_ADDR');
  const workers = setting(env, 'SVC_WORKERS');
  return {
    databaseUrl,
    databaseFrom: configured === undefined ? 'default' : 'SVC_DATABASE_URL',
    httpAddr: parseTcpAddress('SVC_HTTP_ADDR', setting(env, 'SVC_HTTP_ADDR') ?? '127.0.0.1:8080'),
    grpcAddr,
    coreAddr: core === undefined ? grpcAddr : parseGrpcAddress('SVC_CORE_ADDR', core),
    configPath: setting(env, 'SVC_CONFIG'),
    adminToken,
    logLevel: logLevel as LogLevel,
    logFormat,
    ...(redis === undefined ? {} : { redisUrl: redis }),
    coreThread: flag(env, 'SVC_CORE_THREAD'),
    ...(workers === undefined ? {} : { workers: parseWorkers('SVC_WORKERS', workers) }),
    serveTransport: serveTransport(setting(env, 'SVC_SERVE_TRANSPORT')),
    coreTunnels: coreTunnels(setting(env, 'SVC_CORE_TUNNELS')),
    ...(publicUrl === undefined ? {} : { publicUrl }),
    ...(metrics === undefined ? {} : { metricsAddr: parseTcpAddress('SVC_METRICS_ADDR', metrics) }),
    allowedOrigins: origins(setting(env, 'SVC_ALLOWED_ORIGINS')),
  };
}

function origins(value: string | undefined): readonly string[] {
  if (value === undefined) return [];
  return value.split(',').map((item) => {
    const origin = item.trim();
    if (origin === '*') return origin;
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    // Browsers send the origin exactly as scheme://host[:port]; anything else would never match.
    if (url === undefined || url.origin !== origin)
      throw new Error(
        `SVC_ALLOWED_ORIGINS must be a comma-separated list of origins such as https://app.example.com, or * (got ${JSON.stringify(origin)})`,
      );
    return origin;
  });
}

function serveTransport(value: string | undefined): 'in-process' | 'grpc' {
  if (value === undefined || value === 'in-process' || value === 'inprocess') return 'in-process';
  if (value === 'grpc') return 'grpc';
  throw new Error(`SVC_SERVE_TRANSPORT must be in-process or grpc (got ${JSON.stringify(value)})`);
}

function publicBase(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(
      `SVC_PUBLIC_URL must be an absolute URL such as https://svc.example.com (got ${JSON.stringify(value)})`,
    );
  }
  if (
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== ''
  )
    throw new Error(
      `SVC_PUBLIC_URL must be http(s)://HOST[:PORT] with no path, query or fragment (got ${JSON.stringify(value)})`,
    );
  return url.origin;
}

/** A 0/1 switch (also false/true, no/yes, off/on); unset is 0. */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const value = setting(env, name)?.toLowerCase();
  if (value === undefined || ['0', 'false', 'no', 'off'].includes(value)) return false;
  if (['1', 'true', 'yes', 'on'].includes(value)) return true;
  throw new Error(`${name} must be 1 or 0 (got ${JSON.stringify(value)})`);
}

/** A worker count: a whole number from 1 to 256; `name` (a variable or flag) is named in the error. */
function coreTunnels(value: string | undefined): number {
  if (value === undefined) return 0;
  const n = /^\d{1,2}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 0 && n <= 64))
    throw new Error(`SVC_CORE_TUNNELS must be a whole number from 0 to 64 (got ${JSON.stringify(value)})`);
  return n;
}

export function parseWorkers(name: string, value: string): number {
  const n = /^\d{1,3}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 1 && n <= 256))
    throw new Error(`${name} must be a whole number from 1 to 256 (got ${JSON.stringify(value)})`);
  return n;
}

function redisUrl(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^rediss?:\/\/[^/\s]/.test(value)) throw new Error('SVC_REDIS_URL must be a redis:// or rediss:// URL');
  return value;
}

// An empty variable means "not set", as in most shells' `VAR= cmd` habit.
function setting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** Parses `HOST:PORT` or `[IPv6]:PORT`; `name` (a variable or flag) is named in the error. */
export function parseTcpAddress(name: string, value: string): TcpAddress {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(value);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (match === null || host === undefined || !Number.isInteger(port) || port > 65535) {
    throw new Error(`${name} must be HOST:PORT, e.g. 127.0.0.1:8080 (got ${JSON.stringify(value)})`);
  }
  const text = match[1] !== undefined ? `[${host}]:${port}` : `${host}:${port}`;
  return { kind: 'tcp', host, port, text };
}

/** Parses a gRPC address: `HOST:PORT`, `[IPv6]:PORT` or `unix:PATH`. */
export function parseGrpcAddress(name: string, value: string): GrpcAddress {
  if (value.startsWith('unix:')) {
    const path = value.slice('unix:'.length);
    if (path === '') throw new Error(`${name}: unix: needs a socket path, e.g. unix:/run/svc/core.sock`);
    return { kind: 'unix', path, text: value };
  }
  try {
    return parseTcpAddress(name, value);
  } catch {
    throw new Error(`${name} must be HOST:PORT or unix:PATH, e.g. 127.0.0.1:50051 (got ${JSON.stringify(value)})`);
  }
}
