-- :AgentRestore[!] [turn] — put the files the agent changed back as they were
-- before a turn of the current chat session (agentls/checkpoints,
-- agentls/restoreCheckpoint; docs/protocol.md "Checkpoints"). Without a
-- turn, vim.ui.select picks one of the turns that changed files. The server
-- sends the restore as a workspace/applyEdit that needs no confirmation, so
-- buffers change like any agent edit (undo works).
-- A file changed by someone else since the agent wrote it is left alone and
-- reported; with ! it is overwritten too. Files changed by run_command are
-- outside checkpoints.
local M = {}

local client_mod = require("agentls.client")

local function chat_mod()
  return require("agentls.chat")
end

local function short_time(iso)
  return type(iso) == "string" and iso:sub(12, 16) or ""
end

--- "Turn 2 · 14:03 · a.txt, sub/d.txt"
function M.format_checkpoint(checkpoint)
  local files = type(checkpoint.files) == "table" and checkpoint.files or {}
  local shown = table.concat(vim.list_slice(files, 1, 4), ", ")
  if #files > 4 then
    shown = shown .. (", +%d more"):format(#files - 4)
  end
  return ("Turn %d · %s · %s"):format(checkpoint.turn, short_time(checkpoint.createdAt), shown)
end

--- The answer as lines: what was restored, what was left alone, the note.
function M.report_lines(turn, result)
  local restored = type(result.restored) == "table" and result.restored or {}
  local conflicts = type(result.conflicts) == "table" and result.conflicts or {}
  local lines = {
    ("agentls: restored %d file%s to before turn %d%s"):format(#restored,
      #restored == 1 and "" or "s", turn, #restored > 0 and (": " .. table.concat(restored, ", ")) or ""),
  }
  for _, conflict in ipairs(conflicts) do
    table.insert(lines, ("  left alone: %s"):format(conflict.reason or conflict.path))
  end
  if #conflicts > 0 then
    table.insert(lines, "  (:AgentRestore! " .. turn .. " overwrites files changed since the agent wrote them)")
  end
  if type(result.note) == "string" then
    table.insert(lines, "  " .. result.note)
  end
  return lines
end

local function report(session_id, turn, result)
  local lines = M.report_lines(turn, result)
  local conflicts = type(result.conflicts) == "table" and #result.conflicts or 0
  vim.notify(table.concat(lines, "\n"), conflicts > 0 and vim.log.levels.WARN or vim.log.levels.INFO)
  local chat = chat_mod().get(session_id)
  if chat then
    chat_mod().note(chat, "> " .. table.concat(lines, "\n> "))
  end
  M.last = { sessionId = session_id, turn = turn, result = result }
end

--- Restores `turn` of `session_id` (force: overwrite conflicts too).
function M.restore(client, session_id, turn, force)
  client_mod.request(client, "agentls/restoreCheckpoint",
    { sessionId = session_id, turn = turn, force = force and true or false },
    function(result)
      report(session_id, turn, type(result) == "table" and result or {})
    end)
end

--- Asks which turn to restore (turns that changed files), then restores it.
function M.pick(client, session_id, force)
  client_mod.request(client, "agentls/checkpoints", { sessionId = session_id }, function(result)
    local checkpoints = type(result) == "table" and result.checkpoints or {}
    if #checkpoints == 0 then
      vim.notify("agentls: no turn of this session changed files; nothing to restore",
        vim.log.levels.INFO)
      return
    end
    local newest_first = {}
    for i = #checkpoints, 1, -1 do
      table.insert(newest_first, checkpoints[i])
    end
    vim.ui.select(newest_first, {
      prompt = "agentls: restore files to before which turn?",
      kind = "agentls.checkpoint",
      format_item = M.format_checkpoint,
    }, function(choice)
      if choice then
        M.restore(client, session_id, choice.turn, force)
      end
    end)
  end)
end

--- :AgentRestore[!] [turn]
function M.command(opts)
  local session_id = chat_mod().current_session()
  if not session_id then
    vim.notify("agentls: no chat session to restore; :AgentSessions resumes one", vim.log.levels.WARN)
    return
  end
  local arg = vim.trim(opts.args or "")
  local turn = nil
  if arg ~= "" then
    turn = tonumber(arg)
    if not turn or turn < 1 or turn ~= math.floor(turn) then
      vim.notify("agentls: :AgentRestore takes a turn number (1 is the first prompt), or none to pick",
        vim.log.levels.ERROR)
      return
    end
  end
  client_mod.with_client(function(client)
    if turn then
      M.restore(client, session_id, turn, opts.bang)
    else
      M.pick(client, session_id, opts.bang)
    end
  end)
end

return M
