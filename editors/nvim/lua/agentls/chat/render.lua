-- Rendering: a message as transcript lines (render_message), the folds of
-- chat windows (foldexpr), and putting streamed deltas and final messages
-- into the transcript (show_delta, show_message, note).
local geometry = require("agentls.chat.geometry")

local M = {}

local api = vim.api
local ns_blocks = api.nvim_create_namespace("agentls.chat.blocks")

function M.text_lines(text)
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
  return M.text_lines(ok and encoded or vim.inspect(value))
end

function M.short_path(uri)
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
    local head = M.text_lines(header)
    table.insert(lines, head[1])
    add(indent(vim.list_slice(head, 2), "    ", 400))
    add(body)
  end

  local instructions = type(meta.instructions) == "table" and meta.instructions or {}
  if meta.source == "compaction" then
    folded("ℹ compacted: earlier turns summarised for the model", indent(M.text_lines(message.content), "    ", 200))
  elseif meta.source == "hook" then
    local content = M.text_lines(message.content)
    folded("ℹ hook: " .. (content[1] or ""), indent(vim.list_slice(content, 2), "    ", 200))
  elseif message.role == "user" then
    table.insert(lines, "## You")
    add(M.text_lines(meta.prompt or message.content))
    local context = type(meta.context) == "table" and meta.context or nil
    if context and context.uri then
      local where = M.short_path(context.uri)
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
      add(M.text_lines(content))
    end
    local previews = type(meta.tool_call_previews) == "table" and meta.tool_call_previews or {}
    for _, call in ipairs(type(meta.tool_calls) == "table" and meta.tool_calls or {}) do
      local name = call.tool or call.name or "tool"
      local preview = type(previews[call.id]) == "string" and previews[call.id] or name
      if preview:find("\n") then
        -- A multi-line preview (the diff of an edit) is the body.
        local args = type(call.arguments) == "table" and call.arguments or {}
        local subject = type(args.path) == "string" and (" " .. args.path) or ""
        folded("▶ tool call: " .. name .. subject, indent(M.text_lines(preview), "    ", 400))
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
      header = header .. " " .. (M.text_lines(err)[1] or "")
    end
    folded(header, indent(M.text_lines(message.content), "    ", 200))
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
    geometry.replace_transcript_tail(chat, first, lines)
    block.live = false
  else
    first = geometry.append_lines(chat, lines)
    if index then
      chat.blocks[index] = {
        mark = api.nvim_buf_set_extmark(chat.buf, ns_blocks, first, 0, {}),
        live = false,
      }
    end
  end
  geometry.scroll_to_end(chat)
end

--- Appends a streamed delta to the live block of message `index`.
function M.show_delta(chat, index, delta, kind)
  local block = chat.blocks[index]
  if not block then
    local first = geometry.append_lines(chat, { "## agentls", "" })
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
  local row = geometry.input_row(chat) - 1
  local last = api.nvim_buf_get_lines(chat.buf, row, row + 1, false)[1] or ""
  api.nvim_buf_set_text(chat.buf, row, #last, row, #last, vim.split(delta, "\n", { plain = true }))
  geometry.place_input_mark(chat, geometry.input_row(chat)) -- keep the separator in place
  geometry.scroll_to_end(chat)
end

function M.note(chat, text)
  geometry.append_lines(chat, vim.list_extend(M.text_lines(text), { "" }))
  geometry.scroll_to_end(chat)
end

return M
