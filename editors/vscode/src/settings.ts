/**
 * Maps the extension's `agentls.*` settings to the server's settings object
 * (docs/protocol.md, "Configuration"): camelCase keys nested as objects, e.g.
 * `agentls.inlineCompletion.debounceMs` -> `{inlineCompletion: {debounceMs}}`.
 *
 * Only values the user actually set (in user, workspace or folder settings)
 * are forwarded. The defaults in package.json document the server's defaults
 * but are not sent, so lower-precedence sources (AGENTLS_* environment
 * variables, `.agentls.toml`, the user config file) keep working for every
 * key the user left alone in VS Code. Empty strings count as "not set"
 * because the Settings UI cannot delete a string value, only empty it.
 *
 * Pure: no `vscode` import, so it is unit-tested under plain Node.
 */

/** Settings that configure the extension itself and are never sent. */
export const EXTENSION_ONLY_PREFIXES = ["server.", "trace."] as const;
// Server keys the extension never sends: a repository's .vscode/settings.json
// could set them, and each lifts a protection (docs/security.md, restricted mode).
export const USER_FILE_ONLY_KEYS = ["approval.unrestrictedFolders"] as const;

/** Every server key the extension contributes (wire paths, without `agentls.`). */
export const SERVER_KEYS = [
  "provider",
  "model",
  "baseUrl",
  "apiKeyEnv",
  "providerOptions",
  "requestTimeoutSeconds",
  "connectTimeoutSeconds",
  "inlineCompletion.enabled",
  "inlineCompletion.model",
  "inlineCompletion.debounceMs",
  "inlineCompletion.maxPrefixChars",
  "inlineCompletion.maxSuffixChars",
  "inlineCompletion.maxTokens",
  "inlineCompletion.speculative",
  "inlineCompletion.showPartialAfterMs",
  "nextEdit.enabled",
  "nextEdit.model",
  "nextEdit.debounceMs",
  "nextEdit.maxTokens",
  "approval.mode",
  "approval.timeoutSeconds",
  "approval.default",
  "approval.rules",
  "session.injectionSizeLimit",
  "session.injectionBudgetPerTurn",
  "session.maxIterations",
  "session.maxOutputTokens",
  "session.maxPromptChars",
  "session.maxToolResultChars",
  "session.editFormat",
  "session.testAfterEdits",
  "linters",
  "features.disabled",
  "local.shared",
  "local.hostIdleSeconds",
  "contextWindow",
  "instructions.files",
  "runCommand.passEnv",
  "mcpServers",
] as const;

export type ServerKey = (typeof SERVER_KEYS)[number];

/** What VS Code's `WorkspaceConfiguration.inspect` reports for one key. */
export interface Inspected<T = unknown> {
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

/** The value the user set for a key, most specific scope first, or undefined. */
export function explicitValue(inspected: Inspected | undefined): unknown {
  if (!inspected) return undefined;
  for (const value of [inspected.workspaceFolderValue, inspected.workspaceValue, inspected.globalValue]) {
    if (value === undefined || value === null) continue;
    if (typeof value === "string" && value.trim() === "") continue;
    return value;
  }
  return undefined;
}

export type WireSettings = { [key: string]: unknown };

/**
 * The settings object for the server: the `agentls` section of
 * workspace/configuration. `inspect(key)` is given wire paths such as
 * "inlineCompletion.debounceMs".
 */
export function toWireSettings(
  inspect: (key: string) => Inspected | undefined,
  keys: readonly string[] = SERVER_KEYS,
): WireSettings {
  const result: WireSettings = {};
  for (const key of keys) {
    const value = explicitValue(inspect(key));
    if (value === undefined) continue;
    setPath(result, key.split("."), cloneJson(value));
  }
  return result;
}

function setPath(target: WireSettings, path: string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== "object" || next === null || Array.isArray(next)) {
      node[part] = {};
    }
    node = node[part] as WireSettings;
  }
  node[path[path.length - 1]] = value;
}

function cloneJson(value: unknown): unknown {
  // VS Code hands out frozen proxies for objects; the client serialises them
  // anyway, but a plain copy keeps callers from sharing state.
  return typeof value === "object" && value !== null ? JSON.parse(JSON.stringify(value)) : value;
}

/** True when a change to these `agentls.*` keys needs a server restart. */
export function needsRestart(changedKeys: readonly string[]): boolean {
  return changedKeys.some((key) => key.startsWith("server."));
}

/** Flattens a nested settings object to dotted leaf paths (objects only). */
export function leafPaths(value: unknown, prefix = "", opaque: ReadonlySet<string> = new Set()): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value) || opaque.has(prefix)) {
    return prefix ? [prefix] : [];
  }
  const out: string[] = [];
  for (const [key, item] of Object.entries(value)) {
    out.push(...leafPaths(item, prefix ? `${prefix}.${key}` : key, opaque));
  }
  return out;
}
