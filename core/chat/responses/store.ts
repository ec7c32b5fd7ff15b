import type { Principal } from '../../auth/types';
import { SvcError } from '../../errors';
import type { JsonObject } from '../../providers/llm/types';
import type { Store } from '../../store/db';

export interface StoredResponse {
  readonly response: JsonObject;
  /** Input and output items of the whole conversation up to and including this response. */
  readonly conversation: JsonObject[];
}

/** Stored Responses, per account: another account's id is simply not found. */
export interface ResponseStore {
  save(principal: Principal, id: string, stored: StoredResponse): Promise<void>;
  load(principal: Principal, id: string, param: string): Promise<StoredResponse>;
  /** Deletes the caller's own response; false when there is none with this id. */
  delete(principal: Principal, id: string): Promise<boolean>;
}

export function createResponseStore(deps: { store: Store; now: () => number }): ResponseStore {
  const { db } = deps.store;
  return {
    async save(principal, id, stored) {
      await db
        .insertInto('stored_responses')
        .values({
          id,
          account_id: principal.accountId,
          body: JSON.stringify(stored.response),
          conversation: JSON.stringify(stored.conversation),
          created_at: BigInt(deps.now()),
        })
        .execute();
    },
    async load(principal, id, param) {
      const row = await db
        .selectFrom('stored_responses')
        .select(['body', 'conversation'])
        .where('id', '=', id)
        .where('account_id', '=', principal.accountId)
        .executeTakeFirst();
      if (row === undefined) throw new SvcError('not_found', `No response found with id '${id}'.`, { param });
      return {
        response: JSON.parse(row.body) as JsonObject,
        conversation: JSON.parse(row.conversation) as JsonObject[],
      };
    },
    async delete(principal, id) {
      const result = await db
        .deleteFrom('stored_responses')
        .where('id', '=', id)
        .where('account_id', '=', principal.accountId)
        .executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  };
}
