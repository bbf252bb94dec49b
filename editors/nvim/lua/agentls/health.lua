-- :checkhealth agentls — Neovim version, the server binary and its version,
-- provider reachability (`agentls check` with this plugin's settings), and the
-- running client.
local M = {}

local health = vim.health

-- Settings objects (docs/protocol.md, Configuration) whose keys become AGENTLS_<NODE>__<KEY>.
local NESTED = { inlineCompletion = true, approval = true, session = true, features = true }

local function env_name(key)
  return (key:gsub("(%l)(%u)", "%1_%2"):upper())
end

--- The plugin's agentls settings as AGENTLS_* environment variables, so that
--- `agentls check` checks what the editor's server runs with.
function M.settings_env(settings)
  local env = {}
  local function put(prefix, value)
    if type(value) == "table" then
      value = vim.json.encode(value)
    end
    env["AGENTLS_" .. prefix] = tostring(value)
  end
  for key, value in pairs(settings or {}) do
    if NESTED[key] and type(value) == "table" and not vim.islist(value) then
      for sub, subvalue in pairs(value) do
        put(env_name(key) .. "__" .. env_name(sub), subvalue)
      end
    else
      put(env_name(key), value)
    end
  end
  return env
end

local function run(argv, opts)
  local ok, proc = pcall(vim.system, argv, vim.tbl_extend("force", { text = true }, opts or {}))
  if not ok then
    return nil, tostring(proc)
  end
  local result = proc:wait(opts and opts.timeout or 60000)
  return result
end

function M.check()
  local config = require("agentls.config")
  local configured = vim.lsp.config and vim.lsp.config.agentls ~= nil
  local options = configured and config.options or config.set({})

  health.start("agentls: Neovim")
  local v = vim.version()
  if vim.fn.has("nvim-0.12") == 1 and require("agentls.inline").available() then
    health.ok(("Neovim %s: LSP client, inline completion (vim.lsp.inline_completion)"):format(v))
  elseif vim.fn.has("nvim-0.11") == 1 then
    health.warn(("Neovim %s: chat and approvals work; inline completion needs 0.12+"):format(v))
  else
    health.error(("Neovim %s is too old: agentls needs 0.11+ (vim.lsp.config)"):format(v))
  end
  if configured then
    health.ok("require('agentls').setup() was called")
  else
    health.warn("require('agentls').setup() has not been called; checking the defaults",
      { "Call require('agentls').setup({}) in your config (see :help agentls or editors/nvim/README.md)" })
  end

  health.start("agentls: server")
  if options.connect_target then
    local target = options.connect_target
    health.info(("connects to a running server: %s"):format(
      target.kind == "unix" and target.path or (target.host .. ":" .. target.port)))
  end
  local cmd = options.cmd
  local exe = cmd[1]
  local path = vim.fn.exepath(exe)
  if path == "" then
    health.error(("server binary not found: %s"):format(exe), {
      "Install it: pip install agentls (or ./install.sh in a checkout), then put its venv's bin on $PATH",
      "or pass the path: require('agentls').setup({ cmd = { '/path/to/.venv/bin/agentls' } })",
    })
    return
  end
  health.ok("server binary: " .. path)
  local version = run({ path, "--version" }, { timeout = 15000 })
  if version and version.code == 0 then
    health.ok("server version: " .. vim.trim(version.stdout or ""))
  else
    health.error("`" .. path .. " --version` failed: " .. vim.trim(version and (version.stderr or "") or ""))
    return
  end

  health.start("agentls: provider (agentls check)")
  local root = require("agentls.client").root_for(vim.api.nvim_get_current_buf())
  local env = vim.tbl_extend("force", options.cmd_env or {}, M.settings_env(config.agentls_settings()))
  local result, err = run({ path, "check", "--workspace", root }, { env = env, cwd = root, timeout = 90000 })
  if not result then
    health.error("cannot run `agentls check`: " .. tostring(err))
    return
  end
  local output = vim.trim((result.stdout or "") .. "\n" .. (result.stderr or ""))
  for _, line in ipairs(vim.split(output, "\n", { plain = true })) do
    if line ~= "" then
      health.info(line)
    end
  end
  if result.code == 0 then
    health.ok("the provider answered (agentls check exited 0)")
  elseif result.signal and result.signal ~= 0 or result.code == 124 then
    health.error("agentls check did not finish in time")
  else
    health.error(("agentls check failed (exit %d)"):format(result.code), {
      "Fix what it printed above: the provider settings in setup({ settings = ... }), .agentls.toml or AGENTLS_* variables",
    })
  end

  health.start("agentls: client")
  local clients = vim.lsp.get_clients({ name = "agentls" })
  if #clients == 0 then
    health.info("no agentls client is running (it starts when a file is opened)")
  end
  for _, client in ipairs(clients) do
    local folders = {}
    for _, folder in ipairs(client.workspace_folders or {}) do
      table.insert(folders, vim.uri_to_fname(folder.uri))
    end
    health.ok(("client %d running; workspace: %s; %d buffer(s) attached"):format(
      client.id, table.concat(folders, ", "), vim.tbl_count(client.attached_buffers)))
    local answer = client:request_sync("agentls/status", vim.empty_dict(), 5000)
    local trust = answer and answer.result and answer.result.workspaceTrust
    if type(trust) == "table" and type(trust.pendingKeys) == "table" and #trust.pendingKeys > 0 then
      local why = trust.state == "refused" and "you chose not to trust it" or "it is not trusted yet"
      health.warn(("%s sets %s; they are ignored because %s"):format(
        trust.file, table.concat(trust.pendingKeys, ", "), why), {
        "Review the file, then answer Trust when the editor asks, or run `agentls trust` in the workspace",
      })
    elseif type(trust) == "table" and trust.state == "trusted" then
      health.ok(trust.file .. " is trusted (this content)")
    end
    local servers = answer and answer.result and answer.result.mcp
    for _, server in ipairs(type(servers) == "table" and servers or {}) do
      local tools = type(server.tools) == "table" and #server.tools or 0
      local error = type(server.error) == "string" and server.error or ""
      if server.state == "ready" then
        health.ok(("MCP server %s: ready, %d tool(s)"):format(server.name, tools))
      elseif server.state == "failed" then
        health.error(("MCP server %s failed: %s"):format(server.name, error), {
          "Check its command/url in mcpServers (or .mcp.json); `agentls check` starts it once and prints its error",
        })
      else
        health.info(("MCP server %s: %s %s"):format(server.name, server.state, error))
      end
    end
  end
end

return M
