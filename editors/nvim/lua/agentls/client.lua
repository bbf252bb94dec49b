-- Finding (or starting) the agentls client and talking to it.
local M = {}

M.name = "agentls"

--- The agentls client for a buffer: the one attached to it, else any running one.
---@param bufnr? integer
---@return vim.lsp.Client?
function M.get(bufnr)
  local attached = vim.lsp.get_clients({ name = M.name, bufnr = bufnr or 0 })
  if attached[1] then
    return attached[1]
  end
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    if not client:is_stopped() then
      return client
    end
  end
  return nil
end

local function root_for(bufnr)
  local markers = require("agentls.config").options.root_markers
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name ~= "" and not name:match("^%a[%w+.-]*://") then
    local root = vim.fs.root(bufnr, markers)
    if root then
      return root
    end
  end
  return vim.fs.root(vim.fn.getcwd(), markers) or vim.fn.getcwd()
end
M.root_for = root_for

--- Calls `fn(client)` once a client is running and initialized, starting one
--- (rooted at the current buffer's workspace) when there is none. Never blocks.
---@param fn fun(client: vim.lsp.Client)
function M.with_client(fn)
  local client = M.get()
  if not client then
    local config = vim.lsp.config[M.name]
    if not config then
      vim.notify("agentls: call require('agentls').setup() first", vim.log.levels.ERROR)
      return
    end
    config = vim.deepcopy(config)
    local bufnr = vim.api.nvim_get_current_buf()
    config.root_dir = root_for(bufnr)
    local attach = vim.bo[bufnr].buftype == ""
      and vim.api.nvim_buf_get_name(bufnr) ~= ""
      and vim.bo[bufnr].filetype ~= ""
    local id = vim.lsp.start(config, { bufnr = bufnr, attach = attach })
    client = id and vim.lsp.get_client_by_id(id)
    if not client then
      vim.notify("agentls: the server did not start (:checkhealth agentls)", vim.log.levels.ERROR)
      return
    end
  end
  if client.initialized then
    fn(client)
    return
  end
  local waited = 0
  local timer = assert(vim.uv.new_timer())
  timer:start(
    20,
    20,
    vim.schedule_wrap(function()
      waited = waited + 20
      if client.initialized or client:is_stopped() or waited > 30000 then
        timer:stop()
        if not timer:is_closing() then
          timer:close()
        end
        if client.initialized then
          fn(client)
        else
          vim.notify("agentls: the server did not initialize", vim.log.levels.ERROR)
        end
      end
    end)
  )
end

--- Sends a request; errors are shown, `on_result` gets the result.
---@param client vim.lsp.Client
---@param method string
---@param params any
---@param on_result? fun(result: any)
---@param on_error? fun(err: lsp.ResponseError)
---@return integer? request_id
function M.request(client, method, params, on_result, on_error, bufnr)
  local ok, request_id = client:request(method, params or vim.empty_dict(), function(err, result)
    if err then
      if on_error then
        on_error(err)
      else
        vim.notify(("agentls: %s failed: %s"):format(method, err.message or vim.inspect(err)),
          vim.log.levels.ERROR)
      end
      return
    end
    if on_result then
      on_result(result)
    end
  end, bufnr)
  if not ok then
    vim.notify("agentls: cannot send " .. method .. " (the server stopped?)", vim.log.levels.ERROR)
    return nil
  end
  return request_id
end

--- workspace/executeCommand
function M.command(client, command, arguments, on_result, on_error)
  return M.request(client, "workspace/executeCommand", {
    command = command,
    arguments = arguments or {},
  }, on_result, on_error)
end

return M
