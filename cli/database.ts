import { DatabaseMissingError, isSvcError, loadEnv, migrate, openStore, type Store } from '../core';
import { svcCommand } from './self';

/**
 * Opens the database an admin command works on: SVC_DATABASE_URL, else `data/svc.db` in svc's
 * own folder (the same file from any current folder). Only `create` commands (`svc migrate`,
 * `svc account create`) may create it; every other one refuses a database that is not there,
 * naming the path it looked at and how to point it elsewhere, instead of leaving an empty one
 * behind. The schema is brought up to date first (a no-op when current).
 */
export async function openAdminStore(
  env: NodeJS.ProcessEnv,
  options: { create: boolean; poolSize: number },
): Promise<Store> {
  const { databaseUrl, databaseFrom } = loadEnv(env);
  let store: Store;
  try {
    store = openStore(databaseUrl, { poolSize: options.poolSize, mustExist: !options.create });
  } catch (error) {
    if (!(error instanceof DatabaseMissingError)) throw error;
    const why =
      databaseFrom === 'default'
        ? "SVC_DATABASE_URL is not set, and this is the default: data/svc.db in svc's own folder"
        : 'this is the file SVC_DATABASE_URL names';
    throw new Error(
      [
        `no database at ${error.file}`,
        `  (${why}).`,
        `  Create it with "${svcCommand()} migrate" (or start svc once with npm start), or point SVC_DATABASE_URL at the`,
        '  database you use: SVC_DATABASE_URL=sqlite:/path/to/svc.db or mysql://USER:PASS@HOST:PORT/DB',
      ].join('\n'),
    );
  }
  try {
    await migrate(store);
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

/**
 * Runs `work`; an unknown account also names the database it was looked up in, since the usual
 * cause is the right id in another database.
 */
export async function namingDatabase<T>(store: Store, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isSvcError(error) && error.code === 'not_found' && error.param === 'account_id') {
      throw new Error(
        `${error.message.replace(/\.$/, '')} in the database ${store.displayUrl} (set SVC_DATABASE_URL to use another)`,
        { cause: error },
      );
    }
    throw error;
  }
}
