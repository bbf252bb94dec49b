import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { EXTENSION_ONLY_PREFIXES, SERVER_KEYS, USER_FILE_ONLY_KEYS, explicitValue, leafPaths, needsRestart, toWireSettings } from "../src/settings";

const root = path.resolve(__dirname, "../..");
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
const contributed: { [key: string]: { default?: unknown } } = pkg.contributes.configuration.properties;

describe("toWireSettings", () => {
  it("nests camelCase keys and forwards only values the user set", () => {
    const user: { [key: string]: unknown } = {
      provider: "scripted",
      "inlineCompletion.debounceMs": 0,
      "approval.mode": "annotation",
      providerOptions: { script: "/tmp/s.json" },
    };
    const wire = toWireSettings((key) => (key in user ? { globalValue: user[key] } : {}));
    assert.deepEqual(wire, {
      provider: "scripted",
      providerOptions: { script: "/tmp/s.json" },
      inlineCompletion: { debounceMs: 0 },
      approval: { mode: "annotation" },
    });
  });

  it("prefers folder over workspace over user values", () => {
    const wire = toWireSettings((key) =>
      key === "model" ? { globalValue: "a", workspaceValue: "b", workspaceFolderValue: "c" } : undefined,
    );
    assert.deepEqual(wire, { model: "c" });
  });

  it("treats empty strings and null as unset, so lower sources still apply", () => {
    assert.equal(explicitValue({ globalValue: "", workspaceValue: "  " }), undefined);
    assert.equal(explicitValue({ globalValue: null }), undefined);
    assert.equal(explicitValue({ globalValue: false }), false);
    assert.equal(explicitValue({ globalValue: 0 }), 0);
    assert.deepEqual(toWireSettings(() => ({ globalValue: "" })), {});
  });

  it("copies objects so the caller's values are not shared", () => {
    const rules = [{ tool: "*", action: "ask" }];
    const wire = toWireSettings((key) => (key === "approval.rules" ? { globalValue: rules } : undefined));
    assert.deepEqual((wire.approval as { rules: unknown }).rules, rules);
    assert.notEqual((wire.approval as { rules: unknown }).rules, rules);
  });

  it("restarts only for server.* changes", () => {
    assert.equal(needsRestart(["server.path"]), true);
    assert.equal(needsRestart(["provider", "approval.mode"]), false);
  });
});

describe("package.json contributions", () => {
  const keys = Object.keys(contributed).map((k) => k.replace(/^agentls\./, ""));
  const serverSide = keys.filter((k) => !EXTENSION_ONLY_PREFIXES.some((p) => k.startsWith(p)));

  it("contributes exactly the server keys plus extension-only ones", () => {
    assert.deepEqual([...serverSide].sort(), [...SERVER_KEYS].sort());
    assert.ok(keys.includes("server.path"));
  });

  it("documents every setting", () => {
    for (const [key, schema] of Object.entries(contributed)) {
      const s = schema as { description?: string; markdownDescription?: string };
      assert.ok(s.description || s.markdownDescription, `${key} has no description`);
    }
  });

  it("declares palette commands with the agentls category", () => {
    const titles = pkg.contributes.commands.map((c: { title: string; category: string }) => `${c.category}: ${c.title}`);
    for (const title of ["Open Chat", "New Session", "Cancel", "Show Sessions", "Restart Server", "Show Output"]) {
      assert.ok(titles.includes(`agentls: ${title}`), title);
    }
  });

  // The contract test against the server's own settings model, when a Python
  // environment with agentls is at hand (CI's .venv, or AGENTLS_PYTHON).
  const candidates = [process.env.AGENTLS_PYTHON, path.join(root, "../../.venv/bin/python"), "/work/venv/bin/python"];
  const python = candidates.find((p): p is string => Boolean(p && existsSync(p)));
  it("matches the server's settings model", { skip: python ? false : "no Python with agentls found" }, () => {
    const script =
      "import json; from agentls.core.settings.schema import default_settings; print(json.dumps(default_settings().to_wire()))";
    const wire = JSON.parse(execFileSync(python!, ["-c", script], { encoding: "utf8" }));
    const serverLeaves = leafPaths(wire, "", new Set(["providerOptions", "mcpServers"]));
    const forwarded = [...serverLeaves].filter((k) => !(USER_FILE_ONLY_KEYS as readonly string[]).includes(k));
    assert.deepEqual(forwarded.sort(), [...SERVER_KEYS].sort());
    for (const key of USER_FILE_ONLY_KEYS) assert.ok(serverLeaves.includes(key), key);
    // The documented defaults are the server's defaults.
    for (const key of SERVER_KEYS) {
      const declared = contributed[`agentls.${key}`].default;
      const actual = key.split(".").reduce((node: any, part) => node?.[part], wire);
      if (declared === "" || key === "approval.rules") continue; // "" = unset; null = server's list
      assert.deepEqual(declared, actual, key);
    }
  });
});
