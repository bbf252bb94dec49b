/** Entry point: wires the server connection, chat view, status bar and commands. */

import * as vscode from "vscode";
import { ChatViewProvider } from "./chat/view";
import { ServerConnection } from "./connection";
import { NextEditController } from "./nextEdit";
import { RestingCursor } from "./restingCursor";
import { showSessions } from "./sessions";
import { statusView } from "./status";

let connection: ServerConnection | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("agentls", { log: true });
  connection = new ServerConnection(output);
  const chat = new ChatViewProvider(context.extensionUri, connection);
  const nextEdits = new NextEditController(
    {
      request: (method, params, token) => connection!.request(method, params, token),
      get running() {
        return connection?.state === "running";
      },
    },
    // Client-side pause before asking (the server debounces again: nextEdit.debounceMs).
    () => 300,
    () => vscode.workspace.getConfiguration("agentls").get<boolean>("nextEdit.enabled", true),
  );

  const resting = new RestingCursor(
    (uri, line, character) =>
      connection?.notify("agentls/didMoveCursor", { textDocument: { uri }, position: { line, character } }),
    300,
  );

  const statusItem = vscode.window.createStatusBarItem("agentls.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "agentls";
  statusItem.command = "agentls.openChat";
  const renderStatus = () => {
    const conn = connection;
    if (!conn) return;
    const view = statusView(conn.state, conn.status, chat.busy, conn.lastStatusNotification);
    statusItem.text = view.text;
    statusItem.tooltip = view.tooltip;
    statusItem.command = conn.state === "failed" ? "agentls.showOutput" : "agentls.openChat";
    statusItem.backgroundColor = view.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    statusItem.show();
  };

  context.subscriptions.push(
    output,
    connection,
    chat,
    nextEdits,
    resting,
    vscode.window.onDidChangeTextEditorSelection((event) => {
      const document = event.textEditor.document;
      if (document.uri.scheme !== "file" && document.uri.scheme !== "untitled") return;
      const at = event.selections[0]?.active;
      if (at && event.selections[0].isEmpty) resting.moved(document.uri.toString(), at.line, at.character);
    }),
    vscode.workspace.onDidChangeTextDocument(() => resting.edited()),
    statusItem,
    connection.onDidChangeState(renderStatus),
    connection.onDidChangeStatus(renderStatus),
    chat.onDidChangeBusy(renderStatus),
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, chat),
    vscode.commands.registerCommand("agentls.openChat", () => chat.reveal()),
    vscode.commands.registerCommand("agentls.startNewSession", async () => {
      chat.newSession();
      await chat.reveal();
    }),
    vscode.commands.registerCommand("agentls.cancelTurn", () => {
      if (!chat.cancel()) void vscode.window.setStatusBarMessage("agentls: no turn is running", 3000);
    }),
    vscode.commands.registerCommand("agentls.showSessions", () => showSessions(connection!, chat)),
    vscode.commands.registerCommand("agentls.compactSession", () => chat.compact()),
    vscode.commands.registerCommand("agentls.restartServer", () => connection!.restart()),
    vscode.commands.registerCommand("agentls.showOutput", () => output.show()),
    vscode.commands.registerCommand("agentls.sendPrompt", async (prompt?: string) => {
      await chat.reveal();
      if (typeof prompt === "string") await chat.send(prompt);
    }),
  );
  renderStatus();
  // Not awaited: activation must not wait for a Python process to start.
  void connection.start();
}

export async function deactivate(): Promise<void> {
  await connection?.stop();
  connection = undefined;
}
