-- Connecting to an agentls server that is already running (docs/security.md,
-- "Connecting to a running server") instead of starting one on stdio:
--
--   connect = "unix"                   -- the socket of `agentls --socket`
--   connect = "unix:/path/agentls.sock"
--   connect = "tcp:127.0.0.1:2087"     -- `agentls --tcp`; needs its token
--   token_file = "/run/user/1000/agentls/tcp-2087.token"  -- optional
--
-- Over TCP the token goes in initializationOptions.agentlsToken; it is read
-- when the client starts from `token_file`, else the file the server wrote
-- for that port ($XDG_RUNTIME_DIR/agentls/tcp-PORT.token), else $AGENTLS_TOKEN.
local M = {}

M.TOKEN_OPTION = "agentlsToken"

local function runtime_dir()
  local xdg = vim.env.XDG_RUNTIME_DIR
  if xdg and vim.trim(xdg) ~= "" then
    return vim.fs.joinpath(vim.trim(xdg), "agentls")
  end
  local uid = vim.uv.getuid and vim.uv.getuid()
  return uid and ("/run/user/" .. uid .. "/agentls") or nil
end

--- "unix" | "unix:PATH" | "tcp:HOST:PORT" -> { kind, path | host, port } or nil, error
---@param value string
function M.parse(value)
  local text = vim.trim(value or "")
  if text == "unix" or vim.startswith(text, "unix:") then
    local path = vim.trim(text:sub(6))
    if path == "" then
      local dir = runtime_dir()
      if not dir then
        return nil, "agentls: connect = 'unix' needs $XDG_RUNTIME_DIR; give the path: 'unix:/path/agentls.sock'"
      end
      path = vim.fs.joinpath(dir, "agentls.sock")
    end
    return { kind = "unix", path = vim.fs.normalize(path) }
  end
  local host, port = text:match("^tcp:%[([^%]]+)%]:(%d+)$")
  if not host then
    host, port = text:match("^tcp:([^:]+):(%d+)$")
  end
  port = tonumber(port)
  if host and port and port >= 1 and port <= 65535 then
    return { kind = "tcp", host = host, port = port }
  end
  return nil,
    ("agentls: connect = %q; use 'unix', 'unix:/path/agentls.sock' or 'tcp:127.0.0.1:PORT'"):format(text)
end

local function read_token(file)
  local handle = io.open(file, "r")
  if not handle then
    return nil
  end
  local token = vim.trim(handle:read("*a") or "")
  handle:close()
  return token ~= "" and token or nil
end

--- The token for a TCP target, or nil and where it looked.
function M.token(target, token_file)
  local file = token_file and vim.fs.normalize(token_file)
  if not file then
    local dir = runtime_dir()
    file = dir and vim.fs.joinpath(dir, ("tcp-%d.token"):format(target.port))
  end
  local token = file and read_token(file)
  if token then
    return token
  end
  local from_env = vim.env.AGENTLS_TOKEN
  if from_env and vim.trim(from_env) ~= "" then
    return vim.trim(from_env)
  end
  return nil,
    ("agentls: no token for %s:%d: %s cannot be read and $AGENTLS_TOKEN is not set"):format(
      target.host,
      target.port,
      file or "no token file"
    )
end

--- The client's `cmd` for a target (vim.lsp.rpc.connect).
function M.cmd(target)
  if target.kind == "unix" then
    return vim.lsp.rpc.connect(target.path)
  end
  return vim.lsp.rpc.connect(target.host, target.port)
end

--- before_init for vim.lsp.config: adds the token to initializationOptions
--- right before `initialize` is sent (the server may have started after setup()).
function M.before_init(target, token_file)
  return function(params)
    if target.kind ~= "tcp" then
      return
    end
    local token, err = M.token(target, token_file)
    if not token then
      vim.notify(err, vim.log.levels.ERROR)
      return
    end
    params.initializationOptions = vim.tbl_extend("force", params.initializationOptions or {}, {
      [M.TOKEN_OPTION] = token,
    })
  end
end

return M
