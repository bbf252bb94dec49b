/**
 * The `@file:` mention (and `/template`) picker of the chat input. The
 * webview sends the text before the cursor; `agentls/complete` answers with
 * feature completions; picking one rewrites the token being typed.
 *
 * Pure: no `vscode` import.
 */

/**
 * `agentls/complete` answers `{items}` of feature completion entries
 * (`replacement`, `start` offset into the text, `display`, `display_meta`,
 * `applied` when the plugin expands the entry); LSP CompletionItems are
 * accepted too, so the picker works with either shape.
 */
export interface CompletionLike {
  label?: string | { label: string };
  replacement?: string;
  start?: number;
  display?: string;
  display_meta?: string;
  applied?: string;
  insertText?: string;
  filterText?: string;
  detail?: string;
  documentation?: string | { value: string };
  textEdit?: { range?: RangeLike; insert?: RangeLike; replace?: RangeLike; newText: string };
}

interface RangeLike {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

export interface PickerItem {
  label: string;
  detail?: string;
  /** The text that replaces [start, end) of the input. */
  newText: string;
  start: number;
  end: number;
}

/** The token under completion: `@...` anywhere, or `/...` at the start. */
export function triggerToken(textBeforeCursor: string): { start: number; token: string } | undefined {
  const mention = /(^|\s)(@[^\s]*)$/.exec(textBeforeCursor);
  if (mention) return { start: textBeforeCursor.length - mention[2].length, token: mention[2] };
  const template = /^\s*(\/[^\s]*)$/.exec(textBeforeCursor);
  if (template) return { start: textBeforeCursor.length - template[1].length, token: template[1] };
  return undefined;
}

/** `agentls/complete` may answer a list, a CompletionList or null. */
export function completionItems(result: unknown): CompletionLike[] {
  if (Array.isArray(result)) return result as CompletionLike[];
  if (result && typeof result === "object" && Array.isArray((result as { items?: unknown }).items)) {
    return (result as { items: CompletionLike[] }).items;
  }
  return [];
}

export function offsetAt(text: string, position: { line: number; character: number }): number {
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < position.line && i < lines.length; i++) offset += lines[i].length + 1;
  return Math.min(offset + position.character, text.length);
}

export function labelOf(item: CompletionLike): string {
  if (item.display) return item.display;
  if (typeof item.label === "string") return item.label;
  if (item.label) return item.label.label;
  return item.replacement ?? "";
}

/** Picker rows for the items, each knowing which part of the input it replaces. */
export function toPickerItems(textBeforeCursor: string, items: readonly CompletionLike[]): PickerItem[] {
  const token = triggerToken(textBeforeCursor);
  const defaultStart = token ? token.start : textBeforeCursor.length;
  return items.map((item) => {
    const label = labelOf(item);
    if (typeof item.replacement === "string") {
      const start = typeof item.start === "number" && item.start >= 0 && item.start <= textBeforeCursor.length ? item.start : defaultStart;
      return {
        label,
        detail: item.display_meta ?? item.detail,
        newText: item.applied || item.replacement,
        start,
        end: textBeforeCursor.length,
      };
    }
    const edit = item.textEdit;
    const range = edit ? (edit.range ?? edit.replace ?? edit.insert) : undefined;
    if (edit && range) {
      return {
        label,
        detail: item.detail,
        newText: edit.newText,
        start: offsetAt(textBeforeCursor, range.start),
        end: Math.max(offsetAt(textBeforeCursor, range.end), textBeforeCursor.length),
      };
    }
    return {
      label,
      detail: item.detail,
      newText: item.insertText ?? label,
      start: defaultStart,
      end: textBeforeCursor.length,
    };
  });
}

/** The input after picking `item`; `cursor` is where the caret goes. */
export function applyPick(text: string, cursor: number, item: PickerItem): { text: string; cursor: number } {
  const end = Math.max(item.end, Math.min(cursor, text.length));
  let newText = item.newText;
  const after = text.slice(end);
  if (!after.startsWith(" ") && !newText.endsWith(" ") && !newText.endsWith("/") && !newText.endsWith(":")) {
    newText += " ";
  }
  return { text: text.slice(0, item.start) + newText + after, cursor: item.start + newText.length };
}
