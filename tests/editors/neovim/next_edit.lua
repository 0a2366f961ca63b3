-- Real-editor test of next-edit suggestions in editors/neovim:
-- `nvim --headless -i NONE -u tests/editors/neovim/next_edit.lua`.
--
-- Opens src/next_edit.rs, renames the local `count` at its declaration to `total` as a person would (`ciw`, the
-- new name typed key by key, Esc), and waits for the hint the server pushes (`spark/nextEditChanged`, drawn as an
-- extmark in the namespace `spark.next_edit`) at the first other use. The next-edit key moves the cursor there,
-- pressed again applies that edit; `:SparkNextEditAll` applies the rest. The buffer must then be the fixture with
-- every `count` renamed and nothing else changed, and the hints gone.
-- Environment: as harness.lua. Ghost text is off: the test is about next edits, which need no model call.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
local log, sleep, wait_for, check, feed, type_text = H.log, H.sleep, H.wait_for, H.check, H.feed, H.type_text

-- The next-edit hints as drawn: { row, col, end_row, end_col, hint } per extmark, in buffer order.
local function drawn_hints(buf)
  local ns = vim.api.nvim_get_namespaces()["spark.next_edit"]
  if not ns then
    return {}
  end
  local hints = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local details = mark[4]
    local parts = {}
    for _, chunk in ipairs(details.virt_text or {}) do
      table.insert(parts, chunk[1])
    end
    table.insert(hints, {
      row = mark[2],
      col = mark[3],
      end_row = details.end_row,
      end_col = details.end_col,
      hint = table.concat(parts),
    })
  end
  return hints
end

-- The extmark that carries the hint text, once it says `count → total`.
local function rename_hint(buf)
  for _, mark in ipairs(drawn_hints(buf)) do
    if mark.hint:find("count → total", 1, true) then
      return mark
    end
  end
  return nil
end

local function run()
  local scratch = assert(os.getenv("SCRATCH"), "SCRATCH")
  local version = H.setup_spark({
    ghost_text = { enabled = false, builtin = false },
    inline = { enabled = false },
    keymaps = { next_edit = "<Leader>n" },
  })
  log(string.format("nvim %d.%d.%d", version.major, version.minor, version.patch))

  vim.cmd("edit " .. vim.fn.fnameescape(scratch .. "/workspace/src/next_edit.rs"))
  local buf = vim.api.nvim_get_current_buf()
  check(vim.bo.filetype == "rust", "filetype is " .. vim.bo.filetype)
  wait_for("spark-lsp to attach", 10000, function()
    return require("spark").client(buf) ~= nil
  end)
  local before = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  check(before[3] == "    let mut count = 0;", "unexpected fixture line 3: " .. tostring(before[3]))
  local expected = {}
  for index, line in ipairs(before) do
    expected[index] = line:gsub("count", "total")
  end
  check(not vim.deep_equal(expected, before), "the fixture has no `count`")

  -- The rename, at the declaration: `ciw` on `count`, `total` typed, back to normal mode.
  vim.api.nvim_win_set_cursor(0, { 3, 14 })
  feed("ciw")
  sleep(50)
  type_text("total")
  feed("<Esc>")
  wait_for("normal mode", 3000, function()
    return vim.api.nvim_get_mode().mode == "n"
  end)
  check(vim.api.nvim_buf_get_lines(buf, 2, 3, false)[1] == "    let mut total = 0;", "the rename was not typed")

  -- The hint comes from the server by itself once the user pauses; nothing here asks for it.
  local hint = wait_for("the next-edit hint `count → total`", 15000, function()
    return rename_hint(buf)
  end)
  log("hints: " .. vim.inspect(drawn_hints(buf), { newline = " ", indent = "" }))
  check(hint.row == 5 and hint.col == 12 and hint.end_row == 5 and hint.end_col == 17, string.format(
    "the hint marks %d:%d-%s:%s, expected `count` of line 6 (5:12-5:17)", hint.row, hint.col,
    tostring(hint.end_row), tostring(hint.end_col)))
  check(require("spark.next_edit").is_visible(), "is_visible() is false with the hint drawn")

  -- The key goes there...
  feed("<Leader>n")
  wait_for("the cursor on the predicted edit", 3000, function()
    local cursor = vim.api.nvim_win_get_cursor(0)
    return cursor[1] == 6 and cursor[2] == 12
  end)
  check(vim.api.nvim_buf_get_lines(buf, 5, 6, false)[1] == before[6], "going to the edit changed line 6")

  -- ...and applies it when pressed again there; then the server's fresh list brings the next hint.
  feed("<Leader>n")
  wait_for("line 6 renamed", 3000, function()
    return vim.api.nvim_buf_get_lines(buf, 5, 6, false)[1] == expected[6]
  end)
  local next_hint = wait_for("the hint at the next use (line 9)", 10000, function()
    local mark = rename_hint(buf)
    return mark and mark.row == 8 and mark or nil
  end)
  log("next hint: " .. vim.inspect(next_hint, { newline = " ", indent = "" }))
  check(H.buffer_text(buf) ~= table.concat(expected, "\n"), "one accept renamed more than one use")

  feed(":SparkNextEditAll<CR>")
  wait_for("every use renamed", 5000, function()
    return vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), expected)
  end)
  wait_for("the hints to go once nothing is left to rename", 5000, function()
    return #drawn_hints(buf) == 0
  end)
  sleep(500)
  local after = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  check(vim.deep_equal(after, expected), "after the next edits the buffer is\n" .. table.concat(after, "\n")
    .. "\nexpected\n" .. table.concat(expected, "\n"))
  check(#drawn_hints(buf) == 0, "a hint came back: " .. vim.inspect(drawn_hints(buf)))
  log("renamed:\n" .. table.concat(after, "\n"))
end

H.run(run)
