// No driver imports here: the environment is validated before telemetry has loaded mysql2.

export type Dialect = 'sqlite' | 'mysql';

/** Parses SVC_DATABASE_URL; throws an Error naming the variable when it is not usable. */
export function parseDatabaseUrl(url: string): { dialect: Dialect; path?: string; url?: URL } {
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') throw new Error(`SVC_DATABASE_URL "${url}": sqlite: needs a file path, e.g. sqlite:data/svc.db`);
    return { dialect: 'sqlite', path: file };
  }
  if (url.startsWith('mysql://') || url.startsWith('mariadb://')) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Error(`SVC_DATABASE_URL is not a valid URL (expected mysql://USER:PASS@HOST:PORT/DB)`);
    }
    if (parsed.pathname.length <= 1)
      throw new Error('SVC_DATABASE_URL: the MySQL URL names no database (mysql://USER:PASS@HOST:PORT/DB)');
    return { dialect: 'mysql', url: parsed };
  }
  throw new Error(`SVC_DATABASE_URL must start with sqlite: or mysql:// (got "${maskUrl(url)}")`);
}

export function maskUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):([^@]*)@/, '//$1:***@');
}
