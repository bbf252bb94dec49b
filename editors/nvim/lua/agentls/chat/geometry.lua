-- Transcript geometry: the chat buffer is a transcript followed by an input
-- area that starts at an extmark (with the prompt separator as a virtual line
-- above it). These functions find, move and fill the two parts.
local M = {}

local api = vim.api
local ns_input = api.nvim_create_namespace("agentls.chat.input")

--- Row of the first input line (0-based); the transcript is every row above it.
function M.input_row(chat)
  local pos = api.nvim_buf_get_extmark_by_id(chat.buf, ns_input, chat.input_mark, {})
  if not pos or not pos[1] then
    return api.nvim_buf_line_count(chat.buf)
  end
  return pos[1]
end

function M.place_input_mark(chat, row)
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
function M.append_lines(chat, lines)
  local row = M.input_row(chat)
  api.nvim_buf_set_lines(chat.buf, row, row, false, lines)
  -- The mark does not move with text inserted at its row (right_gravity=false
  -- keeps the separator above the typed text), so move it explicitly.
  M.place_input_mark(chat, row + #lines)
  return row
end

function M.replace_transcript_tail(chat, from_row, lines)
  local row = M.input_row(chat)
  api.nvim_buf_set_lines(chat.buf, from_row, row, false, lines)
  M.place_input_mark(chat, from_row + #lines)
end

--- Moves the cursor of every other window showing the chat to the input area.
function M.scroll_to_end(chat)
  for _, win in ipairs(vim.fn.win_findbuf(chat.buf)) do
    if win ~= api.nvim_get_current_win() then
      local row = M.input_row(chat)
      pcall(api.nvim_win_set_cursor, win, { math.max(1, row), 0 })
    end
  end
end

--- What is typed in the input area.
function M.input_text(chat)
  local lines = api.nvim_buf_get_lines(chat.buf, M.input_row(chat), -1, false)
  return vim.trim(table.concat(lines, "\n"))
end

function M.clear_input(chat)
  api.nvim_buf_set_lines(chat.buf, M.input_row(chat), -1, false, { "" })
  M.place_input_mark(chat, M.input_row(chat))
end

return M
