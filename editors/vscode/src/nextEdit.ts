/**
 * Next edit suggestions (textDocument/copilotInlineEdit, docs/protocol.md).
 *
 * After the user pauses typing, ask the server for the edit that follows
 * from their change (the call site of a renamed parameter, ...) and show it
 * where it would apply, as decorations: the replaced text struck through on
 * a red background, the new text after it on a green one, and, when the
 * edit is off screen, a hint at the cursor's line. Tab jumps to the edit;
 * Tab on its line applies it and runs its accept command (the server counts
 * it). Escape dismisses it. Context key `agentls.nextEditVisible` scopes
 * the keys (package.json keybindings), so Tab stays Tab otherwise and
 * inline completions keep precedence.
 */

import * as vscode from "vscode";

export const METHOD = "textDocument/copilotInlineEdit";
export const CONTEXT_KEY = "agentls.nextEditVisible";

interface WireRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

export interface WireNextEdit {
  range: WireRange;
  text: string;
  textDocument: { uri: string; version: number };
  command?: { title: string; command: string; arguments?: unknown[] };
}

export interface NextEditClient {
  request<R>(method: string, params: unknown, token?: vscode.CancellationToken): Promise<R>;
  readonly running: boolean;
}

interface Shown {
  editor: vscode.TextEditor;
  version: number;
  edits: WireNextEdit[];
}

/** One line of the new text for an `after` decoration (newlines shown as ⏎). */
export function preview(text: string): string {
  const shown = text.replace(/\r?\n/g, " ⏎ ");
  return shown.length > 120 ? `${shown.slice(0, 119)}…` : shown || "⌫";
}

export class NextEditController implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    textDecoration: "line-through",
  });
  private readonly inserted = vscode.window.createTextEditorDecorationType({});
  private readonly hint = vscode.window.createTextEditorDecorationType({});
  private timer: ReturnType<typeof setTimeout> | undefined;
  private pending: vscode.CancellationTokenSource | undefined;
  private shown: Shown | undefined;
  private applying = false;

  constructor(
    private readonly client: NextEditClient,
    private readonly delayMs: () => number,
    private readonly enabled: () => boolean,
  ) {
    this.disposables.push(
      this.removed,
      this.inserted,
      this.hint,
      vscode.workspace.onDidChangeTextDocument((event) => this.changed(event)),
      vscode.window.onDidChangeActiveTextEditor(() => this.clear()),
      vscode.commands.registerCommand("agentls.acceptNextEdit", () => this.accept()),
      vscode.commands.registerCommand("agentls.dismissNextEdit", () => this.clear()),
      vscode.commands.registerCommand("agentls.suggestNextEdit", () => this.request()),
    );
  }

  dispose(): void {
    this.clear();
    for (const d of this.disposables) d.dispose();
  }

  private changed(event: vscode.TextDocumentChangeEvent): void {
    const editor = vscode.window.activeTextEditor;
    if (!editor || event.document !== editor.document || event.contentChanges.length === 0) return;
    this.clear();
    if (this.applying || !this.enabled()) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.request();
    }, this.delayMs());
  }

  /** Asks for the next edit at the active editor's cursor. */
  async request(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !this.client.running) return;
    const document = editor.document;
    if (document.uri.scheme !== "file" && document.uri.scheme !== "untitled") return;
    this.pending?.cancel();
    const source = new vscode.CancellationTokenSource();
    this.pending = source;
    const version = document.version;
    const position = editor.selection.active;
    let result: { edits?: WireNextEdit[] } | null;
    try {
      result = await this.client.request<{ edits?: WireNextEdit[] } | null>(
        METHOD,
        {
          textDocument: { uri: document.uri.toString(), version },
          position: { line: position.line, character: position.character },
        },
        source.token,
      );
    } catch {
      return; // cancelled or failed: nothing to show
    } finally {
      if (this.pending === source) this.pending = undefined;
      source.dispose();
    }
    if (source.token.isCancellationRequested || vscode.window.activeTextEditor !== editor) return;
    if (document.version !== version) return;
    const edits = (result?.edits ?? []).filter((e) => e.textDocument?.version === version);
    if (edits.length === 0) return;
    this.shown = { editor, version, edits };
    this.render();
    void vscode.commands.executeCommand("setContext", CONTEXT_KEY, true);
  }

  private render(): void {
    const shown = this.shown;
    if (!shown) return;
    const { editor, edits } = shown;
    const removed: vscode.DecorationOptions[] = [];
    const inserted: vscode.DecorationOptions[] = [];
    let offscreen: number | undefined;
    for (const edit of edits) {
      const range = toRange(edit.range);
      if (!range.isEmpty) removed.push({ range });
      inserted.push({
        range: new vscode.Range(range.end, range.end),
        renderOptions: {
          after: {
            contentText: preview(edit.text),
            backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
            border: "1px solid",
            borderColor: new vscode.ThemeColor("diffEditor.insertedLineBackground"),
          },
        },
        hoverMessage: new vscode.MarkdownString("agentls next edit: **Tab** to jump/apply, **Escape** to dismiss"),
      });
      if (!editor.visibleRanges.some((visible) => visible.contains(range.start))) {
        offscreen = offscreen ?? range.start.line;
      }
    }
    editor.setDecorations(this.removed, removed);
    editor.setDecorations(this.inserted, inserted);
    const hints: vscode.DecorationOptions[] = [];
    if (offscreen !== undefined) {
      const line = editor.selection.active.line;
      hints.push({
        range: editor.document.lineAt(line).range.with({ start: editor.document.lineAt(line).range.end }),
        renderOptions: {
          after: {
            contentText: `  ⇥ next edit at line ${offscreen + 1} (Tab)`,
            color: new vscode.ThemeColor("editorCodeLens.foreground"),
          },
        },
      });
    }
    editor.setDecorations(this.hint, hints);
  }

  /** Tab: jump to the edit, or apply it when the cursor is on its line. */
  async accept(): Promise<boolean> {
    const shown = this.shown;
    const editor = vscode.window.activeTextEditor;
    if (!shown || editor !== shown.editor || editor.document.version !== shown.version) {
      this.clear();
      return false;
    }
    const first = toRange(shown.edits[0].range);
    if (editor.selection.active.line !== first.start.line) {
      editor.selection = new vscode.Selection(first.start, first.start);
      editor.revealRange(first, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      this.render();
      return true;
    }
    this.clear();
    this.applying = true;
    let applied = false;
    try {
      applied = await editor.edit((builder) => {
        for (const edit of shown.edits) builder.replace(toRange(edit.range), edit.text);
      });
    } finally {
      this.applying = false;
    }
    if (applied) {
      for (const edit of shown.edits) {
        if (edit.command) await vscode.commands.executeCommand(edit.command.command, ...(edit.command.arguments ?? []));
      }
    }
    return applied;
  }

  clear(): void {
    this.pending?.cancel();
    this.pending = undefined;
    const shown = this.shown;
    this.shown = undefined;
    if (shown) {
      shown.editor.setDecorations(this.removed, []);
      shown.editor.setDecorations(this.inserted, []);
      shown.editor.setDecorations(this.hint, []);
      void vscode.commands.executeCommand("setContext", CONTEXT_KEY, false);
    }
  }
}

function toRange(range: WireRange): vscode.Range {
  return new vscode.Range(range.start.line, range.start.character, range.end.line, range.end.character);
}
