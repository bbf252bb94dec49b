/**
 * The chat view's model: one transcript per shown session, fed by the
 * prompt the user sent, streamed `agentls/messageDelta` notifications, final
 * `agentls/message` notifications and the `agentls/chat` result.
 *
 * Deltas build a streaming assistant entry per (session, index); the final
 * assistant message replaces the oldest streaming entry, so the text the
 * user watched grow is swapped for the stored one without flicker or
 * duplicates. Every mutation returns the ids of the entries it changed, so
 * the webview can update just those.
 *
 * Pure: no `vscode` import.
 */

import type { ChatResult, MessageDeltaParams, WireMessage } from "./protocol";

export interface ToolCallView {
  id?: string;
  name: string;
  arguments: unknown;
  preview?: string;
}

export interface Entry {
  id: string;
  role: "user" | "assistant" | "tool" | "hook" | "system" | "summary" | "error" | "info";
  text: string;
  thinking: string;
  streaming: boolean;
  /** A user prompt shown before the server confirmed it. */
  local?: boolean;
  /** Context the server added to a prompt (editor, selection, mentions). */
  attachments?: string;
  /** Project instruction files (AGENTS.md...) the prompt's model calls used. */
  instructions?: string[];
  toolCalls?: ToolCallView[];
  tool?: { name: string; success: boolean; output: string; error?: string };
  hookName?: string;
  /** A user prompt's turn number in the session (1 for the first prompt). */
  turn?: number;
  /** A user prompt's index in the session's messages, once the server said it. */
  messageIndex?: number;
  /** The files this turn changed can be restored (agentls/checkpoints lists it). */
  restorable?: boolean;
}

export class Transcript {
  sessionId: string | undefined;
  readonly entries: Entry[] = [];
  private nextId = 1;
  private readonly streamingByIndex = new Map<number, Entry>();
  private readonly toolNames = new Map<string, string>();
  private turns = 0;

  constructor(sessionId?: string, messages: readonly WireMessage[] = []) {
    this.sessionId = sessionId;
    messages.forEach((message, index) => this.applyMessage(message, undefined, index));
  }

  /** The prompt the user just sent, shown at once. */
  addUserPrompt(prompt: string): string[] {
    const entry = this.push({ role: "user", text: prompt, local: true, turn: ++this.turns });
    return [entry.id];
  }

  applyDelta(params: MessageDeltaParams): string[] {
    if (!this.accepts(params.sessionId)) return [];
    let entry = this.streamingByIndex.get(params.index);
    if (!entry) {
      entry = this.push({ role: "assistant", streaming: true });
      this.streamingByIndex.set(params.index, entry);
    }
    if (params.kind === "thinking") entry.thinking += params.delta;
    else entry.text += params.delta;
    return [entry.id];
  }

  applyMessage(message: WireMessage, sessionId?: string, index?: number): string[] {
    if (sessionId !== undefined && !this.accepts(sessionId)) return [];
    const metadata = message.metadata ?? {};
    const text = contentText(message.content);

    if (metadata["source"] === "compaction") {
      // Older turns summarised to fit the model's window; the originals stay shown.
      return [this.push({ role: "summary", text }).id];
    }
    const instructions = readStrings(metadata["instructions"]);
    if (message.role === "assistant" && instructions.length) {
      // A subfolder's file joins mid-turn: show it with the turn's prompt.
      const prompt = [...this.entries].reverse().find((e) => e.role === "user");
      const added = instructions.filter((f) => !(prompt?.instructions ?? []).includes(f));
      if (prompt && added.length) {
        prompt.instructions = [...(prompt.instructions ?? []), ...added];
        return [...this.applyMessage({ ...message, metadata: { ...metadata, instructions: undefined } }, sessionId, index), prompt.id];
      }
    }
    if (metadata["source"] === "hook") {
      const entry = this.push({ role: "hook", text, hookName: String(metadata["hook_name"] ?? "hook") });
      return [entry.id];
    }
    if (message.role === "user") {
      // The stored prompt is what the user typed (metadata.prompt when the
      // server added anything) plus the context it attached (editor,
      // selection, mentioned files): show the typed text, fold the rest.
      const typed = typeof metadata["prompt"] === "string" ? (metadata["prompt"] as string) : undefined;
      const shown = typed ?? text;
      const extra = text === shown ? "" : text.startsWith(shown) ? text.slice(shown.length).trim() : text;
      const local = this.entries.find((e) => e.role === "user" && e.local);
      if (local) {
        local.local = false;
        local.messageIndex = index;
        if (instructions.length) local.instructions = instructions;
        if (extra) local.attachments = extra;
        else if (text.startsWith(local.text) && text.length > local.text.length) {
          local.attachments = text.slice(local.text.length).trim();
        }
        return [local.id];
      }
      // Context the server injects as a user message carries a `source`:
      // not a prompt, so not a turn (the server counts turns the same way).
      const turn = metadata["source"] ? undefined : ++this.turns;
      return [
        this.push({
          role: "user",
          text: shown,
          attachments: extra || undefined,
          instructions: instructions.length ? instructions : undefined,
          turn,
          messageIndex: index,
        }).id,
      ];
    }
    if (message.role === "assistant") {
      const toolCalls = readToolCalls(metadata);
      for (const call of toolCalls) if (call.id) this.toolNames.set(call.id, call.name);
      const reasoning = typeof metadata["reasoning"] === "string" ? (metadata["reasoning"] as string) : "";
      const streaming =
        (index !== undefined ? this.streamingByIndex.get(index) : undefined) ?? this.oldestStreaming();
      if (streaming) {
        this.finishStreaming(streaming);
        streaming.text = text;
        streaming.thinking = reasoning || streaming.thinking;
        streaming.toolCalls = toolCalls;
        return [streaming.id];
      }
      return [this.push({ role: "assistant", text, thinking: reasoning, toolCalls }).id];
    }
    if (message.role === "tool") {
      const callId = metadata["tool_call_id"] !== undefined ? String(metadata["tool_call_id"]) : undefined;
      const name = String(metadata["tool_name"] ?? (callId && this.toolNames.get(callId)) ?? "tool");
      const result = message.toolResult ?? {};
      const success = result.success !== false;
      const error = result.error ? String(result.error["message"] ?? JSON.stringify(result.error)) : undefined;
      const output = result.output !== undefined && result.output !== null ? stringify(result.output) : text;
      return [this.push({ role: "tool", text, tool: { name, success, output, error } }).id];
    }
    return [this.push({ role: message.role === "system" ? "system" : "info", text }).id];
  }

  /** The agentls/chat result: close streaming entries, show failures. */
  finishTurn(result: ChatResult): string[] {
    const changed: string[] = [];
    if (!this.sessionId) this.sessionId = result.sessionId;
    for (const entry of [...this.streamingByIndex.values()]) {
      this.finishStreaming(entry);
      changed.push(entry.id);
    }
    if (result.status === "failed") {
      const message = result.error?.message ?? "The agent turn failed.";
      changed.push(this.push({ role: "error", text: message }).id);
    } else if (result.status === "cancelled") {
      changed.push(this.push({ role: "info", text: "Cancelled." }).id);
    }
    return changed;
  }

  /**
   * Marks the prompts of the turns that have a checkpoint as restorable. A
   * prompt is matched by its message index when known (a view that joined a
   * session midway numbers turns from where it joined), else by its turn;
   * the server's turn number is what a restore sends.
   */
  markRestorable(checkpoints: Iterable<{ turn: number; messageIndex?: number }>): string[] {
    const byIndex = new Map<number, number>();
    const byTurn = new Set<number>();
    for (const c of checkpoints) {
      if (c.messageIndex !== undefined) byIndex.set(c.messageIndex, c.turn);
      byTurn.add(c.turn);
    }
    const changed: string[] = [];
    for (const entry of this.entries) {
      if (entry.role !== "user" || entry.turn === undefined) continue;
      let turn: number | undefined;
      if (entry.messageIndex !== undefined) turn = byIndex.get(entry.messageIndex);
      else if (byTurn.has(entry.turn)) turn = entry.turn;
      const restorable = turn !== undefined;
      if (Boolean(entry.restorable) !== restorable || (turn !== undefined && turn !== entry.turn)) {
        entry.restorable = restorable;
        if (turn !== undefined) entry.turn = turn;
        changed.push(entry.id);
      }
    }
    return changed;
  }

  /** A line from the extension itself (a restore's outcome). */
  addInfo(text: string): string[] {
    return [this.push({ role: "info", text }).id];
  }

  /** A request that failed before the server answered (connection lost...). */
  addError(text: string): string[] {
    for (const entry of [...this.streamingByIndex.values()]) this.finishStreaming(entry);
    return [this.push({ role: "error", text }).id];
  }

  get isStreaming(): boolean {
    return this.streamingByIndex.size > 0;
  }

  find(id: string): Entry | undefined {
    return this.entries.find((e) => e.id === id);
  }

  private accepts(sessionId: string): boolean {
    if (this.sessionId === undefined) {
      this.sessionId = sessionId;
      return true;
    }
    return this.sessionId === sessionId;
  }

  private oldestStreaming(): Entry | undefined {
    let oldest: [number, Entry] | undefined;
    for (const [index, entry] of this.streamingByIndex) {
      if (!oldest || index < oldest[0]) oldest = [index, entry];
    }
    return oldest?.[1];
  }

  private finishStreaming(entry: Entry): void {
    entry.streaming = false;
    for (const [index, candidate] of this.streamingByIndex) {
      if (candidate === entry) this.streamingByIndex.delete(index);
    }
  }

  private push(partial: Partial<Entry> & Pick<Entry, "role">): Entry {
    const entry: Entry = { id: `e${this.nextId++}`, text: "", thinking: "", streaming: false, ...partial };
    this.entries.push(entry);
    return entry;
  }
}

function readStrings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/** Message content as text: strings as-is, content parts joined, else JSON. */
export function contentText(content: unknown): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => {
        if (typeof part === "string") return part;
        if (part && typeof part === "object" && typeof (part as { text?: unknown }).text === "string") {
          return (part as { text: string }).text;
        }
        return "";
      })
      .join("");
  }
  return stringify(content);
}

export function readToolCalls(metadata: { [key: string]: unknown }): ToolCallView[] {
  const calls = metadata["tool_calls"];
  if (!Array.isArray(calls)) return [];
  const previews = (metadata["tool_call_previews"] ?? {}) as { [id: string]: unknown };
  return calls.map((raw): ToolCallView => {
    const call = (raw ?? {}) as { [key: string]: unknown };
    const fn = (call["function"] ?? {}) as { [key: string]: unknown };
    const name = String(call["tool"] ?? call["name"] ?? fn["name"] ?? "tool");
    let args: unknown = call["arguments"] ?? fn["arguments"] ?? {};
    if (typeof args === "string") {
      try {
        args = JSON.parse(args);
      } catch {
        // keep the raw text
      }
    }
    const id = call["id"] !== undefined && call["id"] !== null ? String(call["id"]) : undefined;
    const preview = id !== undefined && previews[id] ? stringify(previews[id]) : undefined;
    return { id, name, arguments: args, preview };
  });
}

function stringify(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export interface RestoreOutcome {
  restored: string[];
  conflicts: { path: string; reason: string }[];
  note?: string;
}

/** "Restored 2 files to before turn 1: a.py, b.py. Left alone: ..." */
export function restoreSummary(turn: number, result: RestoreOutcome): string {
  const restored = result.restored ?? [];
  const conflicts = result.conflicts ?? [];
  const files = restored.length === 1 ? "1 file" : `${restored.length} files`;
  let text = `Restored ${files} to before turn ${turn}${restored.length ? `: ${restored.join(", ")}` : ""}.`;
  if (conflicts.length) text += ` Left alone: ${conflicts.map((c) => c.reason).join(" ")}`;
  if (result.note) text += ` ${result.note}`;
  return text;
}
