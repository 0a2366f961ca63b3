-- Spark for Neovim: starts spark-lsp and shows its ghost text (textDocument/inlineCompletion) as virtual text.
--
-- Works from Neovim 0.7 up. On 0.12+ the built-in `vim.lsp.inline_completion` draws the ghost text by default;
-- older versions (or `ghost_text.builtin = false`) use the renderer in this file: a debounced request as you type,
-- the previous request cancelled, the answer drawn with extmarks, accepted with a key, dismissed on Esc or when
-- the cursor moves away. Next-edit suggestions (`spark/nextEditChanged`) are drawn by next_edit.lua.

local M = {}

local uv = vim.uv or vim.loop
local has_011 = vim.fn.has("nvim-0.11") == 1
local has_010 = vim.fn.has("nvim-0.10") == 1
local has_08 = vim.fn.has("nvim-0.8") == 1

local defaults = {
  -- The server command; `spark-lsp` is looked up on PATH.
  cmd = { "spark-lsp" },
  filetypes = { "rust", "typescript", "typescriptreact", "javascript" },
  root_markers = { "Cargo.toml", "package.json", "tsconfig.json", ".git" },
  -- Sent as `initializationOptions` and as `settings.spark`, see editors/README.md:
  -- model = { path = "...", threads = 4 }, inline = { enabled = true, deadlineMs = 800, maxTokens = 64, route = "local" }
  model = {},
  inline = {},
  -- nextEdit = { enabled = true }; `notify = true` is always sent, so that the server pushes the hints.
  nextEdit = {},
  -- The other server settings (editors/README.md), sent as given when set:
  -- remote = { url = "...", model = "...", apiKeyEnv = "..." }, context = {...}, verify = { compile = true },
  -- tasks = { strongModel = "auto" }.
  remote = nil,
  context = nil,
  verify = nil,
  tasks = nil,
  ghost_text = {
    enabled = true,
    -- Milliseconds of typing pause before a request (own renderer only; the built-in one waits 200 ms).
    debounce_ms = 75,
    -- true: vim.lsp.inline_completion (0.12+); false: the renderer here; nil: built-in where it exists.
    builtin = nil,
    hl_group = "SparkGhostText",
  },
  keymaps = {
    -- Accepts the ghost text; where there is none, the key does what it does without Spark. false: no mapping.
    accept = "<Tab>",
    -- Hides the ghost text. false: no mapping (Esc and moving the cursor still hide it).
    dismiss = "<C-]>",
    -- Normal mode: goes to the next predicted edit, and applies it when the cursor is on it. false: no mapping.
    next_edit = false,
  },
  -- Called as on_attach(client, bufnr) after Spark's own setup of the buffer.
  on_attach = nil,
  -- Merged into the client capabilities.
  capabilities = nil,
}

M.config = vim.deepcopy(defaults)
-- The last object from `spark/status` or `spark/statusChanged`.
M.last_status = nil

local ns = vim.api.nvim_create_namespace("spark.ghost_text")
local augroup = nil
local clients_by_root = {} -- 0.7 only: vim.lsp.start does this bookkeeping on 0.8+.

-- State of the renderer here: one suggestion and one request at a time, for the buffer being edited.
local ghost = nil -- { buf, row, col, tick, text, delete_after }
local pending = nil -- { buf, row, col, tick, client, id }
local timer = nil

-------------------------------------------------------------------------------------------------------------------
-- Compatibility helpers (0.7 → 0.12).

local function client_call(client, method, ...)
  if has_011 then
    return client[method](client, ...)
  end
  return client[method](...)
end

local function spark_client(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = buf, name = "spark" })[1]
  end
  for _, client in pairs(vim.lsp.buf_get_clients(buf)) do
    if client.name == "spark" then
      return client
    end
  end
  return nil
end

local function encoding_of(client)
  return client.offset_encoding or "utf-16"
end

-- Byte column → LSP character in `encoding`.
local function to_lsp_character(line, byte_col, encoding)
  if encoding == "utf-8" then
    return byte_col
  end
  if has_011 then
    return vim.str_utfindex(line, encoding, byte_col, false)
  end
  local utf32, utf16 = vim.str_utfindex(line, byte_col)
  return encoding == "utf-16" and utf16 or utf32
end

-- LSP character in `encoding` → byte column, clamped to the line.
local function to_byte_col(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  if has_011 then
    return vim.str_byteindex(line, encoding, character, false)
  end
  local ok, byte_col = pcall(vim.str_byteindex, line, character, encoding == "utf-16")
  return ok and byte_col or #line
end

local function get_line(buf, row)
  return vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ""
end

local function use_builtin()
  local builtin = M.config.ghost_text.builtin
  local available = vim.lsp.inline_completion ~= nil
  if builtin == nil then
    return available
  end
  return builtin and available
end

local function is_insert_mode()
  local mode = vim.api.nvim_get_mode().mode
  return mode:sub(1, 1) == "i"
end

local function termcodes(keys)
  return vim.api.nvim_replace_termcodes(keys, true, false, true)
end

-------------------------------------------------------------------------------------------------------------------
-- The renderer for clients without built-in ghost text.

local function clear_ghost()
  if ghost and vim.api.nvim_buf_is_valid(ghost.buf) then
    vim.api.nvim_buf_clear_namespace(ghost.buf, ns, 0, -1)
  end
  ghost = nil
end

local function cancel_pending()
  if timer then
    timer:stop()
  end
  if pending and pending.id then
    pcall(client_call, pending.client, "cancel_request", pending.id)
  end
  pending = nil
end

--- Hides the ghost text and cancels the request in flight.
function M.dismiss()
  cancel_pending()
  clear_ghost()
  if use_builtin() then
    local builtin_ns = vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"]
    if builtin_ns then
      vim.api.nvim_buf_clear_namespace(0, builtin_ns, 0, -1)
    end
  end
end

local function render()
  local buf, row, col = ghost.buf, ghost.row, ghost.col
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local lines = vim.split(ghost.text, "\n", { plain = true })
  local hl = M.config.ghost_text.hl_group
  local line = get_line(buf, row)
  local opts = { hl_mode = "combine", priority = 200 }
  if lines[1] ~= "" then
    opts.virt_text = { { lines[1], hl } }
    if has_010 then
      opts.virt_text_pos = "inline"
    elseif col >= #line then
      opts.virt_text_pos = "overlay"
    else
      opts.virt_text_pos = "eol"
    end
  end
  if #lines > 1 then
    opts.virt_lines = {}
    for index = 2, #lines do
      table.insert(opts.virt_lines, { { lines[index], hl } })
    end
  end
  vim.api.nvim_buf_set_extmark(buf, ns, row, math.min(col, #line), opts)
end

-- Reads the first usable item of an InlineCompletionList (or InlineCompletionItem[]) into a ghost at the cursor.
local function ghost_from_result(client, req, result)
  local items = result and (result.items or result) or {}
  if type(items) ~= "table" then
    return nil
  end
  local encoding = encoding_of(client)
  for _, item in ipairs(items) do
    local text = item.insertText
    if type(text) == "table" then
      text = text.value -- a StringValue snippet; shown and inserted as plain text
    end
    if type(text) == "string" and text ~= "" then
      local typed, delete_after = "", ""
      if item.range then
        local start, finish = item.range.start, item.range["end"]
        local cursor_line = get_line(req.buf, req.row)
        -- The range starts on the cursor line at or before the cursor, and ends on it at or after the cursor.
        if start.line == req.row and finish.line == req.row then
          local start_col = to_byte_col(cursor_line, start.character, encoding)
          local end_col = to_byte_col(cursor_line, finish.character, encoding)
          if start_col <= req.col and end_col >= req.col then
            typed = cursor_line:sub(start_col + 1, req.col)
            delete_after = cursor_line:sub(req.col + 1, end_col)
          else
            text = nil
          end
        else
          text = nil
        end
      end
      if text and text:sub(1, #typed) == typed and #text > #typed then
        return {
          buf = req.buf,
          row = req.row,
          col = req.col,
          tick = req.tick,
          text = text:sub(#typed + 1),
          delete_after = delete_after,
        }
      end
    end
  end
  return nil
end

local function request_now()
  local buf = vim.api.nvim_get_current_buf()
  local client = spark_client(buf)
  if not client or not is_insert_mode() or not M.config.ghost_text.enabled then
    return
  end
  cancel_pending()
  local cursor = vim.api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local line = get_line(buf, row)
  local req = { buf = buf, row = row, col = col, tick = vim.api.nvim_buf_get_changedtick(buf), client = client }
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = row, character = to_lsp_character(line, col, encoding_of(client)) },
    context = { triggerKind = 2 }, -- Automatic: typing asked for it
  }
  local ok, id = client_call(client, "request", "textDocument/inlineCompletion", params, function(err, result)
    if pending ~= req then
      return -- superseded; the server answers it anyway and we drop it
    end
    pending = nil
    if err then
      return
    end
    local still_there = vim.api.nvim_get_current_buf() == req.buf
      and is_insert_mode()
      and vim.api.nvim_buf_get_changedtick(req.buf) == req.tick
    if not still_there then
      return
    end
    local now = vim.api.nvim_win_get_cursor(0)
    if now[1] - 1 ~= req.row or now[2] ~= req.col then
      return
    end
    clear_ghost()
    ghost = ghost_from_result(client, req, result)
    if ghost then
      render()
    end
  end, buf)
  if ok then
    req.id = id
    pending = req
  end
end

local function schedule_request()
  if not timer then
    timer = uv.new_timer()
  end
  timer:stop()
  timer:start(M.config.ghost_text.debounce_ms, 0, vim.schedule_wrap(request_now))
end

-- Typing the start of the ghost text keeps the rest of it; anything else asks again.
local function on_text_changed()
  local buf = vim.api.nvim_get_current_buf()
  local cursor = vim.api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  if ghost and ghost.buf == buf and ghost.row == row and col > ghost.col and ghost.delete_after == "" then
    local typed = get_line(buf, row):sub(ghost.col + 1, col)
    if ghost.text:sub(1, #typed) == typed and #ghost.text > #typed then
      ghost.text = ghost.text:sub(#typed + 1)
      ghost.col = col
      ghost.tick = vim.api.nvim_buf_get_changedtick(buf)
      render()
      return
    end
  end
  clear_ghost()
  cancel_pending()
  schedule_request()
end

local function on_cursor_moved()
  if not ghost and not pending then
    return
  end
  local buf = vim.api.nvim_get_current_buf()
  local anchor = ghost or pending
  if vim.api.nvim_buf_get_changedtick(buf) ~= anchor.tick then
    return -- a text change; TextChangedI decides
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  if cursor[1] - 1 ~= anchor.row or cursor[2] ~= anchor.col then
    M.dismiss()
  end
end

-------------------------------------------------------------------------------------------------------------------
-- Ghost text when the user pauses (docs/lsp-extensions.md): the server is told where the cursor is when a buffer
-- is entered or insert mode starts (`spark/didFocus`, so the prompt there is warm before the first keystroke), and
-- asked again when it says that a suggestion its deadline cut is ready (`spark/inlineCompletionReady`).

local function send_focus(buf)
  local client = spark_client(buf)
  if not client or not vim.api.nvim_buf_is_valid(buf) or vim.api.nvim_get_current_buf() ~= buf then
    return
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  local line = get_line(buf, cursor[1] - 1)
  client_call(client, "notify", "spark/didFocus", {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = cursor[1] - 1, character = to_lsp_character(line, cursor[2], encoding_of(client)) },
  })
end

-- The document version Neovim's LSP client last sent for `buf`, or nil when it cannot be read.
local function sent_version(buf)
  local versions = vim.lsp.util and vim.lsp.util.buf_versions
  return versions and versions[buf] or nil
end

local function on_ready(_, params, ctx)
  if not params or not params.textDocument or not M.config.ghost_text.enabled then
    return
  end
  local buf = vim.uri_to_bufnr(params.textDocument.uri)
  local client = ctx and ctx.client_id and vim.lsp.get_client_by_id(ctx.client_id) or spark_client(buf)
  if not client or vim.api.nvim_get_current_buf() ~= buf or not is_insert_mode() then
    return
  end
  local version = sent_version(buf)
  if version ~= nil and version ~= params.textDocument.version then
    return -- typed on since; the next request is on its way
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  local line = get_line(buf, cursor[1] - 1)
  local character = to_lsp_character(line, cursor[2], encoding_of(client))
  if cursor[1] - 1 ~= params.position.line or character ~= params.position.character then
    return
  end
  if M.is_visible() then
    return
  end
  if not use_builtin() then
    request_now()
    return
  end
  -- The built-in ghost text asks only as the user types; its own trigger is the cursor moving in insert mode.
  vim.api.nvim_exec_autocmds("CursorMovedI", { buffer = buf, modeline = false })
end

-------------------------------------------------------------------------------------------------------------------
-- Public API.

--- The spark-lsp client attached to `buf` (default: the current buffer), or nil.
function M.client(buf)
  return spark_client(buf)
end

--- True when a ghost text suggestion is shown in the current buffer.
function M.is_visible()
  local buf = vim.api.nvim_get_current_buf()
  if use_builtin() then
    local builtin_ns = vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"]
    return builtin_ns ~= nil and #vim.api.nvim_buf_get_extmarks(buf, builtin_ns, 0, -1, { limit = 1 }) > 0
  end
  return ghost ~= nil and ghost.buf == buf
end

--- The text the ghost would insert (own renderer), or nil.
function M.suggestion()
  return ghost and ghost.text or nil
end

--- Inserts the shown ghost text at the cursor; returns false when there is none.
function M.accept()
  if use_builtin() then
    return vim.lsp.inline_completion.get() and true or false
  end
  if not ghost or ghost.buf ~= vim.api.nvim_get_current_buf() then
    return false
  end
  local accepted = ghost
  cancel_pending()
  clear_ghost()
  local lines = vim.split(accepted.text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(
    accepted.buf,
    accepted.row,
    accepted.col,
    accepted.row,
    accepted.col + #accepted.delete_after,
    lines
  )
  local end_row = accepted.row + #lines - 1
  local end_col = (#lines == 1 and accepted.col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { end_row + 1, end_col })
  return true
end

--- Asks the server for `spark/status`; calls on_result(status) (nil on error) and remembers the answer.
function M.status(on_result, buf)
  local client = spark_client(buf)
  if not client then
    if on_result then
      on_result(nil, "spark-lsp is not attached to this buffer")
    end
    return
  end
  client_call(client, "request", "spark/status", nil, function(err, result)
    if not err then
      M.last_status = result
    end
    if on_result then
      on_result(result, err and (err.message or vim.inspect(err)) or nil)
    end
  end, buf)
end

local function options()
  return {
    model = M.config.model,
    -- `notifyReady`: the server tells when a suggestion its deadline cut is ready (`spark/inlineCompletionReady`),
    -- and this plugin asks for it again (see on_ready).
    inline = vim.tbl_extend("force", { notifyReady = true }, M.config.inline or {}),
    nextEdit = vim.tbl_extend("force", { notify = true }, M.config.nextEdit or {}),
    remote = M.config.remote,
    context = M.config.context,
    verify = M.config.verify,
    tasks = M.config.tasks,
  }
end

local function notify_configuration()
  local sent = {}
  for _, client in ipairs(vim.lsp.get_clients and vim.lsp.get_clients({ name = "spark" }) or vim.lsp.get_active_clients()) do
    if client.name == "spark" and not sent[client.id] then
      sent[client.id] = true
      client.config.settings = { spark = options() }
      client_call(client, "notify", "workspace/didChangeConfiguration", { settings = { spark = options() } })
    end
  end
end

--- Flips `inline.route` between "local" and "remote" (Super Fast Mode) and tells the server.
function M.toggle_super_fast()
  M.config.inline.route = (M.config.inline.route == "remote") and "local" or "remote"
  notify_configuration()
  vim.notify("Spark: Super Fast Mode " .. (M.config.inline.route == "remote" and "on (remote)" or "off (local)"))
end

--- Runs a server command (`spark.fix`, `spark.generateTests`, `spark.generateRegex`) at the cursor.
function M.execute(command)
  local buf = vim.api.nvim_get_current_buf()
  local client = spark_client(buf)
  if not client then
    vim.notify("Spark: spark-lsp is not attached to this buffer", vim.log.levels.WARN)
    return
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  local line = get_line(buf, cursor[1] - 1)
  local argument = {
    uri = vim.uri_from_bufnr(buf),
    position = { line = cursor[1] - 1, character = to_lsp_character(line, cursor[2], encoding_of(client)) },
  }
  -- The server answers with workspace/applyEdit, which Neovim's LSP client applies.
  client_call(client, "request", "workspace/executeCommand", { command = command, arguments = { argument } }, function(err)
    if err then
      vim.notify("Spark: " .. command .. " failed: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
  end, buf)
end

--- Next-edit suggestions: goes to the first predicted edit; when the cursor is on it, applies it.
function M.next_edit()
  require("spark.next_edit").jump_or_apply()
end

--- Applies every predicted edit.
function M.next_edit_all()
  require("spark.next_edit").apply_all()
end

--- Hides the next-edit hints until the server predicts something else.
function M.next_edit_dismiss()
  require("spark.next_edit").dismiss()
end

-- For next_edit.lua.
M._compat = {
  client_call = client_call,
  get_line = get_line,
  to_byte_col = to_byte_col,
  to_lsp_character = to_lsp_character,
}

-------------------------------------------------------------------------------------------------------------------
-- Starting the server and attaching buffers.

local function find_root(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local dir = name ~= "" and vim.fn.fnamemodify(name, ":p:h") or vim.fn.getcwd()
  while true do
    for _, marker in ipairs(M.config.root_markers) do
      if uv.fs_stat(dir .. "/" .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return name ~= "" and vim.fn.fnamemodify(name, ":p:h") or vim.fn.getcwd()
end

local function set_accept_keymap(buf)
  local key = M.config.keymaps.accept
  if not key then
    return
  end
  local accept = termcodes("<Cmd>lua require('spark').accept()<CR>")
  local fallback = termcodes(key)
  -- An expr mapping decides before any text changes; <Cmd> then edits outside the textlock.
  vim.api.nvim_buf_set_keymap(buf, "i", key, "", {
    expr = true,
    noremap = true,
    silent = true,
    desc = "Spark: accept ghost text",
    callback = function()
      if M.is_visible() then
        return accept
      end
      return fallback
    end,
  })
end

local function on_attach(client, buf)
  if use_builtin() then
    vim.lsp.inline_completion.enable(true, { bufnr = buf })
  else
    local group = vim.api.nvim_create_augroup("spark.ghost_text." .. buf, { clear = true })
    vim.api.nvim_create_autocmd({ "TextChangedI", "TextChangedP" }, {
      group = group,
      buffer = buf,
      callback = on_text_changed,
    })
    vim.api.nvim_create_autocmd("CursorMovedI", { group = group, buffer = buf, callback = on_cursor_moved })
    vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
      group = group,
      buffer = buf,
      callback = function()
        M.dismiss()
      end,
    })
  end
  local focus_group = vim.api.nvim_create_augroup("spark.focus." .. buf, { clear = true })
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertEnter" }, {
    group = focus_group,
    buffer = buf,
    callback = function()
      send_focus(buf)
    end,
  })
  send_focus(buf)
  set_accept_keymap(buf)
  if M.config.keymaps.dismiss then
    vim.api.nvim_buf_set_keymap(buf, "i", M.config.keymaps.dismiss, "<Cmd>lua require('spark').dismiss()<CR>", {
      noremap = true,
      silent = true,
      desc = "Spark: dismiss ghost text",
    })
  end
  require("spark.next_edit").attach(buf)
  if M.config.keymaps.next_edit then
    vim.api.nvim_buf_set_keymap(buf, "n", M.config.keymaps.next_edit, "<Cmd>lua require('spark').next_edit()<CR>", {
      noremap = true,
      silent = true,
      desc = "Spark: go to / apply the next edit",
    })
  end
  if M.config.on_attach then
    M.config.on_attach(client, buf)
  end
end

local function client_config(buf)
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.textDocument = capabilities.textDocument or {}
  capabilities.textDocument.inlineCompletion = capabilities.textDocument.inlineCompletion
    or { dynamicRegistration = false }
  if M.config.capabilities then
    capabilities = vim.tbl_deep_extend("force", capabilities, M.config.capabilities)
  end
  local root = find_root(buf)
  return {
    name = "spark",
    cmd = M.config.cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = options(),
    settings = { spark = options() },
    capabilities = capabilities,
    handlers = {
      ["spark/statusChanged"] = function(_, result)
        M.last_status = result
        vim.api.nvim_exec_autocmds("User", { pattern = "SparkStatusChanged", modeline = false })
      end,
      ["spark/nextEditChanged"] = function(...)
        require("spark.next_edit").on_changed(...)
      end,
      ["spark/inlineCompletionReady"] = on_ready,
    },
    on_attach = on_attach,
  }
end

local function attach(buf)
  if not vim.api.nvim_buf_is_valid(buf) or vim.bo[buf].buftype ~= "" then
    return
  end
  if vim.fn.executable(M.config.cmd[1]) ~= 1 then
    (vim.notify_once or vim.notify)("Spark: " .. M.config.cmd[1] .. " is not executable; set `cmd` in require('spark').setup{}", vim.log.levels.WARN)
    return
  end
  local config = client_config(buf)
  if has_08 then
    vim.lsp.start(config, { bufnr = buf })
    return
  end
  local id = clients_by_root[config.root_dir]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(config)
    clients_by_root[config.root_dir] = id
  end
  if id then
    vim.lsp.buf_attach_client(buf, id)
  end
end

local function create_commands()
  local commands = {
    SparkFix = function()
      M.execute("spark.fix")
    end,
    SparkGenerateTests = function()
      M.execute("spark.generateTests")
    end,
    SparkGenerateRegex = function()
      M.execute("spark.generateRegex")
    end,
    SparkToggleSuperFast = M.toggle_super_fast,
    SparkNextEdit = M.next_edit,
    SparkNextEditAll = M.next_edit_all,
    SparkNextEditDismiss = M.next_edit_dismiss,
    SparkStatus = function()
      M.status(function(status, err)
        if not status then
          vim.notify("Spark: " .. tostring(err), vim.log.levels.WARN)
          return
        end
        local latency = status.lastLatencyMs ~= vim.NIL and status.lastLatencyMs ~= nil
            and string.format(", last ghost text %d ms", status.lastLatencyMs)
          or ""
        local model = type(status.model) == "table" and status.model.path or "no model"
        vim.notify(string.format("Spark: %s, %s%s", status.state, model, latency))
      end)
    end,
  }
  for name, fn in pairs(commands) do
    vim.api.nvim_create_user_command(name, fn, { force = true })
  end
end

--- Configures Spark and starts spark-lsp for the configured filetypes.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  if opts and opts.filetypes then
    M.config.filetypes = opts.filetypes -- lists are replaced, not merged
  end
  vim.cmd("highlight default link SparkGhostText Comment")
  vim.cmd("highlight default link SparkNextEdit DiffText")
  vim.cmd("highlight default link SparkNextEditHint Comment")
  create_commands()
  augroup = vim.api.nvim_create_augroup("spark", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = augroup,
    pattern = M.config.filetypes,
    callback = function(args)
      attach(args.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(M.config.filetypes, vim.bo[buf].filetype) then
      attach(buf)
    end
  end
end

return M
