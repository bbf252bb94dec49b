-- agentls for Neovim: the agentls language server (inline completions, an
-- agent you chat with, approvals of its edits) through Neovim's own LSP client.
--
--   require("agentls").setup({ cmd?, connect?, init_options?, settings?, inline_completion?, next_edit? })
--
-- See editors/nvim/README.md and :help agentls.
local M = {}

local config = require("agentls.config")

M.version = "0.1.0"

local function handlers()
  local chat = require("agentls.chat")
  local approvals = require("agentls.approvals")
  local status = require("agentls.status")
  return {
    ["agentls/messageDelta"] = chat.on_delta,
    ["agentls/message"] = chat.on_message,
    ["didChangeStatus"] = status.on_did_change_status,
    ["window/showMessageRequest"] = approvals.show_message_request,
    ["workspace/applyEdit"] = approvals.apply_edit,
  }
end

local function create_commands()
  local chat = require("agentls.chat")
  local command = vim.api.nvim_create_user_command
  command("AgentChat", chat.command, {
    nargs = "*",
    range = true,
    desc = "agentls: open the chat and send the prompt (with a range: the selection as context)",
  })
  command("AgentCancel", function()
    chat.cancel()
  end, { desc = "agentls: cancel the running agent turn" })
  command("AgentNew", function()
    chat.new()
  end, { desc = "agentls: start a new chat session" })
  command("AgentSessions", function()
    chat.sessions()
  end, { desc = "agentls: pick a stored session and resume it" })
  command("AgentRestore", function(opts)
    require("agentls.restore").command(opts)
  end, {
    nargs = "?",
    bang = true,
    desc = "agentls: put files back as they were before a turn (! also overwrites your changes)",
  })
  command("AgentCompact", function()
    chat.compact()
  end, { desc = "agentls: summarise the chat's earlier turns to free the model's context" })
end

local function create_autocmds()
  local group = vim.api.nvim_create_augroup("agentls", { clear = true })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if not client or client.name ~= "agentls" then
        return
      end
      require("agentls.inline").attach(ev.buf)
      require("agentls.next_edit").attach(ev.buf)
      require("agentls.status").refresh(client)
    end,
  })
  vim.api.nvim_create_autocmd("LspProgress", {
    group = group,
    callback = function(ev)
      local client = ev.data and vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == "agentls" then
        require("agentls.status").on_progress(ev)
      end
    end,
  })
end

--- Configures and enables the agentls client for every filetype.
---@param opts? table see lua/agentls/config.lua for the options and defaults
function M.setup(opts)
  if vim.fn.has("nvim-0.11") == 0 or not vim.lsp.config then
    vim.notify("agentls: Neovim 0.11 or newer is required (vim.lsp.config)", vim.log.levels.ERROR)
    return
  end
  local options = config.set(opts)
  local inline = require("agentls.inline")

  local target = options.connect_target
  local connect = target and require("agentls.connect")
  vim.lsp.config("agentls", {
    cmd = connect and connect.cmd(target) or options.cmd,
    before_init = connect and connect.before_init(target, options.token_file) or nil,
    cmd_env = options.cmd_env,
    filetypes = options.filetypes,
    root_dir = function(bufnr, on_dir)
      on_dir(require("agentls.client").root_for(bufnr))
    end,
    init_options = options.init_options,
    settings = options.settings or { agentls = vim.empty_dict() },
    handlers = handlers(),
    -- vim.lsp.util.apply_workspace_edit handles documentChanges (versioned
    -- edits, create/rename/delete), but Neovim does not advertise it; the
    -- server needs it for annotated edits and for creating files.
    capabilities = { workspace = { workspaceEdit = { documentChanges = true } } },
    on_init = function(client)
      inline.wrap_requests(client)
    end,
  })
  vim.api.nvim_set_hl(0, "AgentlsChatSeparator", { link = "NonText", default = true })
  vim.api.nvim_set_hl(0, "AgentlsChatTitle", { link = "Title", default = true })
  create_commands()
  create_autocmds()
  if options.inline_completion and options.inline_completion.enabled ~= false then
    inline.set_keymaps(options.inline_completion.keymaps)
  end
  local next_edit = require("agentls.next_edit")
  next_edit.setup_highlights()
  if options.next_edit and options.next_edit.enabled ~= false then
    next_edit.set_keymaps(options.next_edit.keymaps)
  end
  vim.lsp.enable("agentls")
  if not inline.available() and options.inline_completion.enabled ~= false then
    -- Said once, at start-up, rather than on every attach.
    inline.attach(vim.api.nvim_get_current_buf())
  end
end

--- Statusline component: "agentls: <provider> · <model> · idle|<activity> · <n> tok".
---@return string
function M.statusline()
  return require("agentls.status").statusline()
end

return M
