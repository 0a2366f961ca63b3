// What the VS Code tests share: the packaged .vsix installed into code-server, code-server started on a free
// loopback port, headless Chromium driving it, screenshots, and the Spark output channel printed at the end.
// Environment: SPARK_VSIX, SPARK_NPM_TOOLS (node_modules with code-server and playwright-core), SPARK_LSP_BIN,
// SCRATCH (with workspace/), SPARK_SCREENSHOTS, SPARK_CHROMIUM (default /usr/bin/chromium).

"use strict";
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
const net = require("net");
const path = require("path");

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const tools = env("SPARK_NPM_TOOLS");
const { chromium } = require(path.join(tools, "playwright-core"));
const codeServer = path.join(tools, ".bin", "code-server");
const scratch = env("SCRATCH");
const workspace = path.join(scratch, "workspace");
const screenshots = process.env.SPARK_SCREENSHOTS || scratch;
const userData = path.join(scratch, "vscode-user");
const extensions = path.join(scratch, "vscode-extensions");

const log = (message) => console.log(`[vscode] ${message}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

async function waitFor(what, timeoutMs, predicate) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

// The user settings: the server under test, a quiet workbench, and `settings` of the test on top.
function writeSettings(settings) {
  fs.mkdirSync(path.join(userData, "User"), { recursive: true });
  const all = {
    "spark.server.path": env("SPARK_LSP_BIN"),
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "security.workspace.trust.enabled": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "chat.disableAIFeatures": true,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "files.autoSave": "off",
    ...settings,
  };
  fs.writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify(all, null, 2));
}

function installExtension() {
  const result = spawnSync(
    codeServer,
    ["--user-data-dir", userData, "--extensions-dir", extensions, "--install-extension", env("SPARK_VSIX")],
    { encoding: "utf8", timeout: 60000 },
  );
  log(`install-extension: ${(result.stdout + result.stderr).trim()}`);
  check(result.status === 0, `code-server --install-extension failed with ${result.status}`);
}

async function startCodeServer(port) {
  const config = path.join(scratch, "code-server.yaml");
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  const child = spawn(
    codeServer,
    [
      "--user-data-dir", userData,
      "--extensions-dir", extensions,
      "--config", config,
      "--auth", "none",
      "--bind-addr", `127.0.0.1:${port}`,
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      workspace,
    ],
    { stdio: ["ignore", "pipe", "pipe"], detached: false },
  );
  const serverLog = fs.createWriteStream(path.join(scratch, "code-server.log"));
  child.stdout.pipe(serverLog);
  child.stderr.pipe(serverLog);
  await waitFor("code-server /healthz", 30000, async () => {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      return response.ok;
    } catch {
      return false;
    }
  });
  return child;
}

async function screenshot(page, name) {
  fs.mkdirSync(screenshots, { recursive: true });
  const target = path.join(screenshots, `vscode-${name}.png`);
  await page.screenshot({ path: target });
  log(`screenshot ${target}`);
}

async function statusBarText(page) {
  const item = page.locator(".statusbar-item", { hasText: "Spark" }).first();
  if ((await item.count()) === 0) return "";
  return ((await item.textContent()) || "").trim();
}

// Loads the workbench on the workspace folder.
async function openWorkbench(page) {
  await page.goto(`http://127.0.0.1:${page.port}/?folder=${encodeURIComponent(workspace)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: 60000 });
  log("workbench loaded");
}

// Opens `name` through Quick Open and waits until the editor shows `text`.
async function openFile(page, name, text) {
  await page.keyboard.press("Control+P");
  await page.waitForSelector(".quick-input-widget", { state: "visible", timeout: 10000 });
  await page.keyboard.type(name);
  await page.waitForSelector(`.quick-input-list .monaco-list-row:has-text('${name}')`, { timeout: 10000 });
  await page.keyboard.press("Enter");
  await page.waitForSelector(`.monaco-editor .view-lines:has-text('${text}')`, { timeout: 20000 });
  log(`${name} open`);
}

// Waits until the extension has started spark-lsp and the status bar says the model is ready.
async function waitForReady(page) {
  const ready = await waitFor("the Spark status bar item to say ready", 60000, async () => {
    const text = await statusBarText(page);
    check(!/failed|not found|not running/.test(text), `status bar: ${text}`);
    return /^Spark( \d+ ms)?$/.test(text) ? text : null;
  });
  log(`status bar: ${ready}`);
}

// Ctrl+G: `where` is "LINE" or "LINE:COLUMN", both 1-based.
async function goTo(page, where) {
  await page.keyboard.press("Control+G");
  await page.waitForSelector(".quick-input-widget", { state: "visible", timeout: 10000 });
  await page.keyboard.type(where);
  await sleep(200);
  await page.keyboard.press("Enter");
  await page.waitForSelector(".quick-input-widget", { state: "hidden", timeout: 10000 });
}

// The extension's output channel: spark-lsp's stderr and the language client's messages.
function printServerLog() {
  const logs = path.join(userData, "logs");
  const found = [];
  const walk = (dir) => {
    for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name === "Spark.log") found.push(full);
    }
  };
  walk(logs);
  for (const file of found) {
    const lines = fs.readFileSync(file, "utf8").trimEnd().split("\n");
    log(`${file} (last 40 lines):`);
    for (const line of lines.slice(-40)) console.log(`    ${line}`);
  }
}

// Writes the settings, installs the .vsix, starts code-server and Chromium, runs `run(page)`, and exits 0 when it
// returns, 1 when it throws (with the screenshot `vscode-<failureShot>.png`).
async function runTest(settings, run, failureShot = "failure") {
  let server;
  let browser;
  let page;
  let failed = false;
  try {
    writeSettings(settings);
    installExtension();
    const port = await freePort();
    server = await startCodeServer(port);
    browser = await chromium.launch({
      executablePath: process.env.SPARK_CHROMIUM || "/usr/bin/chromium",
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.port = port;
    await run(page);
    log("PASS");
  } catch (error) {
    failed = true;
    console.error(`FAIL: ${error && error.stack ? error.stack : error}`);
    if (page) await screenshot(page, failureShot).catch(() => {});
  } finally {
    printServerLog();
    if (browser) await browser.close().catch(() => {});
    if (server) server.kill("SIGTERM");
  }
  process.exit(failed ? 1 : 0);
}

module.exports = {
  check,
  goTo,
  log,
  openFile,
  openWorkbench,
  runTest,
  screenshot,
  sleep,
  statusBarText,
  userData,
  waitFor,
  waitForReady,
  workspace,
};
