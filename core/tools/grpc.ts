import { mayUseTool, requireTool } from '../auth/scope';
import type { CallContext } from 'nice-grpc-common';
import type { CoreCallContext } from '../auth/types';
import type { CallToolResponse, ToolDefinition, ToolServiceImplementation } from '../../gen/svc/core/v1/tools';
import { createToolService, type ListedTool, type ToolDeps, type ToolService } from './service';
import type { ToolPrice } from './types';

type Context = CallContext & { svc: CoreCallContext };

function priceSentence(price: ToolPrice): string {
  return price.kind === 'flat'
    ? ` Price: ${price.credits} credits per search that finds something; a failed or empty search costs nothing.`
    : ` Price: the tokens the search model used (${price.tariff.inputPer1m} credits per 1M input and ${price.tariff.outputPer1m} per 1M output tokens, ` +
        `at least 1, at most ${price.cap} credits) per search that finds something; a failed or empty search costs nothing.`;
}

function toDefinition(tool: ListedTool): ToolDefinition {
  const { definition, price } = tool;
  return {
    name: definition.name,
    title: definition.title,
    description: definition.description + priceSentence(price),
    inputSchema: definition.inputSchema as Record<string, unknown>,
    outputSchema: definition.outputSchema as Record<string, unknown>,
    annotations: { readOnlyHint: true, openWorldHint: true, destructiveHint: false, idempotentHint: false },
    price:
      price.kind === 'flat'
        ? { inputPer1m: 0n, outputPer1m: 0n, flat: price.credits, cap: 0n }
        : { inputPer1m: price.tariff.inputPer1m, outputPer1m: price.tariff.outputPer1m, flat: 0n, cap: price.cap },
    provider: tool.provider,
    icons: definition.icons.map((icon) => ({ src: icon.src, mimeType: icon.mimeType, sizes: [...icon.sizes] })),
  };
}

/**
 * The gRPC ToolService: ListTools and CallTool for the caller's API key. Bad arguments, a refusal
 * for credit or the key's cap, and a provider failure are results with `is_error`, `error_code`
 * and `error_details`; an unknown tool is NOT_FOUND, and authentication, scope and rate limits
 * are errors as on every service. The providers' connections belong to the core's dispatcher.
 */
export function createToolGrpcService(
  deps: ToolDeps,
  /** The core's one tool service; its own otherwise. */
  shared: { readonly tools?: ToolService } = {},
): ToolServiceImplementation<{ svc: CoreCallContext }> {
  const tools = shared.tools ?? createToolService(deps);
  const definitions = tools.list().map(toDefinition);
  const runnableNames = new Set(definitions.map((d) => d.name));
  return {
    async listTools(_request, context: Context) {
      // A console session (the prices page) sees every tool; anyone else needs a tools key.
      if (context.svc.isSession()) {
        await context.svc.requireSession();
        return { tools: definitions };
      }
      const principal = await context.svc.requireKey({ scope: 'tools' });
      return { tools: definitions.filter((d) => mayUseTool(principal, d.name)) };
    },
    async callTool(request, context: Context): Promise<CallToolResponse> {
      const principal = await context.svc.requireKey({ scope: 'tools', inFlight: true });
      // Refused as an error (like the scope), not a tool result: the key may never call it.
      if (runnableNames.has(request.name)) requireTool(principal, request.name);
      const outcome = await tools.call({
        principal,
        requestId: context.svc.requestId,
        clientRequestId: context.svc.clientRequestId,
        name: request.name,
        arguments: request.arguments,
        signal: context.signal,
      });
      if (!outcome.isError) {
        return {
          isError: false,
          structuredContent: outcome.structuredContent,
          text: outcome.text,
          errorCode: '',
          billing: outcome.billing,
          provider: outcome.provider,
        };
      }
      return {
        isError: true,
        text: outcome.text,
        errorCode: outcome.errorCode,
        errorDetails: { ...outcome.details },
        // A refused or failed call charges nothing; no balance is read for it.
        billing: undefined,
        provider: outcome.provider,
      };
    },
  };
}
