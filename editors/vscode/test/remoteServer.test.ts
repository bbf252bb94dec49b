import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseConnect, tokenFor, withToken } from "../src/remoteServer";

const env = { XDG_RUNTIME_DIR: "/run/user/1000" };

describe("parseConnect", () => {
  it("is undefined when empty: the extension starts the server", () => {
    assert.equal(parseConnect("", env), undefined);
    assert.equal(parseConnect(undefined, env), undefined);
  });

  it("takes the server's default socket for `unix`, or the path given", () => {
    assert.deepEqual(parseConnect("unix", env), { target: { kind: "unix", path: "/run/user/1000/agentls/agentls.sock" } });
    assert.deepEqual(parseConnect("unix:/tmp/me/a.sock", env), { target: { kind: "unix", path: "/tmp/me/a.sock" } });
    assert.deepEqual(parseConnect("unix", {}, 42), { target: { kind: "unix", path: "/run/user/42/agentls/agentls.sock" } });
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
  const tcp = { kind: "tcp" as const, host: "127.0.0.1", port: 2087 };
  const files = (map: Record<string, string>) => (file: string) => {
    if (!(file in map)) throw new Error("ENOENT");
    return map[file];
  };

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
