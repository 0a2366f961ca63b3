-- Next-edit suggestions (docs/lsp-extensions.md, `spark/nextEdit` and `spark/nextEditChanged`): the edits Spark
-- predicts the user makes next, drawn as extmarks (namespace `spark.next_edit`); `jump_or_apply()` moves the cursor
-- onto the first one, and applies it when the cursor is already there.
--
-- The server computes the edits for one version of the buffer; they are shown and applied only while the buffer
-- is at that version (`vim.lsp.util.buf_versions`, the version Neovim sent in didOpen/didChange).

local N = {}

N.ns = vim.api.nvim_create_namespace("spark.next_edit")

-- The last prediction for each buffer: { client_id, version, edits }.
local predictions = {}

local function spark()
  return require("spark")
end

local function version_of(buf)
  return vim.lsp.util.buf_versions[buf]
end

local function buffer_of(uri)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.uri_from_bufnr(buf) == uri then
      return buf
    end
  end
  return nil
end

local function encoding_for(prediction)
  local client = vim.lsp.get_client_by_id(prediction.client_id)
  return client and client.offset_encoding or "utf-16"
end

-- 0-based (row, byte col) of an LSP position in `buf`.
local function to_buffer_position(buf, position, encoding)
  local line = spark()._compat.get_line(buf, position.line)
  return position.line, spark()._compat.to_byte_col(line, position.character, encoding)
end

-- The prediction to show and apply in `buf`: made for its current version, with at least one edit.
local function current(buf)
  local prediction = predictions[buf]
  if prediction and not prediction.dismissed and #prediction.edits > 0 and prediction.version == version_of(buf) then
    return prediction
  end
  return nil
end

local function label_of(edit)
  local label = type(edit.label) == "string" and edit.label or ("→ " .. edit.newText)
  return (label:gsub("`", ""))
end

--- Draws the prediction of `buf`: every edit's range highlighted, the hint at the end of the first one's line.
--- Clears the hints when the buffer changed since (the server sends fresh ones once the user pauses).
function N.render(buf)
  if not vim.api.nvim_buf_is_valid(buf) then
    predictions[buf] = nil
    return
  end
  vim.api.nvim_buf_clear_namespace(buf, N.ns, 0, -1)
  local prediction = current(buf)
  if not prediction then
    return
  end
  local encoding = encoding_for(prediction)
  local line_count = vim.api.nvim_buf_line_count(buf)
  for index, edit in ipairs(prediction.edits) do
    local start_row, start_col = to_buffer_position(buf, edit.range.start, encoding)
    local end_row, end_col = to_buffer_position(buf, edit.range["end"], encoding)
    if start_row < line_count and end_row < line_count then
      local opts = { end_row = end_row, end_col = end_col, hl_group = "SparkNextEdit", priority = 150 }
      if index == 1 then
        opts.virt_text = { { "⇥ Spark: " .. label_of(edit), "SparkNextEditHint" } }
        opts.virt_text_pos = "eol"
      end
      pcall(vim.api.nvim_buf_set_extmark, buf, N.ns, start_row, start_col, opts)
    end
  end
end

--- Takes a prediction from the server: the `spark/nextEditChanged` params or the `spark/nextEdit` result.
function N.update(client_id, result)
  if type(result) ~= "table" or type(result.uri) ~= "string" then
    return
  end
  local buf = buffer_of(result.uri)
  if not buf then
    return
  end
  local edits = type(result.edits) == "table" and result.edits or {}
  predictions[buf] = { client_id = client_id, version = result.version, edits = edits }
  N.render(buf)
end

--- The handler of `spark/nextEditChanged`.
function N.on_changed(_, result, ctx)
  N.update(ctx.client_id, result)
end

--- Asks `spark/nextEdit` for the edits predicted at the buffer's current version, from the cursor on; then calls
--- on_done() (also when there is none).
function N.refresh(buf, on_done)
  local client = spark().client(buf)
  if not client then
    if on_done then
      on_done()
    end
    return
  end
  local compat = spark()._compat
  local cursor = vim.api.nvim_win_get_cursor(0)
  local line = compat.get_line(buf, cursor[1] - 1)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = {
      line = cursor[1] - 1,
      character = compat.to_lsp_character(line, cursor[2], client.offset_encoding or "utf-16"),
    },
  }
  compat.client_call(client, "request", "spark/nextEdit", params, function(err, result)
    if not err then
      N.update(client.id, result)
    end
    if on_done then
      on_done()
    end
  end, buf)
end

local function cursor_in(buf, prediction, edit)
  local encoding = encoding_for(prediction)
  local start_row, start_col = to_buffer_position(buf, edit.range.start, encoding)
  local end_row, end_col = to_buffer_position(buf, edit.range["end"], encoding)
  local cursor = vim.api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local after_start = row > start_row or (row == start_row and col >= start_col)
  local before_end = row < end_row or (row == end_row and col <= end_col)
  return after_start and before_end
end

local function jump(buf, prediction)
  local edit = prediction.edits[1]
  local row, col = to_buffer_position(buf, edit.range.start, encoding_for(prediction))
  vim.api.nvim_win_set_cursor(0, { row + 1, col })
end

-- Applies `edits` of `prediction` while the buffer is still at its version, then asks what comes next.
local function apply(buf, prediction, edits)
  if prediction.version ~= version_of(buf) then
    return
  end
  predictions[buf] = nil
  vim.api.nvim_buf_clear_namespace(buf, N.ns, 0, -1)
  vim.lsp.util.apply_text_edits(edits, buf, encoding_for(prediction))
  N.refresh(buf)
end

--- Moves the cursor onto the first predicted edit; when it is already there, applies that edit.
function N.jump_or_apply()
  local buf = vim.api.nvim_get_current_buf()
  local prediction = current(buf)
  if not prediction then
    -- No hint for this version (not sent yet, stale, or notifications off): ask, and only jump.
    N.refresh(buf, function()
      local fresh = current(buf)
      if fresh and vim.api.nvim_get_current_buf() == buf then
        jump(buf, fresh)
      end
    end)
    return
  end
  if cursor_in(buf, prediction, prediction.edits[1]) then
    apply(buf, prediction, { prediction.edits[1] })
  else
    jump(buf, prediction)
  end
end

--- Applies every predicted edit at once.
function N.apply_all()
  local buf = vim.api.nvim_get_current_buf()
  local prediction = current(buf)
  if prediction then
    apply(buf, prediction, prediction.edits)
    return
  end
  N.refresh(buf, function()
    local fresh = current(buf)
    if fresh then
      apply(buf, fresh, fresh.edits)
    else
      vim.notify("Spark: no next edit predicted")
    end
  end)
end

--- Hides the hints until the server predicts something else.
function N.dismiss()
  local buf = vim.api.nvim_get_current_buf()
  if predictions[buf] then
    predictions[buf].dismissed = true
  end
  N.render(buf)
end

--- True when a next-edit hint is shown in the current buffer.
function N.is_visible()
  return current(vim.api.nvim_get_current_buf()) ~= nil
end

--- Hides a buffer's hints once it changes, and forgets them when it goes.
function N.attach(buf)
  local group = vim.api.nvim_create_augroup("spark.next_edit." .. buf, { clear = true })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI", "TextChangedP" }, {
    group = group,
    buffer = buf,
    callback = function()
      if predictions[buf] then
        N.render(buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "BufUnload" }, {
    group = group,
    buffer = buf,
    callback = function()
      predictions[buf] = nil
    end,
  })
end

return N
