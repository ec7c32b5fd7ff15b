import { sandboxConfig, TOOL_SPECS } from './catalog';
import type { ToolConfig, ToolHttp, ToolProvider } from './types';

/** The configured provider of each tool, by tool name, created once. */
export type ToolProviders = ReadonlyMap<string, ToolProvider<unknown, unknown>>;

/**
 * Builds each tool's provider from its configuration entry (`tools.<name>`), the sandbox where
 * there is none, over the core's one upstream dispatcher. The loader has checked the provider names; one it did not is refused at start.
 */
export function createToolProviders(configs: ReadonlyMap<string, ToolConfig>, http: ToolHttp): ToolProviders {
  const providers = new Map<string, ToolProvider<unknown, unknown>>();
  for (const tool of TOOL_SPECS) {
    const config = configs.get(tool.name) ?? sandboxConfig(tool);
    const kind = tool.providers[config.provider];
    if (kind === undefined)
      throw new Error(
        `tools.${tool.name}.provider: unknown provider "${config.provider}" (expected one of ${Object.keys(tool.providers).join(', ')})`,
      );
    // Over the core's one upstream dispatcher, under the provider's name (each serves one tool).
    providers.set(
      tool.name,
      kind.create(config, http.forUpstream({ name: config.provider, provider: config.provider })),
    );
  }
  return providers;
}
