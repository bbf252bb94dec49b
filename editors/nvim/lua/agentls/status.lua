-- What the statusline shows: provider, model, busy/idle, the session's tokens.
-- Fed by agentls/status (on attach and after every turn), didChangeStatus
-- (Copilot's notification: { busy, kind, message }), $/progress of chat turns
-- and of the server's own long work (model downloads and loads, tokens
-- "agentls-progress-N"), and the chat module's running turns.
local M = {}

M.state = {
  provider = nil, -- display name
  model = nil,
  busy = 0, -- running chat turns
  server_busy = false, -- from didChangeStatus
  kind = nil, -- didChangeStatus kind: Normal, Error, Warning, Inactive
  message = nil, -- progress or status message
  sessions = {}, -- session_id -> SessionStatus
  completions = nil,
  error = nil,
  pending_trust = nil, -- workspace-file keys ignored until the user trusts the file
  work = {}, -- server-initiated progress token -> { title, percentage, message }
  mcp = {}, -- agentls/status `mcp`: { name, state, tools, error? } per MCP server
}

local poll_scheduled = false

local function redraw()
  vim.schedule(function()
    pcall(vim.cmd.redrawstatus, { bang = true })
  end)
end

function M.apply(result)
  local s = M.state
  local provider = result.provider or {}
  s.provider = provider.display_name or provider.id
  s.provider_id = provider.id
  s.error = provider.error
  s.model = result.model ~= vim.NIL and result.model or nil
  s.completions = result.completions
  local trust = result.workspaceTrust
  if type(trust) == "table" and type(trust.pendingKeys) == "table" and #trust.pendingKeys > 0 then
    s.pending_trust = { file = trust.file, state = trust.state, keys = trust.pendingKeys }
  else
    s.pending_trust = nil
  end
  for _, session in ipairs(result.sessions or {}) do
    s.sessions[session.session_id] = session
  end
  s.mcp = type(result.mcp) == "table" and result.mcp or {}
  redraw()
end

--- MCP servers start in the background after attach: while one is still
--- starting, ask again every second so a failure reaches the statusline.
local function poll_while_starting(client)
  local starting = false
  for _, server in ipairs(M.state.mcp) do
    if server.state == "starting" then
      starting = true
    end
  end
  if not starting or poll_scheduled then
    return
  end
  poll_scheduled = true
  vim.defer_fn(function()
    poll_scheduled = false
    M.refresh(client)
  end, 1000)
end

--- The MCP servers that failed (names), for the statusline and checkhealth.
function M.failed_mcp()
  local names = {}
  for _, server in ipairs(M.state.mcp) do
    if server.state == "failed" then
      table.insert(names, server.name)
    end
  end
  return names
end

--- Asks the server for agentls/status and updates the statusline.
function M.refresh(client, done)
  if not client or client:is_stopped() then
    return
  end
  client:request("agentls/status", vim.empty_dict(), function(err, result)
    if not err and type(result) == "table" then
      M.apply(result)
      poll_while_starting(client)
    end
    if done then
      done(err, result)
    end
  end)
end

function M.turn_started()
  M.state.busy = M.state.busy + 1
  redraw()
end

function M.turn_ended()
  M.state.busy = math.max(0, M.state.busy - 1)
  if M.state.busy == 0 then
    M.state.message = nil
  end
  redraw()
end

--- Handler for the server's didChangeStatus notification.
function M.on_did_change_status(_, params)
  if type(params) ~= "table" then
    return
  end
  M.state.server_busy = params.busy == true
  M.state.kind = params.kind
  if params.message and params.message ~= "" then
    M.state.message = params.message
  end
  redraw()
end

--- LspProgress autocmd: the chat turns' workDone progress ("Calling model", ...)
--- and the server's downloads and model loads ("Downloading hf:... 42%").
function M.on_progress(ev)
  local params = ev.data and ev.data.params
  local value = params and params.value
  if type(value) ~= "table" then
    return
  end
  local token = params.token
  if type(token) == "string" and token:find("^agentls%-progress%-") then
    if value.kind == "end" then
      M.state.work[token] = nil
    else
      local work = M.state.work[token] or {}
      work.title = value.title or work.title
      work.percentage = value.percentage or work.percentage
      work.message = value.message or work.message
      M.state.work[token] = work
    end
    redraw()
    return
  end
  if value.kind == "end" then
    M.state.message = nil
  elseif value.message then
    M.state.message = value.message
  end
  redraw()
end

local function tokens_of(session)
  return (session.total_input_tokens or 0) + (session.total_output_tokens or 0)
end

local function human(n)
  if n >= 10000 then
    return ("%.1fk"):format(n / 1000)
  end
  return tostring(n)
end

--- The statusline component: "agentls: <provider> · <model> · idle|<activity> · <n> tok".
--- Empty when no agentls client runs.
---@return string
function M.statusline()
  if #vim.lsp.get_clients({ name = "agentls" }) == 0 then
    return ""
  end
  local s = M.state
  local parts = { s.provider or "…" }
  if s.model then
    table.insert(parts, s.model)
  end
  if s.kind == "Error" and s.message then
    table.insert(parts, "error: " .. s.message)
  elseif s.error then
    table.insert(parts, "error: " .. tostring(s.error):sub(1, 60))
  elseif next(s.work) then
    local _, work = next(s.work)
    local pct = work.percentage and (" " .. work.percentage .. "%") or ""
    table.insert(parts, "⟳ " .. (work.title or "working") .. pct)
  elseif s.busy > 0 or s.server_busy then
    table.insert(parts, "⟳ " .. (s.message or "busy"))
  else
    table.insert(parts, "idle")
  end
  if s.pending_trust then
    table.insert(parts, ("untrusted .agentls.toml (%d key%s ignored)"):format(
      #s.pending_trust.keys, #s.pending_trust.keys == 1 and "" or "s"))
  end
  local failed = M.failed_mcp()
  if #failed > 0 then
    table.insert(parts, "MCP failed: " .. table.concat(failed, ", "))
  end
  local current = require("agentls.chat").current_session()
  local session = current and s.sessions[current]
  if session then
    table.insert(parts, human(tokens_of(session)) .. " tok")
  end
  return "agentls: " .. table.concat(parts, " · ")
end

return M
