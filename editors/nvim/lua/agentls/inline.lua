-- Inline completion (ghost text) through Neovim 0.12's vim.lsp.inline_completion,
-- with keys to accept all / a word / a line, cycle, and dismiss.
local M = {}

local api = vim.api

function M.available()
  local ic = vim.lsp.inline_completion
  return type(ic) == "table" and ic.enable ~= nil
end

local noticed = false
local function notice_once()
  if noticed then
    return
  end
  noticed = true
  vim.notify(
    "agentls: inline completion needs Neovim 0.12 or newer (this is "
      .. tostring(vim.version())
      .. "); chat, approvals and the statusline work.",
    vim.log.levels.INFO
  )
end

--- Enables ghost text in a buffer the agentls client just attached to.
function M.attach(bufnr)
  local o = require("agentls.config").options.inline_completion
  if not o or o.enabled == false then
    return
  end
  if not M.available() then
    notice_once()
    return
  end
  if vim.bo[bufnr].filetype == "agentls-chat" or vim.bo[bufnr].buftype ~= "" then
    return
  end
  vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
  if o.warm_at_cursor ~= false then
    M.watch_cursor(bufnr, o.warm_debounce or 300)
  end
end

-- The (buffer, line) last told to the server, and the pending timer's generation.
local told = {}
local generation = 0

--- Tells the server where the normal-mode cursor came to rest
--- (agentls/didMoveCursor), so a local model evaluates the prompt there before
--- the first keystroke; once per line, `debounce` ms after the cursor stops.
--- Insert mode needs nothing: Neovim asks for a completion on InsertEnter.
function M.watch_cursor(bufnr, debounce)
  local group = api.nvim_create_augroup("agentls.inline." .. bufnr, { clear = true })
  api.nvim_create_autocmd({ "CursorMoved", "BufEnter" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      generation = generation + 1
      local mine = generation
      vim.defer_fn(function()
        if mine ~= generation or api.nvim_get_current_buf() ~= bufnr or api.nvim_get_mode().mode ~= "n" then
          return
        end
        local line = api.nvim_win_get_cursor(0)[1]
        if told[1] == bufnr and told[2] == line then
          return
        end
        for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr, name = "agentls" })) do
          local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
          client:notify("agentls/didMoveCursor", params)
          told = { bufnr, line }
        end
      end, debounce)
    end,
  })
  api.nvim_create_autocmd("BufWipeout", {
    group = group,
    buffer = bufnr,
    callback = function()
      if told[1] == bufnr then
        told = {}
      end
    end,
  })
end

-- The text of `item` not yet in the buffer, i.e. what accepting inserts at the cursor.
local function remainder(item, bufnr)
  local text = item.insert_text
  if type(text) ~= "string" then
    text = text and text.value or ""
  end
  local range = item.range
  if not range then
    return text
  end
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local srow, scol = range.start.row, range.start.col
  if srow ~= row or scol > col then
    return nil
  end
  local typed = api.nvim_buf_get_text(bufnr, srow, scol, row, col, {})[1] or ""
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  return text:sub(#typed + 1)
end

local function insert_at_cursor(text)
  if text == "" then
    return
  end
  local lines = vim.split(text, "\n", { plain = true })
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  api.nvim_buf_set_text(0, row, col, row, col, lines)
  local last_row = row + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { last_row + 1, last_col })
end

--- Accepts part of the suggestion: "word" (the next word with the spaces and
--- punctuation before it) or "line" (the rest of the line, or the next line).
---@param unit "word"|"line"
---@return boolean accepted
function M.accept_partial(unit)
  if not M.available() then
    return false
  end
  local bufnr = api.nvim_get_current_buf()
  return vim.lsp.inline_completion.get({
    on_accept = function(item)
      local rest = remainder(item, bufnr)
      if not rest or rest == "" then
        return
      end
      local piece
      if unit == "word" then
        piece = rest:match("^[^%w_]*[%w_]+") or rest:match("^%s*[^%s]") or rest
      else
        piece = rest:match("^\n?[^\n]*") or rest
      end
      insert_at_cursor(piece)
      local client = vim.lsp.get_client_by_id(item.client_id)
      if client and item.command then
        client:notify("textDocument/didPartiallyAcceptCompletion", {
          item = { insertText = item.insert_text, command = item.command },
          acceptedLength = vim.str_utfindex(piece, "utf-16"),
        })
      end
    end,
  })
end

function M.dismiss()
  if not M.available() then
    return false
  end
  return vim.lsp.inline_completion.get({ on_accept = function() end })
end

--- Sets the insert-mode keys (global mappings: they act only while a suggestion shows).
function M.set_keymaps(keymaps)
  if not M.available() or not keymaps then
    return
  end
  local function map(lhs, rhs, desc, expr)
    if lhs then
      vim.keymap.set("i", lhs, rhs, { desc = "agentls: " .. desc, expr = expr, silent = true })
    end
  end
  -- Without a suggestion the key does what it did before this mapping: the
  -- earlier mapping (e.g. Neovim's own <Tab> that jumps in snippets), else the key.
  local function fallback(lhs)
    local previous = vim.fn.maparg(lhs, "i", false, true)
    if type(previous) ~= "table" or vim.tbl_isempty(previous)
        or (previous.desc or ""):find("^agentls:") then
      return function()
        return lhs
      end
    end
    return function()
      if previous.callback then
        if previous.expr == 1 then
          return previous.callback() or ""
        end
        previous.callback()
        return ""
      end
      if previous.expr == 1 then
        return vim.api.nvim_eval(previous.rhs)
      end
      local keys = api.nvim_replace_termcodes(previous.rhs, true, false, true)
      api.nvim_feedkeys(keys, previous.noremap == 1 and "n" or "m", false)
      return ""
    end
  end
  local accept_fallback = keymaps.accept and fallback(keymaps.accept)
  map(keymaps.accept, function()
    if vim.lsp.inline_completion.get() then
      return ""
    end
    return accept_fallback()
  end, "accept the inline suggestion", true)
  local word_fallback = keymaps.accept_word and fallback(keymaps.accept_word)
  map(keymaps.accept_word, function()
    if not M.accept_partial("word") then
      return word_fallback()
    end
    return ""
  end, "accept the next word of the suggestion", true)
  local line_fallback = keymaps.accept_line and fallback(keymaps.accept_line)
  map(keymaps.accept_line, function()
    if not M.accept_partial("line") then
      return line_fallback()
    end
    return ""
  end, "accept the next line of the suggestion", true)
  map(keymaps.next, function()
    vim.lsp.inline_completion.select({ count = 1 })
  end, "next inline suggestion")
  map(keymaps.prev, function()
    vim.lsp.inline_completion.select({ count = -1 })
  end, "previous inline suggestion")
  local dismiss_fallback = keymaps.dismiss and fallback(keymaps.dismiss)
  map(keymaps.dismiss, function()
    if not M.dismiss() then
      return dismiss_fallback()
    end
    return ""
  end, "dismiss the inline suggestion", true)
end

--- Wraps the client's inline completion requests:
--- * a suggestion that is shown is reported with textDocument/didShowCompletion
---   (the server counts shown suggestions);
--- * requests for a buffer that is not the current one are not sent: Neovim
---   0.12's completor listens to InsertEnter/CursorMovedI in every buffer, so
---   typing in the chat would otherwise ask for completions of the code buffer.
function M.wrap_requests(client)
  local request = client.request
  client.request = function(self, method, params, handler, bufnr)
    if type(self) ~= "table" then -- client.request(method, ...) call style
      return request(client, self, method, params, handler)
    end
    if method == "textDocument/inlineCompletion" and handler then
      local target = bufnr and bufnr ~= 0 and bufnr
        or (type(params) == "table" and params.textDocument and vim.uri_to_bufnr(params.textDocument.uri))
      if target and target ~= api.nvim_get_current_buf() then
        return false, nil
      end
      local inner = handler
      handler = function(err, result, ctx)
        inner(err, result, ctx)
        local items = type(result) == "table" and (result.items or result) or {}
        if not err and items[1] and not self:is_stopped() then
          self:notify("textDocument/didShowCompletion", { item = items[1] })
        end
      end
    end
    return request(self, method, params, handler, bufnr)
  end
end

return M
