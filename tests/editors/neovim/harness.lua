-- What the Neovim tests share: a test runs as a coroutine whose sleeps yield to the main loop (so typeahead, LSP
-- replies and autocommands are processed as in a live session), a watchdog, and Spark set up from the environment.
-- Loaded with dofile() by each test; works from Neovim 0.7 up.
-- Environment: SPARK_LSP_BIN, SPARK_REPO_ROOT, SCRATCH, SPARK_NVIM_EXPECT (major.minor this nvim must be).

local H = {}

function H.log(message)
  io.stderr:write(message .. "\n")
end

local finished = false
function H.fail(message)
  if finished then
    return
  end
  finished = true
  H.log("FAIL: " .. message)
  vim.cmd("cquit 1")
end

function H.pass()
  finished = true
  H.log("PASS")
  vim.cmd("qall!")
end

function H.sleep(ms)
  local co = coroutine.running()
  vim.defer_fn(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      H.fail(tostring(err))
    end
  end, ms)
  coroutine.yield()
end

function H.wait_for(what, timeout_ms, predicate)
  local waited = 0
  while waited < timeout_ms do
    local value = predicate()
    if value then
      return value
    end
    H.sleep(50)
    waited = waited + 50
  end
  error("timed out after " .. timeout_ms .. " ms waiting for " .. what, 0)
end

function H.check(condition, message)
  if not condition then
    error(message, 0)
  end
end

function H.feed(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mt", false)
end

-- Types like a person: one key at a time, so that the plugin and the server see every keystroke.
function H.type_text(text)
  for index = 1, #text do
    H.feed(text:sub(index, index))
    H.sleep(25)
  end
end

function H.buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false), "\n")
end

function H.status_now()
  local answer = nil
  require("spark").status(function(status, err)
    answer = status or { error = err }
  end)
  return H.wait_for("spark/status", 5000, function()
    return answer
  end)
end

-- Checks the Neovim version, puts editors/neovim on the runtimepath and calls require("spark").setup(opts) with
-- the server under test.
function H.setup_spark(opts)
  local expect = os.getenv("SPARK_NVIM_EXPECT")
  local version = vim.version()
  H.check(string.format("%d.%d", version.major, version.minor) == expect, "this nvim is not " .. tostring(expect))
  local root = assert(os.getenv("SPARK_REPO_ROOT"), "SPARK_REPO_ROOT")
  vim.opt.runtimepath:prepend(root .. "/editors/neovim")
  vim.o.swapfile = false
  opts.cmd = { (assert(os.getenv("SPARK_LSP_BIN"), "SPARK_LSP_BIN")) }
  require("spark").setup(opts)
  return version
end

-- Runs test() as a coroutine under a watchdog; passes when it returns, fails when it raises.
function H.run(test)
  local watchdog = (vim.uv or vim.loop).new_timer()
  watchdog:start(170000, 0, vim.schedule_wrap(function()
    H.fail("watchdog: the test took more than 170 s")
  end))
  local co = coroutine.create(function()
    local ok, err = pcall(test)
    if ok then
      H.pass()
    else
      H.fail(tostring(err))
    end
  end)
  vim.schedule(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      H.fail(tostring(err))
    end
  end)
end

return H
