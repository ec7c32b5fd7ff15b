import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { ResponsesConfig } from '../../config/types';
import { invalidArgument } from '../../errors';
import type { JsonObject } from '../../providers/llm/types';
import type { Store } from '../../store/db';

/*
 * The seal of a compaction item's `encrypted_content` (SPEC §7d): AES-256-GCM under a server key,
 * with the account id in the additional authenticated data, so only svc opens it and only for the
 * account it was made for. The text is `svc_cmp.1.<key id>.<base64url(iv | ciphertext | tag)>`:
 * the key id lets keys rotate (the newest seals, every known key still opens).
 *
 * Keys come from the configuration (`responses.compaction_keys`) or, when it names none, from the
 * database (`server_keys`, purpose "compaction"): generated on first use, so that every replica on
 * one database shares them. A second replica racing the first one only adds a second key; both open.
 */

const PREFIX = 'svc_cmp';
const VERSION = '1';
const PURPOSE = 'compaction';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface CompactionSeal {
  /** Seals `payload` for `accountId`. */
  seal(accountId: string, payload: JsonObject): Promise<string>;
  /** Opens what `seal` made for this account; anything else is a 400 naming `param`. */
  open(accountId: string, sealed: unknown, param: string): Promise<JsonObject>;
}

interface Keys {
  readonly current: string;
  readonly all: ReadonlyMap<string, Buffer>;
}

const aad = (accountId: string, keyId: string): Buffer =>
  Buffer.from(`${PREFIX}.${VERSION}|${keyId}|${accountId}`, 'utf8');

export function createCompactionSeal(deps: {
  config: { readonly responses?: ResponsesConfig };
  store: Store;
  now: () => number;
}): CompactionSeal {
  const configured = deps.config.responses;
  let keys: Keys | undefined =
    configured !== undefined && configured.compactionKey !== undefined
      ? { current: configured.compactionKey, all: configured.compactionKeys }
      : undefined;
  const fromConfig = keys !== undefined;

  async function loadFromDatabase(): Promise<Keys | undefined> {
    const rows = await deps.store.db
      .selectFrom('server_keys')
      .select(['id', 'secret', 'created_at'])
      .where('purpose', '=', PURPOSE)
      .execute();
    if (rows.length === 0) return undefined;
    rows.sort((a, b) =>
      BigInt(a.created_at) === BigInt(b.created_at)
        ? a.id.localeCompare(b.id)
        : BigInt(a.created_at) < BigInt(b.created_at)
          ? -1
          : 1,
    );
    const newest = rows[rows.length - 1];
    if (newest === undefined) return undefined;
    return { current: newest.id, all: new Map(rows.map((r) => [r.id, Buffer.from(r.secret, 'base64')])) };
  }

  async function current(): Promise<Keys> {
    if (keys !== undefined) return keys;
    let loaded = await loadFromDatabase();
    if (loaded === undefined) {
      const id = `db${deps.now().toString(36)}${randomBytes(3).toString('hex')}`;
      await deps.store.db
        .insertInto('server_keys')
        .values({ purpose: PURPOSE, id, secret: randomBytes(32).toString('base64'), created_at: BigInt(deps.now()) })
        .execute();
      loaded = await loadFromDatabase();
      if (loaded === undefined) throw new Error('the generated compaction key was not found after it was written');
    }
    keys = loaded;
    return loaded;
  }

  const refused = (param: string): Error =>
    invalidArgument(
      param,
      `Invalid '${param}': this compaction item was not made by this service for this account, or it was altered. Send the compaction item exactly as it was returned, or the uncompacted input.`,
    );

  return {
    async seal(accountId, payload) {
      const { current: keyId, all } = await current();
      const key = all.get(keyId);
      if (key === undefined) throw new Error(`compaction key ${keyId} is missing`);
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(aad(accountId, keyId));
      const body = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final()]);
      const sealed = Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
      return `${PREFIX}.${VERSION}.${keyId}.${sealed}`;
    },

    async open(accountId, sealed, param) {
      if (typeof sealed !== 'string') throw refused(param);
      const parts = sealed.split('.');
      if (parts.length !== 4 || parts[0] !== PREFIX || parts[1] !== VERSION) throw refused(param);
      const keyId = parts[2] ?? '';
      let key = (await current()).all.get(keyId);
      // A key another replica generated after this one read them.
      if (key === undefined && !fromConfig) {
        keys = (await loadFromDatabase()) ?? keys;
        key = keys?.all.get(keyId);
      }
      if (key === undefined) throw refused(param);
      const raw = Buffer.from(parts[3] ?? '', 'base64url');
      if (raw.length < IV_BYTES + TAG_BYTES + 1) throw refused(param);
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
        decipher.setAAD(aad(accountId, keyId));
        decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
        const text = Buffer.concat([
          decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)),
          decipher.final(),
        ]).toString('utf8');
        const payload: unknown = JSON.parse(text);
        if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw refused(param);
        return payload as JsonObject;
      } catch {
        throw refused(param);
      }
    },
  };
}
