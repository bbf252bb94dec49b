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
 * Pure: the environment and file reads come in as arguments (node's by
 * default), so it is unit-tested without a server.
 */

import * as fs from "node:fs";
import * as path from "node:path";

export type ConnectTarget =
  | { kind: "unix"; path: string }
  | { kind: "tcp"; host: string; port: number };

export type ParsedConnect = { target: ConnectTarget } | { error: string } | undefined;

export const TOKEN_ENV = "AGENTLS_TOKEN";
export const TOKEN_OPTION = "agentlsToken";

function isDirectory(file: string): boolean {
  try {
    return fs.statSync(file).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The runtime folder the server uses, by the server's one rule
 * (docs/security.md): $XDG_RUNTIME_DIR/agentls, else /run/user/UID/agentls
 * when /run/user/UID is a folder, else /tmp/runtime-UID/agentls.
 */
export function runtimeDir(
  env: NodeJS.ProcessEnv,
  uid: number | undefined,
  isDir: (file: string) => boolean = isDirectory,
): string | undefined {
  const xdg = env.XDG_RUNTIME_DIR?.trim();
  if (xdg) return path.join(xdg, "agentls");
  if (uid === undefined) return undefined;
  const runUser = path.join("/run/user", String(uid));
  return path.join(isDir(runUser) ? runUser : `/tmp/runtime-${uid}`, "agentls");
}

/** What checkSocketPath needs of a file: lstat's answer, or undefined when it does not exist. */
export interface FileInfo {
  uid: number;
  mode: number;
  isDirectory: boolean;
  isSocket: boolean;
  isSymbolicLink: boolean;
}

export interface PathLookups {
  lstat: (file: string) => FileInfo | undefined;
  realpath: (file: string) => string;
}

export const nodeLookups: PathLookups = {
  lstat: (file) => {
    try {
      const info = fs.lstatSync(file);
      return {
        uid: info.uid,
        mode: info.mode,
        isDirectory: info.isDirectory(),
        isSocket: info.isSocket(),
        isSymbolicLink: info.isSymbolicLink(),
      };
    } catch {
      return undefined;
    }
  },
  realpath: (file) => fs.realpathSync(file),
};

const STICKY = 0o1000;

/**
 * Before connecting to a Unix socket, the server's own check (OpenSSH's
 * for its paths): the socket and its folder belong to this user and nobody
 * else can write them; every folder above, as written and as resolved,
 * belongs to this user or root and is writable by nobody else unless it is
 * sticky like /tmp. Otherwise another user could have put a fake server
 * there. An error message, or undefined when it is safe (or not POSIX).
 */
export function checkSocketPath(socket: string, uid: number | undefined, files: PathLookups = nodeLookups): string | undefined {
  if (uid === undefined) return undefined;
  const advice = "; start agentls --socket in a folder only you can write (e.g. unix:$XDG_RUNTIME_DIR/agentls/agentls.sock)";
  const own = files.lstat(socket);
  if (!own) return undefined; // nothing there: connecting fails with its own error
  if (!own.isSocket) return `agentls: ${socket} is not a socket${advice}`;
  if (own.uid !== uid) return `agentls: ${socket} belongs to another user (uid ${own.uid}), not you: it may be a fake server${advice}`;
  if (own.mode & 0o022) return `agentls: ${socket} is writable by other users (mode ${(own.mode & 0o7777).toString(8)})${advice}`;
  const folder = path.dirname(path.resolve(socket));
  let resolved = folder;
  try {
    resolved = files.realpath(folder);
  } catch {
    // checked as written only
  }
  const seen = new Set<string>();
  for (const start of [folder, resolved]) {
    for (let each = start, first = true; ; first = false) {
      const info = seen.has(each) ? undefined : files.lstat(each);
      seen.add(each);
      if (info && !info.isSymbolicLink) {
        const mode = (info.mode & 0o7777).toString(8);
        const what = first ? `${each}, the socket's folder,` : each;
        if (info.uid !== uid && (first || info.uid !== 0))
          return `agentls: ${what} belongs to another user (uid ${info.uid})${advice}`;
        if (info.mode & 0o022 && (first || !(info.mode & STICKY)))
          return `agentls: ${what} is writable by other users (mode ${mode})${advice}`;
      }
      const parent = path.dirname(each);
      if (parent === each) break;
      each = parent;
    }
  }
  return undefined;
}

/** `agentls.server.connect` -> where to connect; undefined when empty (start the server). */
export function parseConnect(
  value: string | undefined,
  env: NodeJS.ProcessEnv,
  uid?: number,
  isDir: (file: string) => boolean = isDirectory,
): ParsedConnect {
  const text = (value ?? "").trim();
  if (!text) return undefined;
  if (text === "unix" || text.startsWith("unix:")) {
    const given = text.slice("unix:".length).trim();
    const dir = runtimeDir(env, uid, isDir);
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
  isDir?: (file: string) => boolean;
}

/** The token a TCP connection presents: { token } or { error } naming where it looked. */
export function tokenFor(target: ConnectTarget, sources: TokenSources): { token?: string; error?: string } {
  if (target.kind !== "tcp") return {};
  const file =
    sources.tokenFile?.trim() ||
    (() => {
      const dir = runtimeDir(sources.env, sources.uid, sources.isDir);
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
