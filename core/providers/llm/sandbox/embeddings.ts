import { createHash } from 'node:crypto';
import { SvcError } from '../../../errors';
import { countInputsOffThread, type EmbeddingInputValue, type EmbeddingProvider } from '../embeddings';

/** The vector length of the sandbox when the model configures none. */
export const SANDBOX_DEFAULT_DIMENSIONS = 256;

function features(input: EmbeddingInputValue): string[] {
  if (typeof input !== 'string') return input.map((id) => `#${id}`);
  return input.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [input];
}

/**
 * A deterministic vector: each word (or token id) hashed onto one dimension with a sign, summed
 * and scaled to unit length. Texts that share words get similar vectors, so retrieval over the
 * sandbox behaves plausibly, with no model and no network.
 */
export function sandboxVector(input: EmbeddingInputValue, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const feature of features(input)) {
    const digest = createHash('sha256').update(feature).digest();
    const index = digest.readUInt32BE(0) % dimensions;
    vector[index] = (vector[index] ?? 0) + ((digest[4] ?? 0) & 1 ? 1 : -1);
  }
  const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
  return norm === 0 ? vector : vector.map((v) => v / norm);
}

/** The offline embedding model: labelled vectors (`sandbox: true` on every answer), counted with cl100k_base. */
export function createSandboxEmbeddingProvider(): EmbeddingProvider {
  return {
    name: 'sandbox',
    embed(call, signal) {
      if (signal.aborted) return Promise.reject(new SvcError('cancelled', 'The request was cancelled'));
      const dimensions = call.dimensions ?? SANDBOX_DEFAULT_DIMENSIONS;
      return countInputsOffThread(call.inputs).then((promptTokens) => ({
        vectors: call.inputs.map((input) => sandboxVector(input, dimensions)),
        promptTokens,
      }));
    },
  };
}
