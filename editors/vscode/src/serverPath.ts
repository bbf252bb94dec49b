/**
 * Where the `agentls` executable is. Order (first hit wins):
 *
 * 1. `agentls.server.path` when set (`~` and `${workspaceFolder}` expanded;
 *    a relative path is taken from the first workspace folder);
 * 2. each workspace folder's `.venv` and `venv` virtual environments;
 * 3. next to the Python interpreter the Python extension selected;
 * 4. every directory on PATH.
 *
 * Pure: file-system access comes in through `isExecutable`, so the search is
 * unit-tested without touching the disk.
 */

import * as path from "node:path";

export interface DiscoveryInput {
  configured?: string;
  workspaceFolders: readonly string[];
  /** Absolute path of the Python interpreter the Python extension selected. */
  pythonInterpreter?: string;
  envPath?: string;
  platform: NodeJS.Platform;
  home?: string;
  isExecutable: (file: string) => boolean;
}

export type Discovery =
  | { found: true; path: string; source: string }
  | { found: false; tried: string[]; message: string };

export function executableName(platform: NodeJS.Platform): string {
  return platform === "win32" ? "agentls.exe" : "agentls";
}

function venvBin(platform: NodeJS.Platform): string {
  return platform === "win32" ? "Scripts" : "bin";
}

export function expandPath(value: string, workspaceFolders: readonly string[], home?: string): string {
  let result = value.trim();
  const folder = workspaceFolders[0];
  if (folder) result = result.replace(/\$\{workspaceFolder\}/g, folder);
  if (home && (result === "~" || result.startsWith("~/"))) result = path.join(home, result.slice(1));
  if (!path.isAbsolute(result) && folder && result.includes("/")) result = path.join(folder, result);
  return result;
}

export function discoverServer(input: DiscoveryInput): Discovery {
  const exe = executableName(input.platform);
  const sep = input.platform === "win32" ? ";" : ":";
  const tried: string[] = [];
  const check = (file: string, source: string): Discovery | undefined => {
    tried.push(file);
    return input.isExecutable(file) ? { found: true, path: file, source } : undefined;
  };

  if (input.configured && input.configured.trim()) {
    const expanded = expandPath(input.configured, input.workspaceFolders, input.home);
    if (!expanded.includes("/") && !expanded.includes("\\")) {
      // A bare command name: look it up on PATH.
      for (const dir of splitPath(input.envPath, sep)) {
        const hit = check(path.join(dir, expanded), "agentls.server.path on PATH");
        if (hit) return hit;
      }
    } else {
      const hit = check(expanded, "agentls.server.path");
      if (hit) return hit;
    }
    return {
      found: false,
      tried,
      message:
        `agentls.server.path is set to "${input.configured}", but no executable is there. ` +
        "Fix the setting or clear it to let the extension search the workspace's virtual environment and PATH.",
    };
  }

  for (const folder of input.workspaceFolders) {
    for (const venv of [".venv", "venv"]) {
      const hit = check(path.join(folder, venv, venvBin(input.platform), exe), `${venv} in ${folder}`);
      if (hit) return hit;
    }
  }
  if (input.pythonInterpreter) {
    const hit = check(path.join(path.dirname(input.pythonInterpreter), exe), "the selected Python interpreter");
    if (hit) return hit;
  }
  for (const dir of splitPath(input.envPath, sep)) {
    const hit = check(path.join(dir, exe), "PATH");
    if (hit) return hit;
  }
  return {
    found: false,
    tried,
    message:
      "Cannot find the agentls language server. Install it into the workspace's virtual environment " +
      "(`python -m venv .venv && .venv/bin/pip install agentls`) or set agentls.server.path.",
  };
}

function splitPath(envPath: string | undefined, sep: string): string[] {
  return (envPath ?? "").split(sep).filter((dir) => dir.length > 0);
}
