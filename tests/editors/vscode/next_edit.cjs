// Real-editor test of next-edit suggestions in editors/vscode (the packaged .vsix in code-server, headless Chromium).
//
// Opens src/next_edit.rs, renames the local `count` at its declaration to `total` as a person would (the word
// selected with Ctrl+Shift+Right, the new name typed over it), and waits for the hint the extension draws from the
// server's `spark/nextEditChanged` (`⇥ Spark: count → total` after the first other use). Then, for each use: Tab
// moves the selection onto it (checked in the status bar's "Ln, Col (5 selected)"), Tab again applies it and the
// hint moves to the next use. Last, the hint is gone and the saved file is the fixture with every `count` renamed
// and nothing else changed. Screenshots go to SPARK_SCREENSHOTS.
// Environment: as harness.cjs. Ghost text is off: the test is about next edits, which need no model call.

"use strict";
const fs = require("fs");
const path = require("path");
const { check, goTo, log, openFile, openWorkbench, runTest, screenshot, sleep, waitFor, waitForReady, workspace } =
  require("./harness.cjs");

const file = path.join(workspace, "src", "next_edit.rs");

const settings = {
  "spark.inline.enabled": false,
  "spark.nextEdit.enabled": true,
  // No suggest widget or ghost text while the new name is typed: Tab must reach the next-edit binding.
  "editor.inlineSuggest.enabled": false,
  "editor.quickSuggestions": { other: "off", comments: "off", strings: "off" },
  "editor.suggestOnTriggerCharacters": false,
  "editor.wordBasedSuggestions": "off",
};

// The hints drawn by the extension: the text of every `::after` decoration that starts with the hint's marker,
// with the 1-based line it is on.
async function hints(page) {
  return page.evaluate(() => {
    const found = [];
    for (const line of document.querySelectorAll(".monaco-editor .view-line")) {
      for (const span of line.querySelectorAll("span")) {
        const content = getComputedStyle(span, "::after").content;
        if (content && content.includes("Spark:")) {
          found.push({ text: content.replace(/^"|"$/g, ""), top: parseFloat(line.style.top) });
        }
      }
    }
    return found;
  });
}

// The status bar's cursor item, e.g. "Ln 6, Col 18 (5 selected)".
async function cursorText(page) {
  const item = page.locator("#status\\.editor\\.selection");
  if ((await item.count()) === 0) return "";
  return ((await item.first().textContent()) || "").trim();
}

async function lineText(page, line) {
  return page.evaluate((lineNumber) => {
    // The editor's model, as VS Code's own tests read it, is not reachable from the page; the rendered line is.
    const lines = Array.from(document.querySelectorAll(".monaco-editor .view-line"));
    lines.sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
    const element = lines[lineNumber - 1];
    return element ? (element.textContent || "").replace(/\u00a0/g, " ") : null;
  }, line);
}

async function run(page) {
  const before = fs.readFileSync(file, "utf8");
  const lines = before.split("\n");
  check(lines[2] === "    let mut count = 0;", `unexpected fixture line 3: ${JSON.stringify(lines[2])}`);
  const expected = before.replace(/count/g, "total");
  const uses = lines.map((line, index) => (index > 2 && line.includes("count") ? index + 1 : 0)).filter((n) => n);
  check(uses.length === 3, `the fixture has ${uses.length} uses of count below its declaration, expected 3`);

  await openWorkbench(page);
  await openFile(page, "next_edit.rs", "let mut count");
  await waitForReady(page);

  // The rename at the declaration: the word selected from its start and typed over.
  await page.locator(".monaco-editor .view-lines").first().click();
  await goTo(page, "3:13");
  await page.keyboard.press("Control+Shift+ArrowRight");
  await page.keyboard.type("total", { delay: 60 });
  await waitFor("the typed name on line 3", 5000, async () => (await lineText(page, 3)) === "    let mut total = 0;");

  let previousTop = null;
  for (const [step, line] of uses.entries()) {
    // The hint comes from the server's notification by itself once the user pauses (first use), or from the
    // extension's `spark/nextEdit` after it applied one (the others). The hint of the edit just applied may still
    // be on screen for a moment: the next one is the hint on another line.
    const hint = await waitFor(`the hint "Spark: count → total" at line ${line}`, 15000, async () => {
      const shown = await hints(page);
      const fresh = shown.length === 1 && shown[0].text.includes("count → total") && shown[0].top !== previousTop;
      return fresh ? shown[0] : null;
    });
    previousTop = hint.top;
    log(`hint: ${JSON.stringify(hint)}`);
    if (step === 0) await screenshot(page, "next-edit-hint");
    // The rename leaves no selection behind (the editor may take a moment to redraw the status bar).
    const cursorBefore = await waitFor("no selection before Tab", 5000, async () => {
      const text = await cursorText(page);
      return /selected/.test(text) ? null : text;
    });
    log(`before Tab: ${cursorBefore}`);

    await page.keyboard.press("Tab");
    const selected = await waitFor(`Tab to select \`count\` on line ${line}`, 5000, async () => {
      const text = await cursorText(page);
      return new RegExp(`^Ln ${line}, Col \\d+ \\(5 selected\\)$`).test(text) ? text : null;
    });
    log(`after the first Tab: ${selected}`);
    check((await lineText(page, line)) === lines[line - 1], `the first Tab changed line ${line}`);

    await page.keyboard.press("Tab");
    await waitFor(`the second Tab to rename line ${line}`, 5000, async () =>
      (await lineText(page, line)) === lines[line - 1].replace("count", "total"));
    log(`line ${line}: ${JSON.stringify(await lineText(page, line))}`);
  }

  await waitFor("the hint to go once nothing is left to rename", 10000, async () => (await hints(page)).length === 0);
  await screenshot(page, "next-edit-done");
  await page.keyboard.press("Control+S");
  const after = await waitFor("the renamed file to be saved", 10000, () => {
    const text = fs.readFileSync(file, "utf8");
    return text !== before ? text : null;
  });
  await sleep(300);
  check(fs.readFileSync(file, "utf8") === after, "next_edit.rs changed again after saving");
  check(after === expected, `after the next edits next_edit.rs is\n${after}\nexpected\n${expected}`);
  check((await hints(page)).length === 0, "a hint came back after the last edit");
  log(`renamed:\n${after}`);
}

runTest(settings, run, "next-edit-failure");
