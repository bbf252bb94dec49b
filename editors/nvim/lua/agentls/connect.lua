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

--- The server's runtime folder, by the server's one rule (docs/security.md):
--- $XDG_RUNTIME_DIR/agentls, else /run/user/UID/agentls when /run/user/UID
--- is a folder, else /tmp/runtime-UID/agentls.
function M.runtime_dir()
  local xdg = vim.env.XDG_RUNTIME_DIR
  if xdg and vim.trim(xdg) ~= "" then
    return vim.fs.joinpath(vim.trim(xdg), "agentls")
  end
  local uid = vim.uv.getuid and vim.uv.getuid()
  if not uid then
    return nil
  end
  local run_user = "/run/user/" .. uid
  local info = vim.uv.fs_stat(run_user)
  local base = (info and info.type == "directory") and run_user or ("/tmp/runtime-" .. uid)
  return base .. "/agentls"
end
local runtime_dir = M.runtime_dir

local STICKY, GROUP_OTHER_WRITE = 512, 18 -- 0o1000, 0o022

--- Before connecting to a Unix socket, the server's own check (OpenSSH's for
--- its paths): the socket and its folder belong to this user and nobody else
--- can write them; every folder above, as written and as resolved, belongs to
--- this user or root and is writable by nobody else unless it is sticky like
--- /tmp. Otherwise another user could have put a fake server there.
--- Returns an error message, or nil when it is safe.
function M.check_socket(path)
  local uid = vim.uv.getuid and vim.uv.getuid()
  if not uid then
    return nil
  end
  local advice = "; start `agentls --socket` in a folder only you can write"
  local function octal(mode)
    return ("%o"):format(bit.band(mode, 4095))
  end
  local own = vim.uv.fs_lstat(path)
  if not own then
    return nil -- nothing there: connecting fails with its own error
  end
  if own.type ~= "socket" then
    return ("agentls: %s is not a socket%s"):format(path, advice)
  end
  if own.uid ~= uid then
    return ("agentls: %s belongs to another user (uid %d), not you: it may be a fake server%s"):format(
      path,
      own.uid,
      advice
    )
  end
  if bit.band(own.mode, GROUP_OTHER_WRITE) ~= 0 then
    return ("agentls: %s is writable by other users (mode %s)%s"):format(path, octal(own.mode), advice)
  end
  local folder = vim.fs.dirname(vim.fs.normalize(vim.fn.fnamemodify(path, ":p")))
  local seen = {}
  for _, start in ipairs({ folder, vim.uv.fs_realpath(folder) or folder }) do
    local each, first = start, true
    while each do
      if not seen[each] then
        seen[each] = true
        local info = vim.uv.fs_lstat(each)
        if info and info.type ~= "link" then
          local what = first and (each .. ", the socket's folder,") or each
          if info.uid ~= uid and (first or info.uid ~= 0) then
            return ("agentls: %s belongs to another user (uid %d)%s"):format(what, info.uid, advice)
          end
          if bit.band(info.mode, GROUP_OTHER_WRITE) ~= 0 and (first or bit.band(info.mode, STICKY) == 0) then
            return ("agentls: %s is writable by other users (mode %s)%s"):format(what, octal(info.mode), advice)
          end
        end
      end
      local parent = vim.fs.dirname(each)
      each = parent ~= each and parent or nil
      first = false
    end
  end
  return nil
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
        return nil, "agentls: connect = 'unix' needs $XDG_RUNTIME_DIR or a uid; give the path: 'unix:/path/agentls.sock'"
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
    local connect = vim.lsp.rpc.connect(target.path)
    return function(dispatchers)
      -- Checked at each start: who owns the socket can change while Neovim runs.
      local unsafe = M.check_socket(target.path)
      if unsafe then
        vim.notify(unsafe, vim.log.levels.ERROR)
        error(unsafe, 0)
      end
      return connect(dispatchers)
    end
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
