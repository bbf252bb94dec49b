/**
 * The status bar item's text and tooltip from `agentls/status` and the
 * server's `didChangeStatus` notification. Pure: no `vscode` import.
 */

export interface StatusResult {
  provider?: { id?: string; display_name?: string; error?: string } | null;
  model?: string | null;
  sessions?: unknown[];
  completions?: { served?: number; shown?: number; accepted?: number };
  /** The workspace .agentls.toml's trust state: keys that can send data or run code wait for it. */
  workspaceTrust?: { file?: string; state?: string; pendingKeys?: string[] } | null;
  /** MCP servers (docs/mcp.md). */
  mcp?: McpServerStatus[];
}

export interface McpServerStatus {
  name: string;
  state: "starting" | "ready" | "failed" | "stopped";
  tools?: string[];
  error?: string;
  pending?: boolean;
}

/** Whether an MCP server is still starting: the status is asked again until none is. */
export function mcpStarting(status: StatusResult | undefined): boolean {
  return (status?.mcp ?? []).some((s) => s.state === "starting");
}

/** Copilot's didChangeStatus: {busy?, kind?: Normal|Error|Warning|Inactive, message?}. */
export interface DidChangeStatus {
  busy?: boolean;
  kind?: string;
  message?: string;
}

export type ServerState = "starting" | "running" | "stopped" | "failed";

export interface StatusView {
  text: string;
  tooltip: string;
  error: boolean;
}

export function statusView(
  state: ServerState,
  status: StatusResult | undefined,
  busy: boolean,
  extra?: DidChangeStatus,
): StatusView {
  if (state === "starting") return { text: "$(loading~spin) agentls", tooltip: "agentls: starting the server", error: false };
  if (state === "failed") return { text: "$(error) agentls", tooltip: "agentls: the server is not running. Click for the output.", error: true };
  if (state === "stopped") return { text: "$(circle-slash) agentls", tooltip: "agentls: stopped", error: false };

  const provider = status?.provider?.id;
  const model = status?.model ?? "";
  const providerError = status?.provider?.error;
  const kindError = extra?.kind === "Error" || extra?.kind === "Warning";
  const pending = status?.workspaceTrust?.pendingKeys ?? [];
  const mcpFailed = (status?.mcp ?? []).filter((s) => s.state === "failed");
  const icon =
    busy || extra?.busy ? "$(sync~spin)" : providerError || kindError || pending.length || mcpFailed.length ? "$(warning)" : "$(sparkle)";
  const mcpText = mcpFailed.length ? ` · MCP: ${mcpFailed.length} failed` : "";
  const text = provider ? `${icon} agentls: ${provider}${model ? ` · ${model}` : ""}${mcpText}` : `${icon} agentls${mcpText}`;
  const lines = [
    provider
      ? `agentls — provider ${status?.provider?.display_name ?? provider}${model ? `, model ${model}` : ""}`
      : "agentls — the server did not report its provider",
    busy || extra?.busy ? "Busy" : "Idle",
  ];
  if (providerError) lines.push(`Provider problem: ${providerError}`);
  if (pending.length) {
    const why = status?.workspaceTrust?.state === "refused" ? "you chose not to trust it" : "it is not trusted yet";
    lines.push(
      `Ignored until trusted: ${pending.join(", ")} from ${status?.workspaceTrust?.file ?? ".agentls.toml"} (${why}; ` +
        "answer Trust when asked, or run `agentls trust` in the workspace)",
    );
  }
  for (const server of status?.mcp ?? []) {
    const tools = server.tools?.length ?? 0;
    if (server.state === "failed") {
      lines.push(`MCP server ${server.name} failed: ${(server.error ?? "").split("\n").slice(0, 4).join(" ")}`);
    } else if (server.state === "ready") {
      lines.push(`MCP server ${server.name}: ${tools} tool(s)`);
    } else {
      lines.push(`MCP server ${server.name}: ${server.state}${server.error ? ` (${server.error})` : ""}`);
    }
  }
  if (extra?.message) lines.push(extra.message);
  const c = status?.completions;
  if (c) lines.push(`Inline completions: ${c.served ?? 0} served, ${c.shown ?? 0} shown, ${c.accepted ?? 0} accepted`);
  return { text, tooltip: lines.join("\n"), error: Boolean(providerError) || extra?.kind === "Error" };
}
