-- The server's turn notifications (docs/protocol.md): agentls/messageDelta and
-- agentls/message, shown in the chat of their session (opened when the turn
-- was not started here, e.g. by a code action).
local render = require("agentls.chat.render")
local state = require("agentls.chat.state")
local windows = require("agentls.chat.windows")

local M = {}

local function chat_for_notification(session_id, ctx)
  local chat = state.get(session_id)
  if chat then
    return chat
  end
  -- A turn we did not start (a code action's agentls.chat): show it too.
  local client = ctx and vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return nil
  end
  chat = windows.create(client, session_id)
  windows.show(chat)
  return chat
end

function M.on_delta(_, params, ctx)
  if type(params) ~= "table" or type(params.sessionId) ~= "string" then
    return
  end
  local chat = chat_for_notification(params.sessionId, ctx)
  if chat and type(params.delta) == "string" then
    render.show_delta(chat, params.index, params.delta, params.kind)
  end
end

function M.on_message(_, params, ctx)
  if type(params) ~= "table" or type(params.sessionId) ~= "string" then
    return
  end
  local chat = chat_for_notification(params.sessionId, ctx)
  if chat and type(params.message) == "table" then
    render.show_message(chat, params.index, params.message)
  end
end

return M
