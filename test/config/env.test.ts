import assert from 'node:assert/strict';
import path from 'node:path';
import { loadEnv } from '../../core/config/env';

describe('loadEnv', () => {
  it('applies the SPEC defaults to an empty environment', () => {
    assert.deepEqual(loadEnv({}), {
      databaseUrl: `sqlite:${path.resolve(__dirname, '..', '..', 'data', 'svc.db')}`,
      databaseFrom: 'default',
      httpAddr: { kind: 'tcp', host: '127.0.0.1', port: 8080, text: '127.0.0.1:8080' },
      grpcAddr: { kind: 'tcp', host: '127.0.0.1', port: 50051, text: '127.0.0.1:50051' },
      coreAddr: { kind: 'tcp', host: '127.0.0.1', port: 50051, text: '127.0.0.1:50051' },
      configPath: undefined,
      adminToken: undefined,
      logLevel: 'info',
      logFormat: undefined,
      coreThread: false,
      serveTransport: 'in-process',
      coreTunnels: 0,
      allowedOrigins: [],
    });
  });

  it('reads SVC_CORE_TUNNELS, 0 to 64, and refuses anything else by name', () => {
    assert.equal(loadEnv({ SVC_CORE_TUNNELS: '0' }).coreTunnels, 0);
    assert.equal(loadEnv({ SVC_CORE_TUNNELS: '16' }).coreTunnels, 16);
    for (const bad of ['-1', '65', 'two', '1.5'])
      assert.throws(() => loadEnv({ SVC_CORE_TUNNELS: bad }), /SVC_CORE_TUNNELS must be a whole number from 0 to 64/);
  });

  it('reads every variable', () => {
    const env = loadEnv({
      SVC_DATABASE_URL: 'mysql://svc:pw@db.internal:3306/svc',
      SVC_HTTP_ADDR: '0.0.0.0:80',
      SVC_GRPC_ADDR: 'unix:/run/svc/core.sock',
      SVC_CORE_ADDR: '[::1]:50052',
      SVC_CONFIG: '/etc/svc.yaml',
      SVC_ADMIN_TOKEN: 'an-admin-token-of-some-length',
      SVC_LOG_LEVEL: 'debug',
    });
    assert.equal(env.databaseUrl, 'mysql://svc:pw@db.internal:3306/svc');
    assert.deepEqual(env.httpAddr, { kind: 'tcp', host: '0.0.0.0', port: 80, text: '0.0.0.0:80' });
    assert.deepEqual(env.grpcAddr, { kind: 'unix', path: '/run/svc/core.sock', text: 'unix:/run/svc/core.sock' });
    assert.deepEqual(env.coreAddr, { kind: 'tcp', host: '::1', port: 50052, text: '[::1]:50052' });
    assert.equal(env.configPath, '/etc/svc.yaml');
    assert.equal(env.adminToken, 'an-admin-token-of-some-length');
    assert.equal(env.logLevel, 'debug');
  });

  it('lets svc gateway default to the core address it serves', () => {
    assert.equal(loadEnv({ SVC_GRPC_ADDR: 'unix:core.sock' }).coreAddr.text, 'unix:core.sock');
  });

  it('reads SVC_SERVE_TRANSPORT: in-process by default, grpc on request, anything else named', () => {
    assert.equal(loadEnv({}).serveTransport, 'in-process');
    assert.equal(loadEnv({ SVC_SERVE_TRANSPORT: 'grpc' }).serveTransport, 'grpc');
    assert.equal(loadEnv({ SVC_SERVE_TRANSPORT: 'in-process' }).serveTransport, 'in-process');
    assert.throws(() => loadEnv({ SVC_SERVE_TRANSPORT: 'http2' }), /SVC_SERVE_TRANSPORT must be in-process or grpc/);
  });

  it('reads SVC_CORE_THREAD as a switch, off by default', () => {
    assert.equal(loadEnv({}).coreThread, false);
    assert.equal(loadEnv({ SVC_CORE_THREAD: '1' }).coreThread, true);
    assert.equal(loadEnv({ SVC_CORE_THREAD: 'true' }).coreThread, true);
    assert.equal(loadEnv({ SVC_CORE_THREAD: '0' }).coreThread, false);
  });

  it('reads SVC_PUBLIC_URL as an origin (the OAuth issuer), unset by default', () => {
    assert.equal(loadEnv({}).publicUrl, undefined);
    assert.equal(loadEnv({ SVC_PUBLIC_URL: 'https://svc.example.com/' }).publicUrl, 'https://svc.example.com');
    assert.equal(loadEnv({ SVC_PUBLIC_URL: 'http://127.0.0.1:8080' }).publicUrl, 'http://127.0.0.1:8080');
  });

  it('reads SVC_METRICS_ADDR with the other variables (unset: no metrics listener), naming it when bad', () => {
    assert.equal(loadEnv({}).metricsAddr, undefined);
    assert.deepEqual(loadEnv({ SVC_METRICS_ADDR: '127.0.0.1:9464' }).metricsAddr, {
      kind: 'tcp',
      host: '127.0.0.1',
      port: 9464,
      text: '127.0.0.1:9464',
    });
    assert.throws(() => loadEnv({ SVC_METRICS_ADDR: 'nowhere' }), /SVC_METRICS_ADDR/);
  });

  it('reads SVC_ALLOWED_ORIGINS as a list of exact origins or *, refusing anything a browser never sends', () => {
    assert.deepEqual(loadEnv({ SVC_ALLOWED_ORIGINS: 'https://app.example.com, http://10.0.0.5:3000' }).allowedOrigins, [
      'https://app.example.com',
      'http://10.0.0.5:3000',
    ]);
    assert.deepEqual(loadEnv({ SVC_ALLOWED_ORIGINS: '*' }).allowedOrigins, ['*']);
    for (const bad of ['app.example.com', 'https://app.example.com/', 'https://app.example.com/path'])
      assert.throws(() => loadEnv({ SVC_ALLOWED_ORIGINS: bad }), /SVC_ALLOWED_ORIGINS/);
  });

  it('treats an empty variable as unset', () => {
    assert.equal(loadEnv({ SVC_CONFIG: '', SVC_HTTP_ADDR: ' ' }).configPath, undefined);
  });

  const bad: Array<[NodeJS.ProcessEnv, RegExp]> = [
    [{ SVC_DATABASE_URL: 'postgres://x/y' }, /^SVC_DATABASE_URL must start with sqlite: or mysql:\/\//],
    [{ SVC_DATABASE_URL: 'mysql://u:secretpw@host:3306' }, /^SVC_DATABASE_URL: the MySQL URL names no database/],
    [{ SVC_HTTP_ADDR: '8080' }, /^SVC_HTTP_ADDR must be HOST:PORT, e\.g\. 127\.0\.0\.1:8080 \(got "8080"\)$/],
    [{ SVC_HTTP_ADDR: 'localhost:70000' }, /^SVC_HTTP_ADDR must be HOST:PORT/],
    [{ SVC_HTTP_ADDR: 'unix:/tmp/http.sock' }, /^SVC_HTTP_ADDR must be HOST:PORT/],
    [{ SVC_GRPC_ADDR: 'core' }, /^SVC_GRPC_ADDR must be HOST:PORT or unix:PATH/],
    [{ SVC_GRPC_ADDR: 'unix:' }, /^SVC_GRPC_ADDR: unix: needs a socket path/],
    [{ SVC_CORE_ADDR: 'http://core:50051' }, /^SVC_CORE_ADDR must be HOST:PORT or unix:PATH/],
    [{ SVC_ADMIN_TOKEN: 'short' }, /^SVC_ADMIN_TOKEN must be at least 16 characters$/],
    [{ SVC_CORE_THREAD: 'maybe' }, /^SVC_CORE_THREAD must be 1 or 0 \(got "maybe"\)$/],
    [{ SVC_PUBLIC_URL: 'svc.example.com' }, /^SVC_PUBLIC_URL must be an absolute URL/],
    [
      { SVC_PUBLIC_URL: 'https://svc.example.com/api' },
      /^SVC_PUBLIC_URL must be http\(s\):\/\/HOST\[:PORT\] with no path/,
    ],
    [{ SVC_ADMIN_TOKEN: 'a token with spaces in it' }, /^SVC_ADMIN_TOKEN must not contain whitespace$/],
    [
      { SVC_LOG_LEVEL: 'verbose' },
      /^SVC_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent \(got "verbose"\)$/,
    ],
  ];
  for (const [env, message] of bad) {
    it(`rejects ${JSON.stringify(env)} naming the variable`, () => {
      assert.throws(
        () => loadEnv(env),
        (error: unknown) => {
          assert.ok(error instanceof Error);
          assert.match(error.message, message);
          assert.doesNotMatch(error.message, /secretpw|short/);
          return true;
        },
      );
    });
  }
});
