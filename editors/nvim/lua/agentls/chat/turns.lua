-- Turns and the commands that start them: sending a prompt (agentls/chat
-- with a workDoneToken), cancelling, compacting, new and resumed sessions,
-- and :AgentChat's selection context.
local client_mod = require("agentls.client")
local geometry = require("agentls.chat.geometry")
local render = require("agentls.chat.render")
local state = require("agentls.chat.state")
local status = require("agentls.status")
local windows = require("agentls.chat.windows")

local M = {}

local api = vim.api
local progress_tokens = 0

--- Sends `prompt` (default: the input area) as the next turn of the chat's session.
function M.submit(chat, prompt, context)
  prompt = prompt or geometry.input_text(chat)
  if prompt == "" then
    vim.notify("agentls: type a prompt below the separator first", vim.log.levels.WARN)
    return
  end
  if chat.busy then
    vim.notify("agentls: a turn is running in this chat; :AgentCancel stops it", vim.log.levels.WARN)
    return
  end
  local client = vim.lsp.get_client_by_id(chat.client_id)
  if not client or client:is_stopped() then
    vim.notify("agentls: the server is not running", vim.log.levels.ERROR)
    return
  end
  if prompt == geometry.input_text(chat) then
    geometry.clear_input(chat)
  end
  context = context or chat.context
  chat.context = nil
  progress_tokens = progress_tokens + 1
  local params = {
    sessionId = chat.session_id,
    prompt = prompt,
    context = context,
    workDoneToken = ("agentls-chat-%d"):format(progress_tokens),
  }
  chat.busy = true
  state.current = chat.session_id
  status.turn_started()
  local ok, request_id = client:request("agentls/chat", params, function(err, result)
    chat.busy = false
    chat.request_id = nil
    status.turn_ended()
    if not api.nvim_buf_is_valid(chat.buf) then
      return
    end
    if err then
      render.note(chat, "✗ " .. (err.message or vim.inspect(err)))
    elseif type(result) == "table" and result.status ~= "completed" then
      local message = type(result.error) == "table" and result.error.message or ""
      if result.status == "cancelled" then
        render.note(chat, "⏹ cancelled")
      else
        render.note(chat, "✗ turn failed: " .. tostring(message))
      end
    end
    -- A failed turn may leave a streamed block that never got its final message.
    for _, block in pairs(chat.blocks) do
      block.live = false
    end
    status.refresh(client)
    api.nvim_exec_autocmds("User", { pattern = "AgentlsTurnDone", modeline = false,
      data = { sessionId = chat.session_id, status = result and result.status or "error" } })
  end, chat.buf)
  if not ok then
    chat.busy = false
    status.turn_ended()
    vim.notify("agentls: cannot send the prompt (the server stopped?)", vim.log.levels.ERROR)
    return
  end
  chat.request_id = request_id
end

function M.cancel(chat)
  chat = chat or state.get()
  local client = chat and vim.lsp.get_client_by_id(chat.client_id) or client_mod.get()
  if not client then
    vim.notify("agentls: no server is running", vim.log.levels.WARN)
    return
  end
  local args = chat and { chat.session_id } or {}
  client_mod.command(client, "agentls.cancel", args, function(result)
    local cancelled = type(result) == "table" and result.cancelled or {}
    if #cancelled == 0 then
      vim.notify("agentls: no turn is running", vim.log.levels.INFO)
    end
  end)
end

--- :AgentCompact — summarise the chat's earlier turns (agentls/compact). The
--- summary arrives as an agentls/message notification and is shown folded.
function M.compact(chat)
  chat = chat or state.get()
  local client = chat and vim.lsp.get_client_by_id(chat.client_id)
  if not chat or not client then
    vim.notify("agentls: no chat to compact", vim.log.levels.WARN)
    return
  end
  render.note(chat, "… compacting")
  client_mod.request(client, "agentls/compact", { sessionId = chat.session_id }, function(result)
    if type(result) ~= "table" then
      return
    end
    if result.error and result.error ~= vim.NIL then
      render.note(chat, "✗ compaction failed: " .. tostring(result.error.message or ""))
    elseif not result.compacted then
      render.note(chat, "ℹ " .. tostring(result.reason or "nothing to compact"))
    end
  end)
end

local function new_session(client, fn)
  client_mod.command(client, "agentls.newSession", {}, function(result)
    if type(result) ~= "table" or type(result.sessionId) ~= "string" then
      vim.notify("agentls: agentls.newSession gave no sessionId", vim.log.levels.ERROR)
      return
    end
    fn(windows.create(client, result.sessionId))
  end)
end

--- Selection context of a command range in the current buffer, or nil.
local function range_context(opts)
  if not opts or (opts.range or 0) == 0 then
    return nil
  end
  local buf = api.nvim_get_current_buf()
  if vim.bo[buf].filetype == "agentls-chat" then
    return nil
  end
  local l1, l2 = opts.line1, opts.line2
  local start_col, end_col = 0, nil
  local vs, ve = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  if vim.fn.visualmode() == "v" and vs[2] == l1 and ve[2] == l2 then
    start_col, end_col = vs[3] - 1, ve[3] -- end column: inclusive byte -> exclusive
  end
  local function utf16(row, col)
    local line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ""
    col = math.min(col, #line)
    local ok, idx = pcall(vim.str_utfindex, line, "utf-16", col, false)
    return ok and idx or col
  end
  local last = api.nvim_buf_get_lines(buf, l2 - 1, l2, false)[1] or ""
  if end_col then
    -- include the whole last (multibyte) character
    local char_end = vim.str_utf_end(last, math.min(end_col, #last))
    end_col = math.min(#last, end_col + char_end)
  else
    end_col = #last
  end
  return {
    uri = vim.uri_from_bufnr(buf),
    range = {
      start = { line = l1 - 1, character = utf16(l1 - 1, start_col) },
      ["end"] = { line = l2 - 1, character = utf16(l2 - 1, end_col) },
    },
  }
end

--- :AgentChat [prompt] — opens (or reuses) the chat and sends the prompt.
function M.command(opts)
  local prompt = vim.trim(opts and opts.args or "")
  local context = range_context(opts)
  client_mod.with_client(function(client)
    local function go(chat)
      windows.show(chat)
      if prompt ~= "" then
        M.submit(chat, prompt, context)
      else
        if context then
          chat.context = context
          render.note(chat, ("↳ the next prompt carries the selection %s:%d-%d"):format(
            render.short_path(context.uri), context.range.start.line + 1, context.range["end"].line + 1))
        end
        local win = api.nvim_get_current_win()
        pcall(api.nvim_win_set_cursor, win, { api.nvim_buf_line_count(chat.buf), 0 })
      end
    end
    local chat = state.get()
    if chat then
      go(chat)
    else
      new_session(client, go)
    end
  end)
end

--- :AgentNew — a new session in the chat window.
function M.new()
  client_mod.with_client(function(client)
    new_session(client, function(chat)
      windows.show(chat)
    end)
  end)
end

--- Loads a stored session's transcript into its chat buffer (agentls/session).
function M.resume(client, session_id, done)
  client_mod.request(client, "agentls/session", { sessionId = session_id }, function(session)
    local chat = state.get(session_id)
    if not chat then
      chat = windows.create(client, session_id)
      for index, message in ipairs(type(session) == "table" and session.messages or {}) do
        render.show_message(chat, index - 1, message)
      end
    end
    windows.show(chat)
    if done then
      done(chat)
    end
  end)
end

--- :AgentSessions — pick a stored session with vim.ui.select and resume it.
function M.sessions()
  client_mod.with_client(function(client)
    client_mod.request(client, "agentls/sessions", vim.empty_dict(), function(result)
      local sessions = type(result) == "table" and result.sessions or {}
      if #sessions == 0 then
        vim.notify("agentls: no stored sessions yet; :AgentChat starts one", vim.log.levels.INFO)
        return
      end
      vim.ui.select(sessions, {
        prompt = "agentls sessions",
        kind = "agentls.session",
        format_item = function(s)
          local title = (s.title and s.title ~= vim.NIL and s.title ~= "") and s.title or "(empty)"
          local when = type(s.updatedAt) == "string" and s.updatedAt:sub(1, 16):gsub("T", " ") or ""
          local st = type(s.status) == "table" and s.status or {}
          local tokens = (st.total_input_tokens or 0) + (st.total_output_tokens or 0)
          return ("%s  [%s · %d tok · %s]"):format(title, when, tokens, s.sessionId:sub(1, 8))
        end,
      }, function(choice)
        if choice then
          M.resume(client, choice.sessionId)
        end
      end)
    end)
  end)
end

return M
