-- The chat buffer: agentls://chat/<sessionId>, filetype agentls-chat.
--
-- The buffer is a transcript followed by an input area. The transcript is
-- rendered from agentls/messageDelta (streamed text, appended as it arrives)
-- and agentls/message (each final message replaces its streamed block); tool
-- calls and results are folded. The input area starts at an extmark with a
-- virtual separator above it; <CR> (normal mode) or <C-s> (insert mode)
-- sends what is typed there. The buffer is attached to the server as an
-- `agentls-chat` document, so `@file:` and `/template` completion work in it.
--
-- This module is the chat's public face; the work is in agentls.chat.*:
--   state          the open chats and the current one
--   geometry       where the transcript ends and the input area begins
--   render         messages as lines, folds, deltas into the transcript
--   notifications  agentls/messageDelta and agentls/message handlers
--   windows        chat buffers, keymaps and the split that shows them
--   turns          sending prompts, cancel, compact, new and resumed sessions
local notifications = require("agentls.chat.notifications")
local render = require("agentls.chat.render")
local state = require("agentls.chat.state")
local turns = require("agentls.chat.turns")
local windows = require("agentls.chat.windows")

local M = {}

M.chats = state.chats

function M.current_session()
  return state.current
end

M.get = state.get

M.render_message = render.render_message
M.foldexpr = render.foldexpr
M.show_message = render.show_message
M.show_delta = render.show_delta
M.note = render.note

M.on_delta = notifications.on_delta
M.on_message = notifications.on_message

M.create = windows.create
M.show = windows.show

M.submit = turns.submit
M.cancel = turns.cancel
M.compact = turns.compact
M.command = turns.command
M.new = turns.new
M.resume = turns.resume
M.sessions = turns.sessions

-- `current` (the current session id) lives in the state module.
return setmetatable(M, {
  __index = function(_, key)
    if key == "current" then
      return state.current
    end
  end,
})
