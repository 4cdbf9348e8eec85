-- Neovim's own LSP client on `holctl lsp`: open a script, wait for its errors, write them out.
-- Driven by tests/clients/test_editor_nvim.py; everything it needs comes in the environment.
local script = assert(os.getenv("HOLCTL_NVIM_SCRIPT"))
local out = assert(os.getenv("HOLCTL_NVIM_OUT"))
local cmd = vim.fn.json_decode(assert(os.getenv("HOLCTL_NVIM_CMD")))
local wait_ms = tonumber(os.getenv("HOLCTL_NVIM_WAIT_MS") or "60000")

vim.cmd("edit " .. vim.fn.fnameescape(script))
local client = vim.lsp.start_client({ name = "holctl", cmd = cmd, root_dir = vim.fn.fnamemodify(script, ":h") })
vim.lsp.buf_attach_client(0, client)
local function errors()
  return vim.diagnostic.get(0, { severity = vim.diagnostic.severity.ERROR })
end
vim.wait(wait_ms, function() return #errors() > 0 end, 50)

local lines = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(lines, string.format("%d:%d: %s", d.lnum + 1, d.col + 1, (d.message:gsub("\n", " "))))
end
local file = assert(io.open(out, "w"))
file:write(table.concat(lines, "\n"), "\n")
file:close()
print(table.concat(lines, "\n"))
vim.lsp.stop_client(client)
vim.wait(5000, function() return vim.lsp.get_client_by_id(client) == nil end, 50)
vim.cmd("qa!")
