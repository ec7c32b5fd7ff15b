// Loaded by mocha before any test (see .mocharc.json).
// Spawned CLIs run the sources, so a stale dist/ can never hide a change.
process.env['SVC_FROM_SOURCE'] = '1';
// Every spawned `svc serve` is one process, as the tests were written for, unless a test asks for
// workers (test/cli/workers.test.ts); the default (one per CPU) would differ from machine to machine.
process.env['SVC_WORKERS'] ??= '1';
if (process.env['SVC_TEST_DATABASE'] === 'mysql' && (process.env['SVC_TEST_MYSQL_URL'] ?? '') === '') {
  throw new Error('SVC_TEST_DATABASE=mysql needs SVC_TEST_MYSQL_URL (e.g. mysql://root@127.0.0.1:3306/svc_test)');
}
if ((process.env['SVC_TEST_MYSQL_URL'] ?? '') === '') {
  process.stderr.write(
    'note: SVC_TEST_MYSQL_URL is not set: tests that need MySQL are skipped (in CI they fail instead)\n',
  );
}
