import type { ImageGenerator } from '../chat/responses/hosted-image';
import { IMAGE_PROMPT_BYTES, IMAGE_TOOL_OPTIONS } from '../chat/responses/hosted-image';
import { tokenCost } from '../chat/pricing';
import type { ModelConfig } from '../config/types';
import type { CoreDeps } from '../deps';
import { isSvcError, SvcError } from '../errors';
import { pricingJson } from '../pricing/prices';
import { createUpstreamMetrics, type UpstreamMetrics } from '../upstreams/metrics';
import { routedMediaProvider } from './grpc';
import { dearest, imagePrices } from './pricing';
import { PROMPT_FRAMING_TOKENS, runMedia } from './runner';

/*
 * The Responses API's hosted image_generation tool on `responses.image_generation_model` (SPEC
 * §14): each image the chat model asks for is one `images.generations` call of the media runner
 * (the same checks, price, hold and settle as `POST /images/generations`), drawing on the
 * response's image hold (hosted-loop.ts) instead of the wallet directly.
 */

type Obj = Record<string, unknown>;

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The configured image model as the hosted tool's generator; undefined when none is configured. */
export function createImageGenerator(
  deps: Pick<CoreDeps, 'config' | 'logger' | 'now' | 'http' | 'prices'>,
  shared: { readonly upstreamMetrics?: UpstreamMetrics } = {},
): ImageGenerator | undefined {
  const id = deps.config.responses?.imageGenerationModel;
  if (id === undefined) return undefined;
  const model = deps.config.models.get(id);
  if (model === undefined || model.kind !== 'image')
    throw new SvcError('internal', `responses.image_generation_model names no image model (${id})`);
  const provider = routedMediaProvider(model, deps, {
    logger: deps.logger,
    metrics: shared.upstreamMetrics ?? createUpstreamMetrics(undefined),
    now: deps.now,
  });
  const configured = model;
  /** The tool on `model` at `pricedModel`'s prices (the file's, or the account's at admission: `priced`). */
  const generatorAt = (pricedModel: ModelConfig): ImageGenerator => {
    const price = pricedModel.mediaPrice ?? { form: 'tokens' as const };
    return {
      modelId: configured.id,
      provider: provider.name,
      pricing: pricingJson(pricedModel),
      async priced(accountId) {
        return generatorAt(await deps.prices.price(configured, accountId));
      },
      bound(options, at) {
        try {
          if (price.form === 'per_image')
            return dearest(imagePrices(pricedModel, price.perImage, text(options['size']), text(options['quality'])));
          // What the media runner holds for one image of the longest prompt the tool takes.
          return tokenCost(pricedModel.price, IMAGE_PROMPT_BYTES + PROMPT_FRAMING_TOKENS, pricedModel.maxOutputTokens);
        } catch (error) {
          if (isSvcError(error) && error.param !== undefined)
            throw new SvcError(error.code, error.message.replace(`'${error.param}'`, `'${at}.${error.param}'`), {
              param: `${at}.${error.param}`,
            });
          throw error;
        }
      },
      async generate(prompt, options, call, meter) {
        const params: Obj = { model: configured.id, prompt, n: 1, response_format: 'b64_json' };
        for (const name of IMAGE_TOOL_OPTIONS) {
          const value = options[name];
          // `auto` is what an upstream does when it is not asked: not sent (dall-e refuses it).
          if (value !== undefined && value !== null && value !== 'auto') params[name] = value;
        }
        const answer = await runMedia(
          { meter, logger: deps.logger, nowSeconds: () => Math.floor(deps.now() / 1000) },
          pricedModel,
          provider,
          'images.generations',
          params,
          [],
          call,
        );
        const json = JSON.parse(Buffer.from(answer.body).toString('utf8')) as Obj;
        const first = Array.isArray(json['data']) ? (json['data'][0] as Obj | undefined) : undefined;
        const size = text(json['size']) ?? text(options['size']);
        const quality = text(json['quality']) ?? text(options['quality']);
        const outputFormat = text(json['output_format']) ?? text(options['output_format']);
        const background = text(json['background']) ?? text(options['background']);
        return {
          result: text(first?.['b64_json']) ?? null,
          ...(size === undefined || size === 'auto' ? {} : { size }),
          ...(quality === undefined || quality === 'auto' ? {} : { quality }),
          ...(outputFormat === undefined ? {} : { outputFormat }),
          ...(background === undefined || background === 'auto' ? {} : { background }),
        };
      },
    };
  };
  return generatorAt(configured);
}
