-- Approvals in the editor (docs/protocol.md, "Tool calls become workspace edits").
--
-- * window/showMessageRequest (message mode, run_command, hook ask_user): the
--   message (with its preview) goes to a scratch split, the actions to
--   vim.ui.select. The handler runs in the coroutine Neovim gives server
--   requests: it yields until the user picks, so the UI keeps working and the
--   answer goes back to the server when it is given.
-- * workspace/applyEdit with change annotations that need confirmation
--   (annotation mode): Neovim 0.12's own confirmation is a blocking
--   confirm() and, when declined, still answers {applied = true}. This
--   handler shows the diff in a scratch split, asks Apply/Reject with
--   vim.ui.select (non-blocking), and answers {applied = false} on reject.
local M = {}

local api = vim.api
local util = vim.lsp.util

M.APPLY = "Apply"
M.REJECT = "Reject"

local function options()
  return require("agentls.config").options.approvals or {}
end

-- Preview split --------------------------------------------------------------

--- "agentls: <text>", unless the server's text already says agentls.
local function titled(text)
  text = text or "approval"
  return text:find("^agentls") and text or ("agentls: " .. text)
end

--- Opens a scratch split with `lines`; returns a function that closes it.
function M.open_preview(lines, title)
  if not options().preview or #lines == 0 then
    return function() end
  end
  local previous = api.nvim_get_current_win()
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "diff"
  pcall(api.nvim_buf_set_name, buf, ("agentls://preview/%d"):format(buf))
  local height = math.max(5, math.min(#lines + 1, math.floor(vim.o.lines * 0.5)))
  vim.cmd(("botright %dsplit"):format(height))
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  vim.wo[win].winbar = "%#WarningMsg# " .. titled(title):gsub("%%", "%%%%") .. " %*"
  vim.wo[win].number = false
  vim.wo[win].wrap = false
  vim.wo[win].foldenable = false
  if api.nvim_win_is_valid(previous) then
    api.nvim_set_current_win(previous)
  end
  -- Draw it now: a synchronous vim.ui.select (inputlist) would cover the screen first.
  vim.cmd.redraw()
  return function()
    if api.nvim_win_is_valid(win) then
      pcall(api.nvim_win_close, win, true)
    end
  end
end

--- Asks with vim.ui.select from inside a server-request coroutine; returns the choice.
local function select_async(items, opts)
  local co, is_main = coroutine.running()
  if not co or is_main then
    -- Not in a coroutine (called directly): fall back to a blocking answer.
    local answer
    vim.ui.select(items, opts, function(choice)
      answer = choice
    end)
    return answer
  end
  vim.ui.select(items, opts, function(choice)
    -- schedule: with a synchronous vim.ui.select the callback runs before we yield
    vim.schedule(function()
      coroutine.resume(co, choice)
    end)
  end)
  return coroutine.yield()
end

-- window/showMessageRequest ----------------------------------------------------

--- Handler for window/showMessageRequest.
function M.show_message_request(err, params, ctx)
  if type(params) ~= "table" or not next(params.actions or {}) then
    return vim.lsp.handlers["window/showMessageRequest"](err, params, ctx)
  end
  local message = params.message or ""
  local lines = vim.split(message, "\n", { plain = true })
  local close = function() end
  if #lines > 1 then
    close = M.open_preview(lines, lines[1])
  end
  local choice = select_async(params.actions, {
    prompt = titled(lines[1]),
    kind = "agentls.approval",
    format_item = function(action)
      return (action.title:gsub("\n", " "))
    end,
  })
  close()
  return choice or vim.NIL
end

-- workspace/applyEdit ------------------------------------------------------------

local function read_lines(uri)
  local bufnr = vim.uri_to_bufnr(uri)
  if api.nvim_buf_is_loaded(bufnr) then
    return api.nvim_buf_get_lines(bufnr, 0, -1, false), bufnr
  end
  local path = vim.uri_to_fname(uri)
  if vim.fn.filereadable(path) == 1 then
    return vim.fn.readfile(path), nil
  end
  return {}, nil
end

--- The text after applying `edits` (LSP TextEdits) to `lines`, computed in a scratch buffer.
local function apply_in_memory(lines, edits, encoding)
  local scratch = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(scratch, 0, -1, false, lines)
  local plain = {}
  for _, edit in ipairs(edits) do
    table.insert(plain, { range = vim.deepcopy(edit.range), newText = edit.newText })
  end
  local ok, msg = pcall(util.apply_text_edits, plain, scratch, encoding)
  local result = api.nvim_buf_get_lines(scratch, 0, -1, false)
  api.nvim_buf_delete(scratch, { force = true })
  if not ok then
    return nil, msg
  end
  return result
end

local function rel(uri)
  return vim.fn.fnamemodify(vim.uri_to_fname(uri), ":~:.")
end

local function diff_lines(old, new, name, is_new)
  local a = #old > 0 and (table.concat(old, "\n") .. "\n") or ""
  local b = #new > 0 and (table.concat(new, "\n") .. "\n") or ""
  local out = {
    "--- " .. (is_new and "/dev/null" or ("a/" .. name)),
    "+++ b/" .. name,
  }
  local diff = vim.diff(a, b, { result_type = "unified", ctxlen = 3 })
  if type(diff) == "string" and diff ~= "" then
    vim.list_extend(out, vim.split(diff:gsub("\n$", ""), "\n", { plain = true }))
  else
    table.insert(out, "(no textual change)")
  end
  return out
end

--- Preview lines for a WorkspaceEdit: a unified diff per document, and resource operations.
function M.preview_edit(edit, encoding)
  local lines = {}
  local created = {}
  local function changes_of(uri, edits)
    local old = created[uri] and {} or read_lines(uri)
    local new, msg = apply_in_memory(old, edits, encoding)
    if not new then
      table.insert(lines, ("%s: cannot preview (%s)"):format(rel(uri), tostring(msg)))
      return
    end
    vim.list_extend(lines, diff_lines(old, new, rel(uri), created[uri]))
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.kind == "create" then
      created[change.uri] = true
      table.insert(lines, "new file: " .. rel(change.uri))
    elseif change.kind == "rename" then
      table.insert(lines, ("rename: %s -> %s"):format(rel(change.oldUri), rel(change.newUri)))
    elseif change.kind == "delete" then
      table.insert(lines, "delete: " .. rel(change.uri))
    elseif change.textDocument then
      changes_of(change.textDocument.uri, change.edits or {})
    end
  end
  for uri, edits in pairs(edit.changes or {}) do
    changes_of(uri, edits)
  end
  return lines
end

--- Annotations that need confirmation, in order of first use: { id = annotation }.
local function confirmations(edit)
  local annotations = edit.changeAnnotations or {}
  local needed, order = {}, {}
  local function check(id)
    local annotation = id and annotations[id]
    if annotation and annotation.needsConfirmation and not needed[id] then
      needed[id] = annotation
      table.insert(order, id)
    end
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    check(change.annotationId)
    for _, text_edit in ipairs(change.edits or {}) do
      check(text_edit.annotationId)
    end
  end
  for _, edits in pairs(edit.changes or {}) do
    for _, text_edit in ipairs(edits) do
      check(text_edit.annotationId)
    end
  end
  return needed, order
end

--- A document the edit was computed against has changed since: refuse rather than clobber.
local function stale(edit)
  for _, change in ipairs(edit.documentChanges or {}) do
    local doc = change.textDocument
    if doc and type(doc.version) == "number" and doc.version > 0 then
      local bufnr = vim.uri_to_bufnr(doc.uri)
      local current = util.buf_versions[bufnr]
      if api.nvim_buf_is_loaded(bufnr) and current and current > doc.version then
        return rel(doc.uri)
      end
    end
  end
  return nil
end

--- Documents where Neovim's edit would leave an extra empty last line.
---
--- The server sees a file as text ending in "\n"; Neovim as lines with an
--- implied final newline. Text ending in "\n" appended at the end of the
--- document (at line = line count, or into an empty buffer) makes
--- apply_text_edits add an empty last line, which :write turns into an extra
--- blank line (a new file "a\n" would be saved as "a\n\n").
local function trailing_newline_fixes(edit)
  local fixes = {}
  local function check(uri, edits)
    local lines = read_lines(uri)
    local count = #lines
    local empty = count == 0 or (count == 1 and lines[1] == "")
    for _, text_edit in ipairs(edits or {}) do
      local range, text = text_edit.range, text_edit.newText or ""
      if text:sub(-1) == "\n" and range and (range.start.line >= count
          or (empty and range["end"].line == 0 and range["end"].character == 0)) then
        fixes[uri] = true
      end
    end
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument then
      check(change.textDocument.uri, change.edits)
    end
  end
  for uri, edits in pairs(edit.changes or {}) do
    check(uri, edits)
  end
  return fixes
end

local function apply(edit, client)
  local changed = stale(edit)
  if changed then
    return { applied = false, failureReason = changed .. " changed since the edit was computed; re-read it" }
  end
  local fixes = trailing_newline_fixes(edit)
  -- Confirmation is done: drop the annotations, so that Neovim neither asks
  -- again (a blocking confirm()) nor echoes every description (the whole diff).
  local copy = vim.deepcopy(edit)
  copy.changeAnnotations = nil
  for _, change in ipairs(copy.documentChanges or {}) do
    change.annotationId = nil
    for _, text_edit in ipairs(change.edits or {}) do
      text_edit.annotationId = nil
    end
  end
  for _, edits in pairs(copy.changes or {}) do
    for _, text_edit in ipairs(edits) do
      text_edit.annotationId = nil
    end
  end
  local ok, result = pcall(util.apply_workspace_edit, copy, client.offset_encoding)
  if not ok then
    return { applied = false, failureReason = tostring(result) }
  end
  for uri in pairs(fixes) do
    local bufnr = vim.uri_to_bufnr(uri)
    local count = api.nvim_buf_line_count(bufnr)
    if count > 1 and api.nvim_buf_get_lines(bufnr, count - 1, count, false)[1] == "" then
      api.nvim_buf_set_lines(bufnr, count - 1, count, false, {})
    end
  end
  return { applied = true }
end

--- Handler for workspace/applyEdit.
function M.apply_edit(err, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if type(params) ~= "table" or type(params.edit) ~= "table" or not client then
    return vim.lsp.handlers["workspace/applyEdit"](err, params, ctx)
  end
  local edit = params.edit
  local needed, order = confirmations(edit)
  if #order == 0 then
    return apply(edit, client)
  end
  local label = params.label
  local header = {}
  for _, id in ipairs(order) do
    local annotation = needed[id]
    label = label or annotation.label
    table.insert(header, "# " .. (annotation.label or id))
  end
  label = label or "workspace edit"
  local ok, preview = pcall(M.preview_edit, edit, client.offset_encoding)
  if not ok then
    preview = { "(cannot preview: " .. tostring(preview) .. ")" }
  end
  if #preview == 0 then
    -- Nothing to diff: show what the server described.
    for _, id in ipairs(order) do
      local description = needed[id].description
      if type(description) == "string" then
        vim.list_extend(preview, vim.split(description, "\n", { plain = true }))
      end
    end
  end
  local close = M.open_preview(vim.list_extend(header, preview), label)
  local choice = select_async({ M.APPLY, M.REJECT }, {
    prompt = titled(label),
    kind = "agentls.approval",
  })
  close()
  if choice ~= M.APPLY then
    return { applied = false, failureReason = "The user rejected the edit." }
  end
  return apply(edit, client)
end

return M
