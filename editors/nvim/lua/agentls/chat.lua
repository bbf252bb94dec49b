-- The chat buffer: agentls://chat/<sessionId>, filetype agentls-chat.
--
-- The buffer is a transcript followed by an input area. The transcript is
-- rendered from agentls/messageDelta (streamed text, appended as it arrives)
-- and agentls/message (each final message replaces its streamed block); tool
-- calls and results are folded. The input area starts at an extmark with a
-- virtual separator above it; <CR> (normal mode) or <C-s> (insert mode)
-- sends what is typed there. The buffer is attached to the server as an
-- `agentls-chat` document, so `@file:` and `/template` completion work in it.
local client_mod = require("agentls.client")
local status = require("agentls.status")

local M = {}

local api = vim.api
local ns_input = api.nvim_create_namespace("agentls.chat.input")
local ns_blocks = api.nvim_create_namespace("agentls.chat.blocks")

---@class agentls.Chat
---@field session_id string
---@field buf integer
---@field client_id integer
---@field busy boolean
---@field request_id integer?
---@field blocks table<integer, {mark: integer, live: boolean, kind: string?}>
---@field context table? selection context for the next prompt
---@field input_mark integer

---@type table<string, agentls.Chat>
M.chats = {}
M.current = nil ---@type string?
local progress_tokens = 0

function M.current_session()
  return M.current
end

function M.get(session_id)
  local chat = M.chats[session_id or M.current or ""]
  if chat and api.nvim_buf_is_valid(chat.buf) then
    return chat
  end
  return nil
end

local function options()
  return require("agentls.config").options.chat
end

-- Transcript geometry --------------------------------------------------------

--- Row of the first input line (0-based); the transcript is every row above it.
local function input_row(chat)
  local pos = api.nvim_buf_get_extmark_by_id(chat.buf, ns_input, chat.input_mark, {})
  if not pos or not pos[1] then
    return api.nvim_buf_line_count(chat.buf)
  end
  return pos[1]
end

local function place_input_mark(chat, row)
  local hint = " <CR> send · <C-c> cancel · @file: mention · /template "
  chat.input_mark = api.nvim_buf_set_extmark(chat.buf, ns_input, row, 0, {
    id = chat.input_mark,
    right_gravity = false,
    virt_lines = {
      { { ("─"):rep(4) .. " prompt ·" .. hint .. ("─"):rep(20), "AgentlsChatSeparator" } },
    },
    virt_lines_above = true,
  })
end

--- Inserts lines at the end of the transcript; returns the first row used.
local function append_lines(chat, lines)
  local row = input_row(chat)
  api.nvim_buf_set_lines(chat.buf, row, row, false, lines)
  -- The mark does not move with text inserted at its row (right_gravity=false
  -- keeps the separator above the typed text), so move it explicitly.
  place_input_mark(chat, row + #lines)
  return row
end

local function replace_transcript_tail(chat, from_row, lines)
  local row = input_row(chat)
  api.nvim_buf_set_lines(chat.buf, from_row, row, false, lines)
  place_input_mark(chat, from_row + #lines)
end

-- Rendering ------------------------------------------------------------------

local function text_lines(text)
  if type(text) ~= "string" then
    text = text == nil and "" or vim.json.encode(text)
  end
  return vim.split(text, "\n", { plain = true })
end

local function indent(lines, prefix, max)
  local out = {}
  for i, line in ipairs(lines) do
    if max and i > max then
      table.insert(out, prefix .. ("… %d more lines"):format(#lines - max))
      break
    end
    table.insert(out, prefix .. line)
  end
  return out
end

local function json_lines(value)
  local ok, encoded = pcall(vim.json.encode, value)
  return text_lines(ok and encoded or vim.inspect(value))
end

local function short_path(uri)
  local path = vim.uri_to_fname(uri)
  return vim.fn.fnamemodify(path, ":~:.")
end

--- The lines of one final message. `seen` (per chat) holds the project
--- instruction files already shown for the current prompt, so a subfolder's
--- file that joins mid-turn is named once, under the reply that used it.
---@return string[]
function M.render_message(message, seen)
  local lines = {}
  local meta = type(message.metadata) == "table" and message.metadata or {}
  local function add(list)
    vim.list_extend(lines, list)
  end
  local function folded(header, body)
    -- A multi-line header (a preview) keeps its first line; the rest joins the body.
    local head = text_lines(header)
    table.insert(lines, head[1])
    add(indent(vim.list_slice(head, 2), "    ", 400))
    add(body)
  end

  local instructions = type(meta.instructions) == "table" and meta.instructions or {}
  if meta.source == "compaction" then
    folded("ℹ compacted: earlier turns summarised for the model", indent(text_lines(message.content), "    ", 200))
  elseif meta.source == "hook" then
    local content = text_lines(message.content)
    folded("ℹ hook: " .. (content[1] or ""), indent(vim.list_slice(content, 2), "    ", 200))
  elseif message.role == "user" then
    table.insert(lines, "## You")
    add(text_lines(meta.prompt or message.content))
    local context = type(meta.context) == "table" and meta.context or nil
    if context and context.uri then
      local where = short_path(context.uri)
      if type(context.range) == "table" then
        where = ("%s:%d-%d"):format(where, context.range.start.line + 1, context.range["end"].line + 1)
      end
      table.insert(lines, "↳ selection: " .. where)
    end
    if type(meta.mentions) == "table" and #meta.mentions > 0 then
      table.insert(lines, "↳ attached: " .. table.concat(meta.mentions, ", "))
    end
    if seen then
      for key in pairs(seen) do
        seen[key] = nil
      end
    end
    if #instructions > 0 then
      table.insert(lines, "↳ instructions: " .. table.concat(instructions, ", "))
      for _, file in ipairs(instructions) do
        if seen then
          seen[file] = true
        end
      end
    end
  elseif message.role == "assistant" then
    table.insert(lines, "## agentls")
    local added = {}
    for _, file in ipairs(instructions) do
      if seen and not seen[file] then
        seen[file] = true
        table.insert(added, file)
      end
    end
    if #added > 0 then
      table.insert(lines, "↳ instructions: " .. table.concat(added, ", "))
    end
    local content = message.content
    if content ~= nil and content ~= vim.NIL and content ~= "" then
      add(text_lines(content))
    end
    local previews = type(meta.tool_call_previews) == "table" and meta.tool_call_previews or {}
    for _, call in ipairs(type(meta.tool_calls) == "table" and meta.tool_calls or {}) do
      local name = call.tool or call.name or "tool"
      local preview = type(previews[call.id]) == "string" and previews[call.id] or name
      if preview:find("\n") then
        -- A multi-line preview (the diff of an edit) is the body.
        local args = type(call.arguments) == "table" and call.arguments or {}
        local subject = type(args.path) == "string" and (" " .. args.path) or ""
        folded("▶ tool call: " .. name .. subject, indent(text_lines(preview), "    ", 400))
      else
        folded("▶ tool call: " .. preview, indent(json_lines(call.arguments or {}), "    ", 200))
      end
    end
  elseif message.role == "tool" then
    local result = type(message.toolResult) == "table" and message.toolResult or {}
    local name = meta.tool_name or "tool"
    local ok = result.success ~= false
    local header = ("◀ %s %s"):format(name, ok and "✓" or "✗")
    if not ok and result.error and result.error ~= vim.NIL then
      local err = type(result.error) == "table" and (result.error.message or vim.json.encode(result.error))
        or tostring(result.error)
      header = header .. " " .. (text_lines(err)[1] or "")
    end
    folded(header, indent(text_lines(message.content), "    ", 200))
  else
    return {}
  end
  table.insert(lines, "")
  return lines
end

--- foldexpr of chat windows: a tool call, tool result, hook injection or
--- compaction summary is a header line ("▶ ", "◀ ", "ℹ hook", "ℹ compacted") followed by its body indented by four
--- spaces; each is a fold, closed by default (foldlevel 0). Indented lines
--- elsewhere keep the level of the line above (0), so code in replies is not folded.
function M.foldexpr(lnum)
  local line = vim.fn.getline(lnum or vim.v.lnum)
  if line:find("^▶ ") or line:find("^◀ ") or line:find("^ℹ hook") or line:find("^ℹ compacted") then
    return ">1"
  elseif line:find("^    ") then
    return "="
  end
  return "0"
end

local function scroll_to_end(chat)
  for _, win in ipairs(vim.fn.win_findbuf(chat.buf)) do
    if win ~= api.nvim_get_current_win() then
      local row = input_row(chat)
      pcall(api.nvim_win_set_cursor, win, { math.max(1, row), 0 })
    end
  end
end

--- Shows one final message: replaces its streamed block, or appends it.
function M.show_message(chat, index, message)
  chat.instructions_seen = chat.instructions_seen or {}
  local lines = M.render_message(message, chat.instructions_seen)
  if #lines == 0 then
    return
  end
  local block = index and chat.blocks[index]
  local first
  if block and block.live then
    local pos = api.nvim_buf_get_extmark_by_id(chat.buf, ns_blocks, block.mark, {})
    first = pos[1]
    replace_transcript_tail(chat, first, lines)
    block.live = false
  else
    first = append_lines(chat, lines)
    if index then
      chat.blocks[index] = {
        mark = api.nvim_buf_set_extmark(chat.buf, ns_blocks, first, 0, {}),
        live = false,
      }
    end
  end
  scroll_to_end(chat)
end

--- Appends a streamed delta to the live block of message `index`.
function M.show_delta(chat, index, delta, kind)
  local block = chat.blocks[index]
  if not block then
    local first = append_lines(chat, { "## agentls", "" })
    block = {
      mark = api.nvim_buf_set_extmark(chat.buf, ns_blocks, first, 0, {}),
      live = true,
    }
    chat.blocks[index] = block
  end
  if not block.live then
    return
  end
  if kind == "thinking" then
    delta = delta:gsub("\n", "\n> ")
    if block.kind ~= "thinking" then
      delta = "> " .. delta
    end
  elseif block.kind == "thinking" then
    delta = "\n" .. delta
  end
  block.kind = kind
  local row = input_row(chat) - 1
  local last = api.nvim_buf_get_lines(chat.buf, row, row + 1, false)[1] or ""
  api.nvim_buf_set_text(chat.buf, row, #last, row, #last, vim.split(delta, "\n", { plain = true }))
  place_input_mark(chat, input_row(chat)) -- keep the separator in place
  scroll_to_end(chat)
end

local function note(chat, text)
  append_lines(chat, vim.list_extend(text_lines(text), { "" }))
  scroll_to_end(chat)
end
M.note = note

-- Notification handlers ------------------------------------------------------

local function chat_for_notification(session_id, ctx)
  local chat = M.get(session_id)
  if chat then
    return chat
  end
  -- A turn we did not start (a code action's agentls.chat): show it too.
  local client = ctx and vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return nil
  end
  chat = M.create(client, session_id)
  M.show(chat)
  return chat
end

function M.on_delta(_, params, ctx)
  if type(params) ~= "table" or type(params.sessionId) ~= "string" then
    return
  end
  local chat = chat_for_notification(params.sessionId, ctx)
  if chat and type(params.delta) == "string" then
    M.show_delta(chat, params.index, params.delta, params.kind)
  end
end

function M.on_message(_, params, ctx)
  if type(params) ~= "table" or type(params.sessionId) ~= "string" then
    return
  end
  local chat = chat_for_notification(params.sessionId, ctx)
  if chat and type(params.message) == "table" then
    M.show_message(chat, params.index, params.message)
  end
end

-- Buffers and windows ----------------------------------------------------------

local function set_keymaps(chat)
  local keys = options().keymaps or {}
  local buf = chat.buf
  local function map(mode, lhs, fn, desc)
    if lhs then
      vim.keymap.set(mode, lhs, fn, { buffer = buf, desc = desc, nowait = true })
    end
  end
  map("n", keys.send, function()
    M.submit(chat)
  end, "agentls: send the prompt")
  map("i", keys.send_insert, function()
    vim.cmd.stopinsert()
    M.submit(chat)
  end, "agentls: send the prompt")
  map("n", keys.cancel, function()
    M.cancel(chat)
  end, "agentls: cancel the running turn")
  map("n", keys.close, "<Cmd>close<CR>", "agentls: close the chat window")
end

--- Creates (or returns) the chat buffer of a session.
---@param client vim.lsp.Client
---@param session_id string
---@return agentls.Chat
function M.create(client, session_id)
  local existing = M.get(session_id)
  if existing then
    return existing
  end
  local name = "agentls://chat/" .. session_id
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "agentls-chat"
  ---@type agentls.Chat
  local chat = {
    session_id = session_id,
    buf = buf,
    client_id = client.id,
    busy = false,
    blocks = {},
  }
  api.nvim_buf_set_lines(buf, 0, -1, false, { "" })
  place_input_mark(chat, 0)
  M.chats[session_id] = chat
  M.current = session_id
  set_keymaps(chat)
  vim.lsp.buf_attach_client(buf, client.id)
  if options().autocomplete and vim.lsp.completion and vim.lsp.completion.enable then
    pcall(vim.lsp.completion.enable, true, client.id, buf, { autotrigger = true })
    -- A menu even for one match, nothing inserted until chosen ('completeopt'
    -- is buffer-local since 0.11).
    pcall(function()
      vim.bo[buf].completeopt = "menuone,noselect,popup"
    end)
    -- Trigger characters (@ /) open the menu; keep asking while a mention or
    -- a /template name is typed, since the server matches files fuzzily.
    api.nvim_create_autocmd("TextChangedI", {
      buffer = buf,
      callback = function()
        if vim.fn.pumvisible() == 1 then
          return
        end
        local col = api.nvim_win_get_cursor(0)[2]
        local before = api.nvim_get_current_line():sub(1, col)
        if before:match("@file:[^%s]+$") or before:match("^/[%w_-]+$") or before:match("%s/[%w_-]+$") then
          pcall(vim.lsp.completion.get)
        end
      end,
    })
  end
  api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    callback = function()
      M.chats[session_id] = nil
      if M.current == session_id then
        M.current = nil
      end
    end,
  })
  return chat
end

local function window_options(win, chat)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].signcolumn = "no"
  vim.wo[win].foldmethod = "expr"
  vim.wo[win].foldexpr = "v:lua.require'agentls.chat'.foldexpr(v:lnum)"
  vim.wo[win].foldtext = ""
  vim.wo[win].foldlevel = 0
  vim.wo[win].foldenable = true
  vim.wo[win].fillchars = "fold: "
  vim.wo[win].winbar = ("%%#AgentlsChatTitle# agentls chat %%* %s"):format(chat.session_id:sub(1, 8))
end

local function chat_window()
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    local buf = api.nvim_win_get_buf(win)
    if vim.bo[buf].filetype == "agentls-chat" then
      return win
    end
  end
  return nil
end

--- Shows the chat in a split (reusing a window that shows a chat) and focuses it.
function M.show(chat)
  local win = vim.fn.bufwinid(chat.buf)
  if win == -1 then
    win = chat_window()
  end
  if win and win ~= -1 then
    api.nvim_set_current_win(win)
    api.nvim_win_set_buf(win, chat.buf)
  else
    local o = options()
    local vertical = o.split ~= "horizontal"
    local total = vertical and vim.o.columns or vim.o.lines
    local size = o.size < 1 and math.floor(total * o.size) or o.size
    vim.cmd((vertical and "botright vertical %dsplit" or "botright %dsplit"):format(math.max(size, 20)))
    win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, chat.buf)
  end
  window_options(win, chat)
  M.current = chat.session_id
  pcall(api.nvim_win_set_cursor, win, { api.nvim_buf_line_count(chat.buf), 0 })
  return win
end

-- Turns ------------------------------------------------------------------------

local function input_text(chat)
  local lines = api.nvim_buf_get_lines(chat.buf, input_row(chat), -1, false)
  return vim.trim(table.concat(lines, "\n"))
end

local function clear_input(chat)
  api.nvim_buf_set_lines(chat.buf, input_row(chat), -1, false, { "" })
  place_input_mark(chat, input_row(chat))
end

--- Sends `prompt` (default: the input area) as the next turn of the chat's session.
function M.submit(chat, prompt, context)
  prompt = prompt or input_text(chat)
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
  if prompt == input_text(chat) then
    clear_input(chat)
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
  M.current = chat.session_id
  status.turn_started()
  local ok, request_id = client:request("agentls/chat", params, function(err, result)
    chat.busy = false
    chat.request_id = nil
    status.turn_ended()
    if not api.nvim_buf_is_valid(chat.buf) then
      return
    end
    if err then
      note(chat, "✗ " .. (err.message or vim.inspect(err)))
    elseif type(result) == "table" and result.status ~= "completed" then
      local message = type(result.error) == "table" and result.error.message or ""
      if result.status == "cancelled" then
        note(chat, "⏹ cancelled")
      else
        note(chat, "✗ turn failed: " .. tostring(message))
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
  chat = chat or M.get()
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
  chat = chat or M.get()
  local client = chat and vim.lsp.get_client_by_id(chat.client_id)
  if not chat or not client then
    vim.notify("agentls: no chat to compact", vim.log.levels.WARN)
    return
  end
  note(chat, "… compacting")
  client_mod.request(client, "agentls/compact", { sessionId = chat.session_id }, function(result)
    if type(result) ~= "table" then
      return
    end
    if result.error and result.error ~= vim.NIL then
      note(chat, "✗ compaction failed: " .. tostring(result.error.message or ""))
    elseif not result.compacted then
      note(chat, "ℹ " .. tostring(result.reason or "nothing to compact"))
    end
  end)
end

local function new_session(client, fn)
  client_mod.command(client, "agentls.newSession", {}, function(result)
    if type(result) ~= "table" or type(result.sessionId) ~= "string" then
      vim.notify("agentls: agentls.newSession gave no sessionId", vim.log.levels.ERROR)
      return
    end
    fn(M.create(client, result.sessionId))
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
      M.show(chat)
      if prompt ~= "" then
        M.submit(chat, prompt, context)
      else
        if context then
          chat.context = context
          M.note(chat, ("↳ the next prompt carries the selection %s:%d-%d"):format(
            short_path(context.uri), context.range.start.line + 1, context.range["end"].line + 1))
        end
        local win = api.nvim_get_current_win()
        pcall(api.nvim_win_set_cursor, win, { api.nvim_buf_line_count(chat.buf), 0 })
      end
    end
    local chat = M.get()
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
      M.show(chat)
    end)
  end)
end

--- Loads a stored session's transcript into its chat buffer (agentls/session).
function M.resume(client, session_id, done)
  client_mod.request(client, "agentls/session", { sessionId = session_id }, function(session)
    local chat = M.get(session_id)
    if not chat then
      chat = M.create(client, session_id)
      for index, message in ipairs(type(session) == "table" and session.messages or {}) do
        M.show_message(chat, index - 1, message)
      end
    end
    M.show(chat)
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
