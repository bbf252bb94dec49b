/**
 * Transcript entries to HTML for the chat webview. Markdown goes through
 * markdown-it with raw HTML disabled, and everything else is escaped, so
 * model output cannot inject markup or script into the view (the webview's
 * CSP forbids inline script as a second line of defence). Tool calls,
 * tool results, thinking and hook injections are folded in <details>.
 *
 * Pure: no `vscode` import.
 */

import MarkdownIt from "markdown-it";
import type { Entry, ToolCallView } from "./transcript";

const markdown = new MarkdownIt({ html: false, linkify: false, breaks: false });

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export function renderMarkdown(text: string): string {
  return markdown.render(text);
}

/** "edit_file src/a.py": the tool and the argument a user recognises. */
export function toolCallSummary(call: ToolCallView): string {
  const args = (call.arguments ?? {}) as { [key: string]: unknown };
  const target = ["path", "pattern", "glob"].map((k) => args[k]).find((v) => typeof v === "string");
  const argv = Array.isArray(args["argv"]) ? (args["argv"] as unknown[]).join(" ") : undefined;
  const detail = (target as string | undefined) ?? argv;
  return detail ? `${call.name} ${detail}` : call.name;
}

function folded(className: string, summary: string, body: string, open = false): string {
  return (
    `<details class="${className}"${open ? " open" : ""}>` +
    `<summary>${summary}</summary>${body}</details>`
  );
}

function pre(text: string): string {
  return `<pre>${escapeHtml(text)}</pre>`;
}

function renderToolCall(call: ToolCallView): string {
  const body = call.preview ? pre(call.preview) : pre(JSON.stringify(call.arguments, null, 2));
  return folded("tool-call", `<span class="codicon">&#9881;</span> ${escapeHtml(toolCallSummary(call))}`, body);
}

const ROLE_LABEL: { [role in Entry["role"]]: string } = {
  user: "You",
  assistant: "agentls",
  tool: "Tool",
  hook: "Hook",
  system: "System",
  summary: "Summary",
  error: "Error",
  info: "",
};

export function renderEntry(entry: Entry): string {
  const classes = ["msg", `msg-${entry.role}`];
  if (entry.streaming) classes.push("streaming");
  if (entry.local) classes.push("pending");
  const parts: string[] = [];
  const label = ROLE_LABEL[entry.role];

  switch (entry.role) {
    case "tool": {
      const tool = entry.tool ?? { name: "tool", success: true, output: entry.text };
      const mark = tool.success ? "&#10003;" : "&#10007;";
      const status = tool.success ? "result" : "failed";
      const body = pre(tool.error ? `${tool.error}\n\n${tool.output}`.trim() : tool.output);
      parts.push(folded(`tool-result ${tool.success ? "ok" : "failed"}`, `${mark} ${escapeHtml(tool.name)} ${status}`, body));
      break;
    }
    case "hook":
      parts.push(folded("hook", `Context from ${escapeHtml(entry.hookName ?? "hook")}`, pre(entry.text)));
      break;
    case "user": {
      parts.push(`<div class="role">${label}</div>`, `<div class="body">${pre(entry.text)}</div>`);
      if (entry.restorable && entry.turn !== undefined) {
        parts.push(
          `<button class="restore" data-turn="${entry.turn}" ` +
            `title="Put the files this turn and later turns changed back as they were before it">` +
            `Restore to before this turn</button>`,
        );
      }
      const context = [
        entry.instructions?.length ? `Project instructions: ${entry.instructions.join(", ")}` : "",
        entry.attachments ?? "",
      ].filter(Boolean);
      if (context.length) parts.push(folded("attachments", "Context sent with the prompt", pre(context.join("\n\n"))));
      break;
    }
    case "summary":
      parts.push(folded("summary", "Earlier turns compacted: the model now sees this summary instead", pre(entry.text)));
      break;
    case "error":
    case "info":
      parts.push(`<div class="body">${escapeHtml(entry.text)}</div>`);
      break;
    default: {
      parts.push(`<div class="role">${label}</div>`);
      if (entry.thinking) parts.push(folded("thinking", "Thinking", pre(entry.thinking)));
      if (entry.text) parts.push(`<div class="body markdown">${renderMarkdown(entry.text)}</div>`);
      for (const call of entry.toolCalls ?? []) parts.push(renderToolCall(call));
      if (entry.streaming) parts.push(`<span class="cursor" aria-hidden="true"></span>`);
    }
  }
  return `<div class="${classes.join(" ")}" data-id="${escapeHtml(entry.id)}">${parts.join("")}</div>`;
}
