/** How a session appears in the session list. Pure: no `vscode` import. */

import type { SessionSummary } from "./chat/protocol";

export function sessionLabel(session: SessionSummary, now: Date = new Date()): { label: string; description: string } {
  const title = (session.title ?? "").trim() || "Untitled session";
  const parts: string[] = [];
  if (session.updatedAt) parts.push(relativeTime(new Date(session.updatedAt), now));
  const status = session.status?.status;
  if (status && status !== "completed") parts.push(status);
  const count = session.status?.total_messages;
  if (typeof count === "number") parts.push(`${count} message${count === 1 ? "" : "s"}`);
  return { label: title.length > 80 ? `${title.slice(0, 79)}…` : title, description: parts.join(" · ") };
}

export function relativeTime(then: Date, now: Date): string {
  const seconds = Math.round((now.getTime() - then.getTime()) / 1000);
  if (Number.isNaN(seconds)) return "";
  if (seconds < 60) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  if (days < 30) return `${days} d ago`;
  return then.toISOString().slice(0, 10);
}
