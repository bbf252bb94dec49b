import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { checkSocketPath, parseConnect, runtimeDir, tokenFor, withToken, type FileInfo } from "../src/remoteServer";

const env = { XDG_RUNTIME_DIR: "/run/user/1000" };
const tcp = { kind: "tcp" as const, host: "127.0.0.1", port: 2087 };
const files = (map: Record<string, string>) => (file: string) => {
  if (!(file in map)) throw new Error("ENOENT");
  return map[file];
};

describe("parseConnect", () => {
  it("is undefined when empty: the extension starts the server", () => {
    assert.equal(parseConnect("", env), undefined);
    assert.equal(parseConnect(undefined, env), undefined);
  });

  it("takes the server's default socket for `unix`, or the path given", () => {
    assert.deepEqual(parseConnect("unix", env), { target: { kind: "unix", path: "/run/user/1000/agentls/agentls.sock" } });
    assert.deepEqual(parseConnect("unix:/tmp/me/a.sock", env), { target: { kind: "unix", path: "/tmp/me/a.sock" } });
    const runUser42 = (file: string) => file === "/run/user/42";
    assert.deepEqual(parseConnect("unix", {}, 42, runUser42), { target: { kind: "unix", path: "/run/user/42/agentls/agentls.sock" } });
  });

  it("without XDG_RUNTIME_DIR follows the server's rule: /run/user/UID if it is a folder, else /tmp/runtime-UID", () => {
    // The same three cases as tests/reliability/test_transport_paths.py.
    const none = () => false;
    assert.equal(runtimeDir({ XDG_RUNTIME_DIR: " /x/y " }, 7, none), "/x/y/agentls");
    assert.equal(runtimeDir({}, 7, none), "/tmp/runtime-7/agentls");
    assert.equal(runtimeDir({ XDG_RUNTIME_DIR: "" }, 7, (f) => f === "/run/user/7"), "/run/user/7/agentls");
    assert.deepEqual(parseConnect("unix", {}, 7, none), { target: { kind: "unix", path: "/tmp/runtime-7/agentls/agentls.sock" } });
    const read = files({ "/tmp/runtime-7/agentls/tcp-2087.token": "t\n" });
    assert.deepEqual(tokenFor(tcp, { env: {}, uid: 7, isDir: none, readFile: read }), { token: "t" });
  });

  it("reads tcp:HOST:PORT, IPv6 in brackets", () => {
    assert.deepEqual(parseConnect("tcp:127.0.0.1:2087", env), { target: { kind: "tcp", host: "127.0.0.1", port: 2087 } });
    assert.deepEqual(parseConnect("tcp:[::1]:9000", env), { target: { kind: "tcp", host: "::1", port: 9000 } });
  });

  it("says what to write for anything else", () => {
    for (const bad of ["127.0.0.1:2087", "tcp:localhost", "tcp:h:0", "tcp:h:70000", "http://x"]) {
      const parsed = parseConnect(bad, env);
      assert.ok(parsed && "error" in parsed, bad);
      assert.match(parsed.error, /agentls\.server\.connect/);
    }
  });
});

describe("tokenFor", () => {

  it("needs no token for the Unix socket", () => {
    assert.deepEqual(tokenFor({ kind: "unix", path: "/s" }, { env, readFile: files({}) }), {});
  });

  it("reads the file the server wrote for that port, then the configured file", () => {
    const read = files({ "/run/user/1000/agentls/tcp-2087.token": "abc123\n", "/home/u/t": "from-setting" });
    assert.deepEqual(tokenFor(tcp, { env, readFile: read }), { token: "abc123" });
    assert.deepEqual(tokenFor(tcp, { env, readFile: read, tokenFile: "/home/u/t" }), { token: "from-setting" });
  });

  it("falls back to AGENTLS_TOKEN, and says where it looked when there is none", () => {
    assert.deepEqual(tokenFor(tcp, { env: { ...env, AGENTLS_TOKEN: "envtoken" }, readFile: files({}) }), { token: "envtoken" });
    const missing = tokenFor(tcp, { env, readFile: files({}) });
    assert.equal(missing.token, undefined);
    assert.match(missing.error ?? "", /tcp-2087\.token cannot be read, and \$AGENTLS_TOKEN is not set/);
  });
});

describe("withToken", () => {
  it("adds agentlsToken to initializationOptions only when there is one", () => {
    assert.deepEqual(withToken({}, "t"), { agentlsToken: "t" });
    assert.deepEqual(withToken({ a: 1 }, undefined), { a: 1 });
  });
});

describe("checkSocketPath", () => {
  const me = 1000;
  const dir = (uid: number, mode: number): FileInfo => ({ uid, mode, isDirectory: true, isSocket: false, isSymbolicLink: false });
  const sock = (uid: number, mode: number): FileInfo => ({ uid, mode, isDirectory: false, isSocket: true, isSymbolicLink: false });
  const tree = (map: Record<string, FileInfo>) => ({ lstat: (f: string) => map[f], realpath: (f: string) => f });
  const usual = {
    "/": dir(0, 0o755),
    "/run": dir(0, 0o755),
    "/run/user": dir(0, 0o755),
    "/run/user/1000": dir(me, 0o700),
    "/run/user/1000/agentls": dir(me, 0o700),
    "/run/user/1000/agentls/agentls.sock": sock(me, 0o600),
  };
  const at = "/run/user/1000/agentls/agentls.sock";

  it("accepts the server's socket in the user's runtime folder, and in a sticky /tmp", () => {
    assert.equal(checkSocketPath(at, me, tree(usual)), undefined);
    const tmp = { "/": dir(0, 0o755), "/tmp": dir(0, 0o1777), "/tmp/runtime-1000": dir(me, 0o700),
      "/tmp/runtime-1000/agentls": dir(me, 0o700), "/tmp/runtime-1000/agentls/agentls.sock": sock(me, 0o600) };
    assert.equal(checkSocketPath("/tmp/runtime-1000/agentls/agentls.sock", me, tree(tmp)), undefined);
  });

  it("refuses a socket another user owns, or that others can write", () => {
    assert.match(checkSocketPath(at, me, tree({ ...usual, [at]: sock(2000, 0o600) })) ?? "", /belongs to another user \(uid 2000\).*fake server/);
    assert.match(checkSocketPath(at, me, tree({ ...usual, [at]: sock(me, 0o666) })) ?? "", /writable by other users \(mode 666\)/);
  });

  it("refuses a folder on the way that another user owns or can write", () => {
    assert.match(checkSocketPath(at, me, tree({ ...usual, "/run/user/1000/agentls": dir(2000, 0o700) })) ?? "", /socket's folder, belongs to another user/);
    assert.match(checkSocketPath(at, me, tree({ ...usual, "/run/user/1000/agentls": dir(me, 0o1777) })) ?? "", /socket's folder, is writable/);
    assert.match(checkSocketPath(at, me, tree({ ...usual, "/run/user/1000": dir(me, 0o777) })) ?? "", /\/run\/user\/1000 is writable by other users \(mode 777\)/);
    assert.match(checkSocketPath(at, me, tree({ ...usual, "/run/user": dir(2000, 0o755) })) ?? "", /\/run\/user belongs to another user/);
  });

  it("checks the resolved folders too", () => {
    const linked = { ...usual, "/run/user/1000/agentls": { ...dir(me, 0o777), isDirectory: false, isSymbolicLink: true },
      "/shared": dir(0, 0o777), "/shared/agentls": dir(me, 0o700) };
    const lookups = { lstat: (f: string) => (linked as Record<string, FileInfo>)[f], realpath: (f: string) => (f === "/run/user/1000/agentls" ? "/shared/agentls" : f) };
    assert.match(checkSocketPath(at, me, lookups) ?? "", /\/shared is writable by other users/);
  });

  it("refuses a real socket in a folder others can write (node's own lookups)", async () => {
    if (typeof process.getuid !== "function") return;
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-sock-"));
    const open = path.join(base, "open");
    fs.mkdirSync(open, { mode: 0o700 });
    const file = path.join(open, "agentls.sock");
    const server = net.createServer().listen(file);
    await new Promise((resolve) => server.once("listening", resolve));
    try {
      fs.chmodSync(file, 0o600);
      assert.equal(checkSocketPath(file, process.getuid()), undefined);
      fs.chmodSync(open, 0o777);
      assert.match(checkSocketPath(file, process.getuid()) ?? "", /the socket's folder, is writable by other users \(mode 777\)/);
    } finally {
      server.close();
      fs.rmSync(base, { recursive: true, force: true });
    }
  });
});
