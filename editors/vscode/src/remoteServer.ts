/**
 * Connecting to an agentls server that is already running (docs/security.md,
 * "Connecting to a running server") instead of starting one on stdio:
 *
 * - `unix` or `unix:/path/agentls.sock`: the server's Unix socket (`agentls
 *   --socket`), which only its owner can reach; no token;
 * - `tcp:HOST:PORT`: `agentls --tcp`; the extension sends the server's token
 *   in initializationOptions.agentlsToken, read from `agentls.server.tokenFile`
 *   (default: the file the server wrote, $XDG_RUNTIME_DIR/agentls/tcp-PORT.token)
 *   or from $AGENTLS_TOKEN of VS Code's own environment. The token is never a
 *   setting: settings sync would copy it.
 *
 * Pure: the environment and file reads come in as arguments, so it is
 * unit-tested without a server.
 */

import * as path from "node:path";

export type ConnectTarget =
  | { kind: "unix"; path: string }
  | { kind: "tcp"; host: string; port: number };

export type ParsedConnect = { target: ConnectTarget } | { error: string } | undefined;

export const TOKEN_ENV = "AGENTLS_TOKEN";
export const TOKEN_OPTION = "agentlsToken";

/** The runtime folder the server uses: $XDG_RUNTIME_DIR/agentls, else (Linux) /run/user/UID/agentls. */
export function runtimeDir(env: NodeJS.ProcessEnv, uid: number | undefined): string | undefined {
  const xdg = env.XDG_RUNTIME_DIR?.trim();
  if (xdg) return path.join(xdg, "agentls");
  // platformdirs' user_runtime_dir on Linux without XDG_RUNTIME_DIR.
  return uid === undefined ? undefined : path.join("/run/user", String(uid), "agentls");
}

/** `agentls.server.connect` -> where to connect; undefined when empty (start the server). */
export function parseConnect(value: string | undefined, env: NodeJS.ProcessEnv, uid?: number): ParsedConnect {
  const text = (value ?? "").trim();
  if (!text) return undefined;
  if (text === "unix" || text.startsWith("unix:")) {
    const given = text.slice("unix:".length).trim();
    const dir = runtimeDir(env, uid);
    const socket = given || (dir ? path.join(dir, "agentls.sock") : "");
    if (!socket) return { error: "agentls.server.connect: give the socket's path, e.g. unix:/run/user/1000/agentls/agentls.sock" };
    return { target: { kind: "unix", path: socket } };
  }
  const tcp = /^tcp:(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  if (tcp) {
    const port = Number(tcp[3]);
    if (port < 1 || port > 65535) return { error: `agentls.server.connect: port ${port} is not a TCP port` };
    return { target: { kind: "tcp", host: tcp[1] ?? tcp[2], port } };
  }
  return {
    error: `agentls.server.connect is "${text}"; use unix, unix:/path/to/agentls.sock or tcp:127.0.0.1:PORT (or leave it empty to start the server)`,
  };
}

export interface TokenSources {
  env: NodeJS.ProcessEnv;
  /** `agentls.server.tokenFile`, already expanded. */
  tokenFile?: string;
  uid?: number;
  readFile: (file: string) => string;
}

/** The token a TCP connection presents: { token } or { error } naming where it looked. */
export function tokenFor(target: ConnectTarget, sources: TokenSources): { token?: string; error?: string } {
  if (target.kind !== "tcp") return {};
  const file =
    sources.tokenFile?.trim() ||
    (() => {
      const dir = runtimeDir(sources.env, sources.uid);
      return dir ? path.join(dir, `tcp-${target.port}.token`) : undefined;
    })();
  if (file) {
    try {
      const token = sources.readFile(file).trim();
      if (token) return { token };
    } catch {
      // fall through to the environment
    }
  }
  const fromEnv = sources.env[TOKEN_ENV]?.trim();
  if (fromEnv) return { token: fromEnv };
  return {
    error:
      `agentls: no token to connect to ${target.host}:${target.port}: ` +
      `${file ? `${file} cannot be read, and ` : ""}$${TOKEN_ENV} is not set. ` +
      "Set agentls.server.tokenFile to the file `agentls --tcp` printed, or start VS Code with AGENTLS_TOKEN.",
  };
}

/** initializationOptions with the token added (when there is one). */
export function withToken(options: Record<string, unknown>, token: string | undefined): Record<string, unknown> {
  return token ? { ...options, [TOKEN_OPTION]: token } : options;
}
