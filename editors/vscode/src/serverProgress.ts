/**
 * The server's own long work (model downloads and loads, created by the
 * server with tokens "agentls-progress-N") as VS Code's standard progress
 * notification, with a Cancel button that sends
 * window/workDoneProgress/cancel. vscode-languageclient would show
 * server-created progress only as a status-bar spinner, where a download of
 * several GB can be neither followed nor cancelled.
 */

import * as vscode from "vscode";
import {
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  type LanguageClient,
  type WorkDoneProgressBegin,
  type WorkDoneProgressReport,
} from "vscode-languageclient/node";

interface Shown {
  progress?: vscode.Progress<{ message?: string; increment?: number }>;
  resolve?: () => void;
  reported: number;
  ended: boolean;
}

function report(shown: Shown, value: WorkDoneProgressBegin | WorkDoneProgressReport): void {
  const percentage = typeof value.percentage === "number" ? Math.max(0, Math.min(100, value.percentage)) : undefined;
  const increment = percentage === undefined ? undefined : Math.max(0, percentage - shown.reported);
  if (percentage !== undefined) shown.reported = Math.max(shown.reported, percentage);
  shown.progress?.report({ message: value.message, increment });
}

/** Call after client.start(): replaces the client's handler for server-created progress. */
export function showServerProgress(client: LanguageClient): vscode.Disposable {
  return client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
    const shown: Shown = { reported: 0, ended: false };
    const listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === "begin") {
        void vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: value.title, cancellable: value.cancellable === true },
          (progress, cancellation) =>
            new Promise<void>((resolve) => {
              if (shown.ended) return resolve();
              shown.progress = progress;
              shown.resolve = resolve;
              cancellation.onCancellationRequested(() => {
                void client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
              });
              report(shown, value);
            }),
        );
      } else if (value.kind === "report") {
        report(shown, value);
      } else {
        shown.ended = true;
        shown.resolve?.();
        listener.dispose();
      }
    });
  });
}
