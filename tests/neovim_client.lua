-- Neovim as the editor of tests/test_lsp.py's Neovim test: it starts `torchlint server` as the buffer's language
-- server, waits for its diagnostics, applies the TL002 quick fix the server offers, waits for the diagnostics of
-- the edited text, and writes what it saw to $TL_OUT (JSON). Neovim 0.7 (Debian 12) has no vim.lsp.start.
local python, root, file, out = os.getenv("TL_PYTHON"), os.getenv("TL_ROOT"), os.getenv("TL_FILE"), os.getenv("TL_OUT")
local result = {}

local function code_of(d)
  return d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local config = { name = "torchlint", cmd = { python, "-m", "torchlint", "server" }, root_dir = root }
  local client_id
  if vim.lsp.start then
    client_id = vim.lsp.start(config)
  else
    client_id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(buf, client_id)
  end
  local function seen()
    local found = {}
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      table.insert(found, { code = code_of(d), line = d.lnum, col = d.col })
    end
    table.sort(found, function(a, b) return a.line < b.line end)
    return found
  end
  result.published = vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
  result.before = seen()
  local target
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if code_of(d) == "TL002" then target = d end
  end
  if target == nil then return end
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = target.lnum, character = target.col },
              ["end"] = { line = target.end_lnum, character = target.end_col } },
    context = { diagnostics = {} },  -- the server reads the range; what 0.7 keeps of a diagnostic is not LSP's
  }
  local responses = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", params, 60000)
  local client = vim.lsp.get_client_by_id(client_id)
  result.titles = {}
  for _, response in pairs(responses or {}) do
    for _, action in ipairs(response.result or {}) do
      table.insert(result.titles, action.title)
      if result.applied == nil and action.title:sub(1, 6) == "TL002:" then
        vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
        result.applied = action.title
      end
    end
  end
  result.text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n"
  result.rechecked = vim.wait(60000, function()
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      if code_of(d) == "TL002" then return false end
    end
    return true
  end, 50)
  result.after = seen()
end)
if not ok then result.error = tostring(err) end
local f = io.open(out, "w")
f:write(vim.fn.json_encode(result))
f:close()
vim.cmd("qa!")
