-- Next edit suggestions (textDocument/copilotInlineEdit): after the user
-- changes the buffer in normal mode or leaves insert mode, ask the server for
-- the edit that follows from it (the other uses of a renamed name, ...) and
-- show it where it would apply: the text it replaces highlighted, the new
-- text as virtual text, a sign on its line, and a hint at the cursor when the
-- edit is off screen. <Tab> (normal mode) jumps to the edit, <Tab> again
-- applies it; <Esc> dismisses it.
local M = {}

local api = vim.api
local METHOD = "textDocument/copilotInlineEdit"
local ns = api.nvim_create_namespace("agentls.next_edit")

-- buf -> { edits = {...}, client_id, version }
M.shown = {}
-- buf -> { client_id, request_id }
local pending = {}
local timers = {}

local function client_for(buf)
  return vim.lsp.get_clients({ bufnr = buf, name = "agentls" })[1]
end

local function options()
  return require("agentls.config").options.next_edit or {}
end

local function cancel(buf)
  local p = pending[buf]
  pending[buf] = nil
  if p then
    local client = vim.lsp.get_client_by_id(p.client_id)
    if client then
      client:cancel_request(p.request_id)
    end
  end
end

--- Removes the suggestion shown in `buf` (and cancels a pending request).
function M.clear(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  cancel(buf)
  M.shown[buf] = nil
  if api.nvim_buf_is_valid(buf) then
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  end
end

-- (row, col) in bytes of an LSP position in `buf`.
local function to_pos(buf, position, encoding)
  local line = api.nvim_buf_get_lines(buf, position.line, position.line + 1, false)[1] or ""
  local ok, col = pcall(vim.str_byteindex, line, encoding, position.character, false)
  return position.line, ok and col or #line
end

local function render(buf, state, encoding)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local win = api.nvim_get_current_win()
  local top, bottom = vim.fn.line("w0", win) - 1, vim.fn.line("w$", win) - 1
  local offscreen
  for _, edit in ipairs(state.edits) do
    local srow, scol = to_pos(buf, edit.range.start, encoding)
    local erow, ecol = to_pos(buf, edit.range["end"], encoding)
    if srow ~= erow or scol ~= ecol then
      api.nvim_buf_set_extmark(buf, ns, srow, scol, {
        end_row = erow,
        end_col = ecol,
        hl_group = "AgentlsNextEditDelete",
      })
    end
    local lines = vim.split(edit.text, "\n", { plain = true })
    local mark = { sign_text = "⇥", sign_hl_group = "AgentlsNextEditSign" }
    if #lines == 1 then
      mark.virt_text = { { lines[1] ~= "" and lines[1] or "⌫", "AgentlsNextEditInsert" } }
      mark.virt_text_pos = "inline"
      api.nvim_buf_set_extmark(buf, ns, erow, ecol, mark)
    else
      mark.virt_lines = {}
      for _, text in ipairs(lines) do
        table.insert(mark.virt_lines, { { text, "AgentlsNextEditInsert" } })
      end
      api.nvim_buf_set_extmark(buf, ns, erow, 0, mark)
    end
    if srow < top or srow > bottom then
      offscreen = offscreen or srow
    end
  end
  if offscreen then
    local row = api.nvim_win_get_cursor(win)[1] - 1
    api.nvim_buf_set_extmark(buf, ns, row, 0, {
      virt_text = { { string.format("  ⇥ next edit at line %d (Tab)", offscreen + 1),
        "AgentlsNextEditHint" } },
      virt_text_pos = "eol",
    })
  end
end

--- Asks the server for the next edit at the cursor of the current buffer.
function M.request(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  if buf ~= api.nvim_get_current_buf() or vim.bo[buf].buftype ~= "" then
    return
  end
  local client = client_for(buf)
  if not client then
    return
  end
  M.clear(buf)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local version = vim.lsp.util.buf_versions[buf]
  params.textDocument.version = version
  local ok, request_id
  ok, request_id = client:request(METHOD, params, function(err, result)
    if pending[buf] and pending[buf].request_id == request_id then
      pending[buf] = nil
    end
    if err or type(result) ~= "table" or not api.nvim_buf_is_valid(buf) then
      return
    end
    local edits = {}
    for _, edit in ipairs(result.edits or {}) do
      if edit.textDocument and edit.textDocument.version == vim.lsp.util.buf_versions[buf]
          and vim.uri_to_bufnr(edit.textDocument.uri) == buf then
        table.insert(edits, edit)
      end
    end
    if #edits == 0 or api.nvim_get_mode().mode:sub(1, 1) == "i" then
      return
    end
    M.shown[buf] = { edits = edits, client_id = client.id, version = version }
    render(buf, M.shown[buf], client.offset_encoding)
  end, buf)
  if ok and request_id then
    pending[buf] = { client_id = client.id, request_id = request_id }
  end
end

local function schedule(buf)
  local delay = options().debounce or 100
  if timers[buf] then
    timers[buf]:stop()
  end
  timers[buf] = vim.defer_fn(function()
    timers[buf] = nil
    if api.nvim_buf_is_valid(buf) and api.nvim_get_current_buf() == buf then
      M.request(buf)
    end
  end, delay)
end

local function current(buf)
  local state = M.shown[buf]
  if state and state.version == vim.lsp.util.buf_versions[buf] then
    return state
  end
  return nil
end

--- The accept key: jump to the suggested edit, or apply it when the cursor
--- is already on its first line. Returns false when nothing is shown.
function M.accept()
  local buf = api.nvim_get_current_buf()
  local state = current(buf)
  if not state then
    return false
  end
  local client = vim.lsp.get_client_by_id(state.client_id)
  if not client then
    M.clear(buf)
    return false
  end
  local first = state.edits[1]
  local row, col = to_pos(buf, first.range.start, client.offset_encoding)
  local cursor = api.nvim_win_get_cursor(0)
  if cursor[1] - 1 ~= row then
    vim.cmd("normal! m'")
    api.nvim_win_set_cursor(0, { row + 1, col })
    render(buf, state, client.offset_encoding)
    return true
  end
  local text_edits = {}
  for _, edit in ipairs(state.edits) do
    table.insert(text_edits, { range = edit.range, newText = edit.text })
  end
  M.clear(buf)
  vim.lsp.util.apply_text_edits(text_edits, buf, client.offset_encoding)
  for _, edit in ipairs(state.edits) do
    if edit.command then
      client:exec_cmd(edit.command, { bufnr = buf })
    end
  end
  return true
end

--- The dismiss key. Returns false when nothing is shown.
function M.dismiss()
  local buf = api.nvim_get_current_buf()
  if not M.shown[buf] then
    return false
  end
  M.clear(buf)
  return true
end

function M.set_keymaps(keymaps)
  if not keymaps then
    return
  end
  local function map(lhs, fn, desc)
    if not lhs then
      return
    end
    vim.keymap.set("n", lhs, function()
      -- An expr mapping may not change the buffer: act right after it.
      if current(api.nvim_get_current_buf()) then
        vim.schedule(fn)
        return ""
      end
      return lhs
    end, { desc = "agentls: " .. desc, expr = true, silent = true, remap = false })
  end
  map(keymaps.accept, M.accept, "jump to / apply the next edit suggestion")
  map(keymaps.dismiss, M.dismiss, "dismiss the next edit suggestion")
end

--- Starts suggesting in a buffer the agentls client attached to.
function M.attach(buf)
  local o = options()
  if o.enabled == false or vim.bo[buf].buftype ~= "" or vim.bo[buf].filetype == "agentls-chat" then
    return
  end
  local group = api.nvim_create_augroup("agentls.next_edit." .. buf, { clear = true })
  api.nvim_create_autocmd({ "InsertLeave", "TextChanged" }, {
    group = group,
    buffer = buf,
    callback = function()
      schedule(buf)
    end,
  })
  api.nvim_create_autocmd({ "InsertEnter", "BufLeave" }, {
    group = group,
    buffer = buf,
    callback = function()
      M.clear(buf)
    end,
  })
  api.nvim_create_autocmd({ "BufWipeout" }, {
    group = group,
    buffer = buf,
    callback = function()
      M.shown[buf], pending[buf] = nil, nil
    end,
  })
end

function M.setup_highlights()
  api.nvim_set_hl(0, "AgentlsNextEditDelete", { link = "DiffDelete", default = true })
  api.nvim_set_hl(0, "AgentlsNextEditInsert", { link = "DiffAdd", default = true })
  api.nvim_set_hl(0, "AgentlsNextEditSign", { link = "DiagnosticHint", default = true })
  api.nvim_set_hl(0, "AgentlsNextEditHint", { link = "Comment", default = true })
end

M.namespace = ns
return M
