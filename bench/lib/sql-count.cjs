// A preload (`node --require bench/lib/sql-count.cjs`, or NODE_OPTIONS) that counts the SQL
// statements a server process sends, by text, with the time the driver spent in each (SQLite's
// statements run synchronously: their time is CPU on the event loop; MySQL's are counted, not
// timed). Active only in `svc serve`/`core` processes when SVC_SQL_COUNT names a file: at exit the
// counts are written to `<SVC_SQL_COUNT>.<pid>` as JSON ({ sql, count, ms } per text). Used by
// bench/build-ab.ts to report statements per answered request; never loaded by svc itself.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload (node -r) */
'use strict';
const out = process.env.SVC_SQL_COUNT;
if (out && /\b(serve|core)\b/.test(process.argv.slice(2).join(' '))) {
  const fs = require('node:fs');
  const Module = require('node:module');
  const counts = new Map();
  const add = (sql, ns) => {
    const key = String(sql).replace(/\s+/g, ' ').slice(0, 200);
    const c = counts.get(key);
    if (c === undefined) counts.set(key, { count: 1, ns });
    else {
      c.count++;
      c.ns += ns;
    }
  };
  const timed = (label, fn) =>
    function (...args) {
      const start = process.hrtime.bigint();
      try {
        return fn.apply(this, args);
      } finally {
        add(label, Number(process.hrtime.bigint() - start));
      }
    };
  const done = new Set();
  const original = Module.prototype.require;
  Module.prototype.require = function (id) {
    const loaded = original.apply(this, arguments);
    if (id === 'better-sqlite3' && !done.has(id)) {
      done.add(id);
      const proto = loaded.prototype;
      const prepare = proto.prepare;
      proto.prepare = function (sql) {
        const statement = prepare.apply(this, arguments);
        for (const method of ['run', 'all', 'get', 'iterate']) statement[method] = timed(sql, statement[method]);
        return statement;
      };
      const pragma = proto.pragma;
      proto.pragma = function (text) {
        return timed(`pragma ${text}`, pragma).apply(this, arguments);
      };
      const exec = proto.exec;
      proto.exec = function (text) {
        return timed(text, exec).apply(this, arguments);
      };
    }
    if (id === 'mysql2' && !done.has(id)) {
      done.add(id);
      // Not in mysql2's exports map: by its path beside the package's entry.
      const path = require('node:path');
      const Connection = require(path.join(path.dirname(require.resolve('mysql2')), 'lib/base/connection.js'));
      for (const method of ['query', 'execute']) {
        const fn = Connection.prototype[method];
        Connection.prototype[method] = function (sql) {
          add(typeof sql === 'string' ? sql : (sql && sql.sql) || '?', 0);
          return fn.apply(this, arguments);
        };
      }
    }
    return loaded;
  };
  process.on('exit', () => {
    const rows = [...counts].map(([sql, c]) => ({ sql, count: c.count, ms: c.ns / 1e6 }));
    rows.sort((a, b) => b.ms - a.ms || b.count - a.count);
    fs.writeFileSync(`${out}.${process.pid}`, JSON.stringify(rows, null, 1));
  });
}
