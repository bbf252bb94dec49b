-- The open chats: one agentls.Chat per session, and which one is current.
-- Every chat module reads and changes the chats through this one table.
local M = {}

---@class agentls.Chat
---@field session_id string
---@field buf integer
---@field client_id integer
---@field busy boolean
---@field request_id integer?
---@field blocks table<integer, {mark: integer, live: boolean, kind: string?}>
---@field context table? selection context for the next prompt
---@field input_mark integer
---@field instructions_seen table<string, boolean>?

---@type table<string, agentls.Chat>
M.chats = {}
M.current = nil ---@type string?

--- The chat of `session_id` (default: the current one) while its buffer exists.
---@return agentls.Chat?
function M.get(session_id)
  local chat = M.chats[session_id or M.current or ""]
  if chat and vim.api.nvim_buf_is_valid(chat.buf) then
    return chat
  end
  return nil
end

--- The user's `chat` options (config.lua).
function M.options()
  return require("agentls.config").options.chat
end

return M
