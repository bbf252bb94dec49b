/**
 * The chat view: a webview view in the agentls view container. Why a
 * webview and not the VS Code Chat API: the Chat API renders into the
 * built-in Chat view, which VS Code 1.139 ties to its own AI features
 * (off with `chat.disableAIFeatures`, often absent in code-server and other
 * builds), and it owns history, cancellation and sessions itself, whereas
 * agentls keeps sessions on the server (agentls/sessions, resume, delete)
 * and streams its own notifications. A webview works in every VS Code
 * build and keeps the server the single source of truth.
 */

import * as vscode from "vscode";
import type { ServerConnection } from "../connection";
import { completionItems, toPickerItems } from "./mentions";
import {
  Methods,
  type ChatParams,
  type ChatResult,
  type CheckpointsResult,
  type RestoreResult,
  type SessionData,
} from "./protocol";
import { renderEntry } from "./render";
import { restoreSummary, Transcript } from "./transcript";

export type FromWebview =
  | { type: "ready" }
  | { type: "send"; prompt: string }
  | { type: "cancel" }
  | { type: "newSession" }
  | { type: "showSessions" }
  | { type: "restore"; turn: number }
  | { type: "complete"; requestId: number; textBeforeCursor: string };

const REQUEST_CANCELLED = -32800;

export class ChatViewProvider implements vscode.WebviewViewProvider, vscode.Disposable {
  static readonly viewId = "agentls.chatView";

  private view: vscode.WebviewView | undefined;
  private transcript = new Transcript();
  private pending: { cts: vscode.CancellationTokenSource; transcript: Transcript } | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly busyEmitter = new vscode.EventEmitter<boolean>();
  readonly onDidChangeBusy = this.busyEmitter.event;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly connection: ServerConnection,
  ) {
    this.disposables.push(
      this.busyEmitter,
      connection.onMessageDelta((params) => {
        this.followSession(params.sessionId);
        this.update(this.transcript.applyDelta(params));
      }),
      connection.onMessage((params) => {
        this.followSession(params.sessionId);
        this.update(this.transcript.applyMessage(params.message, params.sessionId, params.index));
      }),
    );
  }

  get busy(): boolean {
    return this.pending !== undefined;
  }

  get sessionId(): string | undefined {
    return this.transcript.sessionId;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    const dist = vscode.Uri.joinPath(this.extensionUri, "dist");
    view.webview.options = { enableScripts: true, localResourceRoots: [media, dist] };
    view.webview.html = this.html(view.webview);
    view.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message), undefined, this.disposables);
    view.onDidDispose(() => {
      if (this.view === view) this.view = undefined;
    });
  }

  async reveal(): Promise<void> {
    await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
  }

  /** Sends a prompt as a new turn of the shown session. */
  async send(prompt: string): Promise<void> {
    prompt = prompt.trim();
    if (!prompt || this.pending) return;
    const transcript = this.transcript;
    this.update(transcript.addUserPrompt(prompt));
    const cts = new vscode.CancellationTokenSource();
    this.pending = { cts, transcript };
    this.setBusy(true);
    const params: ChatParams = { prompt, sessionId: transcript.sessionId, context: editorContext() };
    try {
      const result = await this.connection.request<ChatResult>(Methods.chat, params, cts.token);
      this.updateFor(transcript, transcript.finishTurn(result));
    } catch (error) {
      const code = (error as { code?: number }).code;
      if (cts.token.isCancellationRequested || code === REQUEST_CANCELLED) {
        this.updateFor(transcript, transcript.finishTurn({ sessionId: transcript.sessionId ?? "", status: "cancelled" }));
      } else {
        this.updateFor(transcript, transcript.addError(`The request failed: ${(error as Error).message ?? String(error)}`));
      }
    } finally {
      cts.dispose();
      this.pending = undefined;
      this.setBusy(false);
      void this.connection.refreshStatus();
      void this.refreshCheckpoints(transcript);
    }
  }

  /**
   * "Restore to before this turn": the server puts every file this turn and
   * later turns changed back (no approval prompt: the user asked). Files
   * changed since the agent wrote them are left alone and reported, with an
   * action to overwrite them too.
   */
  async restore(turn: number, force = false): Promise<RestoreResult | undefined> {
    const transcript = this.transcript;
    const sessionId = transcript.sessionId;
    if (!sessionId) return undefined;
    if (this.pending) {
      void vscode.window.showWarningMessage("agentls: wait for the running turn to end (or cancel it) before restoring.");
      return undefined;
    }
    let result: RestoreResult;
    try {
      result = await this.connection.request<RestoreResult>(Methods.restoreCheckpoint, { sessionId, turn, force });
    } catch (error) {
      void vscode.window.showErrorMessage(`agentls: restore failed: ${(error as Error).message ?? String(error)}`);
      return undefined;
    }
    this.updateFor(transcript, transcript.addInfo(restoreSummary(turn, result)));
    const conflicts = result.conflicts ?? [];
    if (conflicts.length > 0 && !force) {
      const overwrite = "Overwrite Them";
      const names = conflicts.map((c) => c.path).join(", ");
      void vscode.window
        .showWarningMessage(`agentls: changed since the agent wrote them, left alone: ${names}`, overwrite)
        .then((choice) => (choice === overwrite ? this.restore(turn, true) : undefined));
    } else {
      const files = result.restored.length === 1 ? "1 file" : `${result.restored.length} files`;
      void vscode.window.showInformationMessage(`agentls: restored ${files} to before turn ${turn}.`);
    }
    return result;
  }

  /**
   * Summarises the shown session's earlier turns (agentls/compact); the
   * summary arrives as an agentls/message notification like any message.
   */
  async compact(): Promise<void> {
    const sessionId = this.transcript.sessionId;
    if (!sessionId || this.pending) {
      void vscode.window.showInformationMessage(
        sessionId ? "agentls: wait for the turn to finish, then compact." : "agentls: no conversation to compact yet.",
      );
      return;
    }
    const result = await this.connection.request<{ compacted: boolean; reason?: string; error?: { message?: string } }>(
      Methods.compact,
      { sessionId },
    );
    if (result?.error) void vscode.window.showErrorMessage(`agentls: compaction failed: ${result.error.message ?? ""}`);
    else if (result && !result.compacted) void vscode.window.showInformationMessage(`agentls: ${result.reason ?? "nothing to compact"}`);
  }

  /** Cancels the pending turn: $/cancelRequest for the agentls/chat request. */
  cancel(): boolean {
    if (!this.pending) return false;
    this.pending.cts.cancel();
    return true;
  }

  newSession(): void {
    this.cancel();
    this.transcript = new Transcript();
    this.resetView();
  }

  async openSession(sessionId: string): Promise<void> {
    this.cancel();
    const data = await this.connection.request<SessionData>(Methods.session, { sessionId });
    this.transcript = new Transcript(sessionId, data?.messages ?? []);
    this.resetView();
    await this.reveal();
    await this.refreshCheckpoints(this.transcript);
  }

  /** A session was deleted elsewhere; stop showing it. */
  sessionDeleted(sessionId: string): void {
    if (this.transcript.sessionId === sessionId) this.newSession();
  }

  dispose(): void {
    this.cancel();
    for (const d of this.disposables) d.dispose();
  }

  /**
   * Turns the server starts by itself (code actions run `agentls.chat`)
   * stream into the view too: when no turn of ours is pending and a
   * notification names another session, the view follows it.
   */
  private followSession(sessionId: string): void {
    if (this.transcript.sessionId === sessionId) return;
    if (this.pending && this.transcript.sessionId === undefined) return; // our new session
    if (this.pending) return;
    this.transcript = new Transcript(sessionId);
    this.resetView();
    void this.reveal();
  }

  private async receive(message: FromWebview): Promise<void> {
    switch (message.type) {
      case "ready":
        this.resetView();
        break;
      case "send":
        await this.send(message.prompt);
        break;
      case "cancel":
        this.cancel();
        break;
      case "newSession":
        this.newSession();
        break;
      case "showSessions":
        await vscode.commands.executeCommand("agentls.showSessions");
        break;
      case "restore":
        if (Number.isInteger(message.turn) && message.turn > 0) await this.restore(message.turn);
        break;
      case "complete": {
        let items: ReturnType<typeof toPickerItems> = [];
        try {
          const result = await this.connection.request<unknown>(Methods.complete, { text: message.textBeforeCursor });
          items = toPickerItems(message.textBeforeCursor, completionItems(result)).slice(0, 50);
        } catch (error) {
          // A server without agentls/complete simply offers no picker.
          void error;
        }
        void this.view?.webview.postMessage({ type: "completions", requestId: message.requestId, items });
        break;
      }
    }
  }

  /** Shows "Restore to before this turn" on the turns that changed files. */
  private async refreshCheckpoints(transcript: Transcript): Promise<void> {
    const sessionId = transcript.sessionId;
    if (!sessionId) return;
    try {
      const result = await this.connection.request<CheckpointsResult>(Methods.checkpoints, { sessionId });
      this.updateFor(transcript, transcript.markRestorable(result?.checkpoints ?? []));
    } catch (error) {
      // A server without checkpoints (or the session is gone): no restore actions.
      void error;
    }
  }

  private update(ids: readonly string[]): void {
    this.updateFor(this.transcript, ids);
  }

  private updateFor(transcript: Transcript, ids: readonly string[]): void {
    if (transcript !== this.transcript || !this.view) return;
    for (const id of ids) {
      const entry = transcript.find(id);
      if (entry) void this.view.webview.postMessage({ type: "upsert", id, html: renderEntry(entry) });
    }
  }

  private resetView(): void {
    if (!this.view) return;
    void this.view.webview.postMessage({
      type: "reset",
      html: this.transcript.entries.map(renderEntry).join(""),
      busy: this.busy,
    });
  }

  private setBusy(busy: boolean): void {
    void this.view?.webview.postMessage({ type: "busy", busy });
    this.busyEmitter.fire(busy);
  }

  private html(webview: vscode.Webview): string {
    const nonce = Array.from({ length: 32 }, () => Math.floor(Math.random() * 36).toString(36)).join("");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "chat.css"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
      `img-src ${webview.cspSource} data:`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>agentls chat</title>
</head>
<body>
<div id="toolbar">
  <button id="new" title="New session">New</button>
  <button id="sessions" title="Show sessions">Sessions</button>
  <span id="state"></span>
  <button id="cancel" title="Cancel the running turn" hidden>Cancel</button>
</div>
<div id="log" role="log" aria-live="polite"></div>
<div id="composer">
  <ul id="picker" role="listbox" hidden></ul>
  <textarea id="prompt" rows="3" placeholder="Ask agentls… (@ to mention a file, / for templates, Enter to send)"></textarea>
  <button id="send">Send</button>
</div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}

function editorContext(): ChatParams["context"] {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== "file") return undefined;
  const selection = editor.selection;
  if (selection.isEmpty) return { uri: editor.document.uri.toString() };
  return {
    uri: editor.document.uri.toString(),
    range: {
      start: { line: selection.start.line, character: selection.start.character },
      end: { line: selection.end.line, character: selection.end.character },
    },
  };
}
