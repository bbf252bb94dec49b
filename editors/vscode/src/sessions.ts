/** "agentls: Show Sessions": pick a session to resume, delete, or start anew. */

import * as vscode from "vscode";
import type { ChatViewProvider } from "./chat/view";
import type { ServerConnection } from "./connection";
import { Methods, type SessionSummary, type SessionsResult } from "./chat/protocol";
import { sessionLabel } from "./sessionLabel";

interface SessionPick extends vscode.QuickPickItem {
  sessionId?: string;
}

export async function showSessions(connection: ServerConnection, chat: ChatViewProvider): Promise<void> {
  const pick = vscode.window.createQuickPick<SessionPick>();
  pick.title = "agentls sessions";
  pick.placeholder = "Resume a session (the trash button deletes it)";
  const remove: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("trash"), tooltip: "Delete session" };

  const load = async () => {
    pick.busy = true;
    let sessions: SessionSummary[] = [];
    try {
      sessions = (await connection.request<SessionsResult>(Methods.sessions, {}))?.sessions ?? [];
    } catch (error) {
      void vscode.window.showErrorMessage(`agentls: cannot list sessions: ${(error as Error).message}`);
    }
    pick.items = [
      { label: "$(add) New session", alwaysShow: true },
      ...sessions.map((s): SessionPick => {
        const label = sessionLabel(s);
        return {
          label: label.label,
          description: label.description,
          detail: s.sessionId === chat.sessionId ? "shown in the chat view" : undefined,
          sessionId: s.sessionId,
          buttons: [remove],
        };
      }),
    ];
    pick.busy = false;
  };

  pick.onDidTriggerItemButton(async (event) => {
    const id = event.item.sessionId;
    if (!id) return;
    try {
      await connection.request(Methods.deleteSession, { sessionId: id });
      chat.sessionDeleted(id);
    } catch (error) {
      void vscode.window.showErrorMessage(`agentls: cannot delete the session: ${(error as Error).message}`);
    }
    await load();
  });
  pick.onDidAccept(async () => {
    const chosen = pick.selectedItems[0];
    pick.hide();
    if (!chosen) return;
    if (chosen.sessionId) await chat.openSession(chosen.sessionId);
    else {
      chat.newSession();
      await chat.reveal();
    }
  });
  pick.onDidHide(() => pick.dispose());
  pick.show();
  await load();
}
