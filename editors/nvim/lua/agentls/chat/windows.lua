-- Chat buffers and windows: the buffer of a session (attached to the server
-- as an `agentls-chat` document, with its keymaps and completion) and the
-- split that shows it.
local geometry = require("agentls.chat.geometry")
local state = require("agentls.chat.state")

local M = {}

local api = vim.api

-- Required when a key is pressed: turns requires this module.
local function turns()
  return require("agentls.chat.turns")
end

local function set_keymaps(chat)
  local keys = state.options().keymaps or {}
  local buf = chat.buf
  local function map(mode, lhs, fn, desc)
    if lhs then
      vim.keymap.set(mode, lhs, fn, { buffer = buf, desc = desc, nowait = true })
    end
  end
  map("n", keys.send, function()
    turns().submit(chat)
  end, "agentls: send the prompt")
  map("i", keys.send_insert, function()
    vim.cmd.stopinsert()
    turns().submit(chat)
  end, "agentls: send the prompt")
  map("n", keys.cancel, function()
    turns().cancel(chat)
  end, "agentls: cancel the running turn")
  map("n", keys.close, "<Cmd>close<CR>", "agentls: close the chat window")
end

--- Creates (or returns) the chat buffer of a session.
---@param client vim.lsp.Client
---@param session_id string
---@return agentls.Chat
function M.create(client, session_id)
  local existing = state.get(session_id)
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
  geometry.place_input_mark(chat, 0)
  state.chats[session_id] = chat
  state.current = session_id
  set_keymaps(chat)
  vim.lsp.buf_attach_client(buf, client.id)
  if state.options().autocomplete and vim.lsp.completion and vim.lsp.completion.enable then
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
      state.chats[session_id] = nil
      if state.current == session_id then
        state.current = nil
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
    local o = state.options()
    local vertical = o.split ~= "horizontal"
    local total = vertical and vim.o.columns or vim.o.lines
    local size = o.size < 1 and math.floor(total * o.size) or o.size
    vim.cmd((vertical and "botright vertical %dsplit" or "botright %dsplit"):format(math.max(size, 20)))
    win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, chat.buf)
  end
  window_options(win, chat)
  state.current = chat.session_id
  pcall(api.nvim_win_set_cursor, win, { api.nvim_buf_line_count(chat.buf), 0 })
  return win
end

return M
