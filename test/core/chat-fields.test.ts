import assert from 'node:assert/strict';
import {
  CHAT_FIELDS,
  CHAT_INTEGER_BOUNDS,
  checkChatExtra,
  DEPRECATED_CHAT_PARAMS,
  DOCUMENTED_CHAT_PARAMS,
  isOwnChatParam,
  RESERVED_CHAT_PARAMS,
} from '../../core/conversation/fields';
import { IGNORED_HINTS, refuseUnsupported, remainingParams } from '../../core/providers/llm/translate';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { chatParamsToWire } from '../../core/chat/params';
import { isSvcError } from '../../core/errors';

/*
 * A chat parameter is one line of CHAT_FIELDS (core/conversation/fields.ts): the sets the core,
 * the config and the adapters read, the range checks and the native translators' refusals and
 * dropped hints are all derived from it.
 */

function codeOf(run: () => void): string | undefined {
  try {
    run();
  } catch (error) {
    return isSvcError(error) ? `${error.code} ${error.param ?? ''}`.trim() : String(error);
  }
  return undefined;
}

describe('the chat field table is the one source of the chat fields', function () {
  it('puts every field in exactly one of the reserved, documented and deprecated sets', function () {
    for (const [name, field] of Object.entries(CHAT_FIELDS)) {
      const sets = [RESERVED_CHAT_PARAMS.has(name), DOCUMENTED_CHAT_PARAMS.has(name), name in DEPRECATED_CHAT_PARAMS];
      assert.equal(sets.filter(Boolean).length, 1, name);
      assert.equal(RESERVED_CHAT_PARAMS.has(name), field.kind === 'typed', name);
      assert.ok(isOwnChatParam(name), `${name}: extra_params may not name it`);
    }
    const all = [...RESERVED_CHAT_PARAMS, ...DOCUMENTED_CHAT_PARAMS, ...Object.keys(DEPRECATED_CHAT_PARAMS)];
    assert.deepEqual(all.sort(), Object.keys(CHAT_FIELDS).sort());
    assert.deepEqual(CHAT_INTEGER_BOUNDS.n, CHAT_FIELDS['n']?.integer);
  });

  it('gives the native translators their refusals and dropped hints', function () {
    for (const [name, field] of Object.entries(CHAT_FIELDS)) {
      assert.equal(IGNORED_HINTS.has(name), field.native === 'hint', name);
      if (typeof field.native === 'function') {
        const refused = Object.entries({ n: 2, seed: 7, presence_penalty: 1, top_logprobs: 3 }).find(
          ([key]) => key === name,
        );
        if (refused !== undefined)
          assert.equal(
            codeOf(() => refuseUnsupported({ model: 'm', messages: [], [name]: refused[1] }, 'Anthropic')),
            `invalid_argument ${name}`,
          );
      }
    }
    // A neutral value of a refused field passes; hints are dropped, the rest passed on.
    assert.equal(
      codeOf(() => refuseUnsupported({ model: 'm', messages: [], n: 1, presence_penalty: 0 }, 'Anthropic')),
      undefined,
    );
    assert.deepEqual(
      remainingParams(
        { model: 'm', messages: [], store: true, service_tier: 'auto', verbosity: 'low' },
        new Set(['model', 'messages']),
      ),
      {
        verbosity: 'low',
      },
    );
  });

  it('checks ranges from the table, for typed fields and for values carried in extra', function () {
    assert.equal(
      codeOf(() => checkChatExtra('top_p', 1.5)),
      'decimal_above_max_value top_p',
    );
    assert.equal(
      codeOf(() => checkChatExtra('temperature', -1)),
      'decimal_below_min_value temperature',
    );
    assert.equal(
      codeOf(() => checkChatExtra('n', 0)),
      'integer_below_min_value n',
    );
    assert.equal(
      codeOf(() => checkChatExtra('top_p', 'high')),
      'invalid_type top_p',
    );
    assert.equal(
      codeOf(() => checkChatExtra('verbosity', 'low')),
      undefined,
    );
    const base = {
      model: 'm',
      messages: [{ role: ChatRole.CHAT_ROLE_USER, content: 'hi', parts: [], name: '', toolCalls: [], toolCallId: '' }],
      maxTokens: 0,
      maxTokensParam: '',
      stop: [],
      n: 0,
      tools: [],
      user: '',
      nativeOnly: [],
      nativeHeaders: {},
    } as unknown as Parameters<typeof chatParamsToWire>[0];
    assert.equal(
      codeOf(() => chatParamsToWire({ ...base, topP: 1.5 })),
      'decimal_above_max_value top_p',
    );
    assert.equal(chatParamsToWire({ ...base, topP: 0.5 })['top_p'], 0.5);
    // Every typed decimal is checked and forwarded from its table line alone.
    for (const [name, field] of Object.entries(CHAT_FIELDS)) {
      if (field.neutral === undefined || field.decimal === undefined) continue;
      const over = { ...base, [field.neutral]: field.decimal.max + 1 };
      assert.equal(
        codeOf(() => chatParamsToWire(over)),
        `decimal_above_max_value ${name}`,
      );
      assert.equal(chatParamsToWire({ ...base, [field.neutral]: field.decimal.min })[name], field.decimal.min);
    }
    assert.equal(chatParamsToWire({ ...base, extra: { verbosity: 'low' } })['verbosity'], 'low');
  });
});
