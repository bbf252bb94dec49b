/** Wire types of the agentls/* methods the extension uses (docs/protocol.md). */

export interface WireMessage {
  role: "system" | "user" | "assistant" | "tool" | string;
  content: unknown;
  metadata?: { [key: string]: unknown } | null;
  multipartContent?: unknown[] | null;
  toolResult?: { success?: boolean; output?: unknown; error?: { [key: string]: unknown } | null } | null;
}

export interface MessageDeltaParams {
  sessionId: string;
  index: number;
  delta: string;
  kind?: "text" | "thinking" | string;
}

export interface MessageParams {
  sessionId: string;
  /** The message's index in the session; deltas of it carry the same index. */
  index?: number;
  message: WireMessage;
}

export interface ChatParams {
  sessionId?: string;
  prompt: string;
  context?: { uri?: string; range?: unknown };
}

export interface ChatResult {
  sessionId: string;
  status: "completed" | "failed" | "cancelled" | string;
  messages?: WireMessage[];
  usage?: { input_tokens?: number; output_tokens?: number; total_tokens?: number };
  error?: { code?: string; message?: string } | null;
}

export interface SessionSummary {
  sessionId: string;
  title?: string | null;
  updatedAt?: string | null;
  status?: { status?: string; total_messages?: number } | null;
}

export interface SessionsResult {
  sessions: SessionSummary[];
}

export interface SessionData {
  session_id?: string;
  sessionId?: string;
  messages?: WireMessage[];
  metadata?: { [key: string]: unknown };
}

export interface CheckpointInfo {
  turn: number;
  messageIndex: number;
  createdAt: string;
  files: string[];
}

export interface CheckpointsResult {
  checkpoints: CheckpointInfo[];
}

export interface RestoreResult {
  restored: string[];
  conflicts: { path: string; reason: string }[];
  note?: string;
}

export const Methods = {
  chat: "agentls/chat",
  messageDelta: "agentls/messageDelta",
  message: "agentls/message",
  sessions: "agentls/sessions",
  session: "agentls/session",
  compact: "agentls/compact",
  deleteSession: "agentls/deleteSession",
  complete: "agentls/complete",
  status: "agentls/status",
  templates: "agentls/templates",
  checkpoints: "agentls/checkpoints",
  restoreCheckpoint: "agentls/restoreCheckpoint",
  didChangeStatus: "didChangeStatus",
} as const;
