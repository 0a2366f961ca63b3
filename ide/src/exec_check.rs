//! Execution checks, the verification tier the user turns on (`verify.compile`, `verify.runTests`): a candidate
//! that passed `edit_check` is type-checked (`cargo check`, `tsc --noEmit`) and generated tests are run
//! (`cargo test`, vitest/jest/node:test) in a scratch copy of the file's crate or package, never in the user's tree.
//!
//! The copy lives under the user's cache directory (`$XDG_CACHE_HOME/spark/scratch/<hash of the root>/src`), is
//! made once per root and then only synced (files whose size or mtime changed); between two checks of one root
//! only the edited file differs. Cargo's build artefacts go to a target directory beside the copy that every
//! check of the root shares, so a second check recompiles the edited crate only. One check runs per root at a
//! time (a lock per root in this process); each command has a time limit and its whole process group is killed
//! when the limit or a cancellation comes.
//!
//! The pure parts — finding the root, building commands, parsing `cargo --message-format=json` and `tsc` output,
//! judging a candidate against the errors of the original text — are plain functions, tested as such.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::kinds::{FileChange, TaskKind};

/// Which execution checks run, and for how long each may take. On by default in the editor (they run only when
/// the user chooses an action, in a scratch copy, never on a keystroke); the CLI and MCP tools run them when
/// asked (`--run`, `run: true`). Without them the evaluation found every test Gemma 3 270M wrote wrong (0 of 42
/// right; 12 offered), and the static checks cannot see a fix's type error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VerifySettings {
    /// Type-check the edited file in a scratch copy of its crate or package before offering an edit.
    pub compile: bool,
    /// Run generated tests in the scratch copy; offered only when they pass.
    pub run_tests: bool,
    /// Time limit of one check (one command), in milliseconds.
    pub timeout_ms: u64,
}

impl Default for VerifySettings {
    fn default() -> Self {
        VerifySettings::all()
    }
}

impl VerifySettings {
    /// Both checks on: the editor's default, and what the CLI's `--run` asks.
    pub fn all() -> VerifySettings {
        VerifySettings { compile: true, run_tests: true, timeout_ms: 60_000 }
    }

    /// No command runs: the CLI and MCP tools without `--run`, and library callers that did not ask.
    pub fn off() -> VerifySettings {
        VerifySettings { compile: false, run_tests: false, ..VerifySettings::all() }
    }

    pub fn any(&self) -> bool {
        self.compile || self.run_tests
    }

    /// The commands these settings let Spark run, for `spark/status`.
    pub fn commands(&self) -> Vec<&'static str> {
        let mut commands = Vec::new();
        if self.compile {
            commands.extend(["cargo check", "tsc --noEmit"]);
        }
        if self.run_tests {
            commands.extend(["cargo test", "vitest run", "jest", "node --test"]);
        }
        commands
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
}

/// The build system of a project root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectKind {
    Cargo,
    Node,
}

/// The directory copied into scratch, and where the edited file sits in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub kind: ProjectKind,
    /// What is copied: the crate, the Cargo workspace around it, or the TypeScript package.
    pub root: PathBuf,
    /// The edited file, relative to `root`.
    pub file: PathBuf,
    /// Cargo: the package to check inside a workspace (`-p`). Node: unused.
    pub package: Option<String>,
    /// Cargo: the crate's directory relative to `root` (where `src/` is). Node: the tsconfig's directory.
    pub crate_dir: PathBuf,
    /// Node: the `node_modules` to link into the copy (the nearest one at or above the root).
    pub node_modules: Option<PathBuf>,
}

/// Finds the project of `file`: the nearest `Cargo.toml` (widened to its workspace when an ancestor manifest has
/// `[workspace]`) for Rust, the nearest `tsconfig.json` or `package.json` for TypeScript.
pub fn find_project(file: &Path) -> Option<Project> {
    let extension = file.extension()?.to_str()?;
    let kind = match extension {
        "rs" => ProjectKind::Cargo,
        "ts" | "tsx" | "mts" | "cts" | "js" | "jsx" => ProjectKind::Node,
        _ => return None,
    };
    let mut dir = file.parent();
    while let Some(current) = dir {
        match kind {
            ProjectKind::Cargo if current.join("Cargo.toml").is_file() => {
                let manifest = std::fs::read_to_string(current.join("Cargo.toml")).ok()?;
                let package = package_name(&manifest);
                let root = workspace_root(current).unwrap_or_else(|| current.to_owned());
                return Some(Project {
                    kind,
                    file: file.strip_prefix(&root).ok()?.to_owned(),
                    crate_dir: current.strip_prefix(&root).ok()?.to_owned(),
                    root,
                    package,
                    node_modules: None,
                });
            }
            ProjectKind::Node if current.join("tsconfig.json").is_file() || current.join("package.json").is_file() => {
                let node_modules = current.ancestors().map(|dir| dir.join("node_modules")).find(|dir| dir.is_dir());
                return Some(Project {
                    kind,
                    root: current.to_owned(),
                    file: file.strip_prefix(current).ok()?.to_owned(),
                    package: None,
                    crate_dir: PathBuf::new(),
                    node_modules,
                });
            }
            _ => {}
        }
        dir = current.parent();
    }
    None
}

/// The `name` under `[package]` of a manifest (a plain reading: enough for `cargo -p`).
pub fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if !in_package {
            continue;
        }
        if let Some(value) = line.strip_prefix("name").map(str::trim_start).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value.trim().trim_matches('"').to_owned());
        }
    }
    None
}

/// The nearest ancestor of `crate_dir` whose manifest declares `[workspace]` (the crate's own counts).
fn workspace_root(crate_dir: &Path) -> Option<PathBuf> {
    crate_dir.ancestors().find_map(|dir| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        manifest.lines().any(|line| line.trim() == "[workspace]").then(|| dir.to_owned())
    })
}

/// An error-level diagnostic of a compiler, keyed the way checks compare them (lines move when code is edited,
/// so they are shown but not compared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompilerError {
    pub file: String,
    pub line: u32,
    pub code: Option<String>,
    pub message: String,
}

impl std::fmt::Display for CompilerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{}:{}: error[{code}]: {}", self.file, self.line, self.message),
            None => write!(f, "{}:{}: error: {}", self.file, self.line, self.message),
        }
    }
}

/// The error-level compiler messages in the output of `cargo check/test --message-format=json`.
pub fn parse_cargo_json(stdout: &str) -> Vec<CompilerError> {
    let mut errors = Vec::new();
    for line in stdout.lines().filter(|line| line.starts_with('{')) {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if value["reason"] != "compiler-message" || value["message"]["level"] != "error" {
            continue;
        }
        let message = value["message"]["message"].as_str().unwrap_or_default().to_owned();
        // "aborting due to 2 previous errors" repeats the others.
        if message.starts_with("aborting due to") {
            continue;
        }
        let spans = value["message"]["spans"].as_array().cloned().unwrap_or_default();
        let primary = spans.iter().find(|span| span["is_primary"] == true).or(spans.first());
        errors.push(CompilerError {
            file: primary.and_then(|span| span["file_name"].as_str()).unwrap_or_default().to_owned(),
            line: primary.and_then(|span| span["line_start"].as_u64()).unwrap_or(0) as u32,
            code: value["message"]["code"]["code"].as_str().map(str::to_owned),
            message,
        });
    }
    errors
}

/// A package the project has not installed (or whose types it lacks): `tsc` cannot find `'node:test'` or
/// `'vitest'` when the project's node_modules or @types are missing. That is the checkout's state, not the
/// candidate's fault, so it neither refuses nor passes anything; a relative import that names no file
/// (`'./missing'`) is still an error.
fn is_uninstalled_package(error: &CompilerError) -> bool {
    let Some(code) = error.code.as_deref() else { return false };
    // "Cannot find name 'process'. Do you need to install type definitions for node?" (and for a test runner,
    // jQuery, Bun): the checkout lacks the @types package. A candidate that imports a module which uses
    // `process` brings that module into a file-only check, and with it this error.
    if matches!(code, "TS2580" | "TS2582" | "TS2591" | "TS2592" | "TS2593" | "TS2867" | "TS2868") {
        return true;
    }
    if !matches!(code, "TS2307" | "TS2792" | "TS7016") {
        return false;
    }
    let quoted = error.message.split('\'').nth(1).unwrap_or("");
    !quoted.is_empty() && !quoted.starts_with('.') && !quoted.starts_with('/')
}

/// The errors in `tsc --pretty false` output: `file(line,col): error TS2322: message`.
pub fn parse_tsc(output: &str) -> Vec<CompilerError> {
    static LINE: OnceLock<regex::Regex> = OnceLock::new();
    let pattern = LINE.get_or_init(|| {
        regex::Regex::new(r"^(?:(.+?)\((\d+),\d+\): )?error (TS\d+): (.*)$").expect("the tsc line pattern compiles")
    });
    output
        .lines()
        .filter_map(|line| pattern.captures(line.trim_end()))
        .map(|found| CompilerError {
            file: found.get(1).map(|file| file.as_str().to_owned()).unwrap_or_default(),
            line: found.get(2).and_then(|line| line.as_str().parse().ok()).unwrap_or(0),
            code: Some(found[3].to_owned()),
            message: found[4].to_owned(),
        })
        .collect()
}

/// `tsc`'s errors without those of packages the checkout has not installed.
fn parse_tsc_errors(output: &str) -> Vec<CompilerError> {
    parse_tsc(output).into_iter().filter(|error| !is_uninstalled_package(error)).collect()
}

/// Whether a compiler error is the diagnostic the user asked to fix: the first line of the diagnostic's message
/// (editors show the compiler's message, sometimes with more lines) equals or contains the compiler's.
pub fn is_target(error: &CompilerError, target_message: &str) -> bool {
    is_target_message(&error.message, target_message)
}

/// [`is_target`] over a compiler's message alone.
pub fn is_target_message(message: &str, target_message: &str) -> bool {
    let target = target_message.lines().next().unwrap_or("").trim();
    !target.is_empty() && (target == message || target.contains(message) || message.contains(target))
}

/// The lines of an edit in the new text: the file (relative to the project root, as compilers name it) and the
/// 1-based lines the inserted text covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditedLines {
    pub file: String,
    pub lines: std::ops::RangeInclusive<u32>,
}

impl EditedLines {
    pub fn of(file: &Path, change: &FileChange) -> EditedLines {
        let first = change.old_text[..change.replace.start].matches('\n').count() as u32 + 1;
        let last = first + change.insert.matches('\n').count() as u32;
        EditedLines { file: file.to_string_lossy().into_owned(), lines: first..=last }
    }

    fn contains(&self, error: &CompilerError) -> bool {
        error.file == self.file && self.lines.contains(&error.line)
    }
}

/// Judges a candidate's compiler errors. No error passes. An error on the edited lines is refused, whether or not
/// the original had it (the edit was meant to leave those lines right). Any other error must be one the original
/// text had too (same file, code and message: an unrelated error elsewhere does not block), and none may be the
/// diagnostic the fix was asked for. `baseline` is `None` when it was not computed (the candidate had no error).
pub fn judge(
    candidate: &[CompilerError],
    baseline: Option<&[CompilerError]>,
    target_message: Option<&str>,
    edited: Option<&EditedLines>,
) -> Result<(), String> {
    let Some(first) = candidate.first() else { return Ok(()) };
    if let Some(error) = candidate.iter().find(|error| edited.is_some_and(|edited| edited.contains(error))) {
        return Err(format!("in the edit: {error}"));
    }
    let Some(baseline) = baseline else { return Err(first.to_string()) };
    let mut allowed: Vec<&CompilerError> =
        baseline.iter().filter(|error| !target_message.is_some_and(|target| is_target(error, target))).collect();
    for error in candidate {
        if target_message.is_some_and(|target| is_target(error, target)) {
            return Err(format!("still there: {error}"));
        }
        let same = allowed
            .iter()
            .position(|old| old.file == error.file && old.code == error.code && old.message == error.message);
        match same {
            Some(idx) => {
                allowed.swap_remove(idx);
            }
            None => return Err(error.to_string()),
        }
    }
    Ok(())
}

/// Counts of a test run, from its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestCounts {
    pub passed: usize,
    pub failed: usize,
}

/// Sums libtest's `test result: ok. 1 passed; 0 failed; …` lines.
pub fn parse_libtest(stdout: &str) -> TestCounts {
    let mut counts = TestCounts::default();
    for line in stdout.lines().filter_map(|line| line.trim().strip_prefix("test result: ")) {
        for part in line.split([';', '.']) {
            let mut words = part.split_whitespace();
            let (Some(number), Some(what)) = (words.next(), words.next()) else { continue };
            let Ok(number) = number.parse::<usize>() else { continue };
            match what {
                "passed" => counts.passed += number,
                "failed" => counts.failed += number,
                _ => {}
            }
        }
    }
    counts
}

/// Counts from vitest (`Tests  2 passed (2)`), jest (`Tests:       1 failed, 2 passed, 3 total`) or node's
/// runner (`# pass 2`, `# fail 0`, or `ℹ pass 2` in its spec reporter).
pub fn parse_js_tests(output: &str) -> TestCounts {
    static COUNT: OnceLock<regex::Regex> = OnceLock::new();
    let count = COUNT.get_or_init(|| regex::Regex::new(r"(\d+) (passed|failed)").expect("the count pattern compiles"));
    let mut counts = TestCounts::default();
    for line in output.lines() {
        let line = strip_ansi(line);
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Tests").filter(|rest| rest.starts_with([' ', ':'])) {
            for found in count.captures_iter(rest) {
                let number: usize = found[1].parse().unwrap_or(0);
                match &found[2] {
                    "passed" => counts.passed += number,
                    _ => counts.failed += number,
                }
            }
        }
        for (prefix, failed) in [("# pass ", false), ("# fail ", true), ("ℹ pass ", false), ("ℹ fail ", true)] {
            if let Some(number) = line.strip_prefix(prefix).and_then(|rest| rest.trim().parse::<usize>().ok()) {
                if failed {
                    counts.failed += number;
                } else {
                    counts.passed += number;
                }
            }
        }
    }
    counts
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// The generated Rust test's name path for libtest's `--exact` filter: the module path of the file inside its
/// crate, `tests`, and the last `#[test]` function of the inserted text.
pub fn rust_test_filter(file_in_crate: &Path, inserted: &str) -> Option<String> {
    let name = inserted
        .split("#[test]")
        .nth(1)?
        .split("fn ")
        .nth(1)?
        .split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
        .next()
        .filter(|name| !name.is_empty())?
        .to_owned();
    let module = rust_module_path(file_in_crate)?;
    Some(if module.is_empty() { format!("tests::{name}") } else { format!("{module}::tests::{name}") })
}

/// `src/lib.rs` → ``, `src/a/b.rs` → `a::b`, `src/a/mod.rs` → `a`; `None` outside `src/`.
pub fn rust_module_path(file_in_crate: &Path) -> Option<String> {
    let rest = file_in_crate.strip_prefix("src").ok()?;
    let mut parts: Vec<String> =
        rest.iter().map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if matches!(parts.first().map(String::as_str), Some("bin")) {
        return None;
    }
    if matches!(parts.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        parts.pop();
    }
    Some(parts.join("::"))
}

/// A command to run in the scratch copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Relative to the scratch copy.
    pub dir: PathBuf,
    /// What the user is told ran, e.g. "cargo check".
    pub label: &'static str,
}

/// `cargo check` (with the test code when `tests`) of the project's package.
pub fn cargo_check_step(project: &Project, tests: bool) -> Step {
    let mut args = vec!["check".to_owned(), "--message-format=json".to_owned(), "--quiet".to_owned()];
    if let Some(package) = &project.package {
        args.extend(["-p".to_owned(), package.clone()]);
    }
    if tests {
        args.push("--tests".to_owned());
    }
    Step { program: "cargo".into(), args, dir: project.crate_dir.clone(), label: "cargo check" }
}

/// `cargo test` of the one generated test, by its exact name.
pub fn cargo_test_step(project: &Project, filter: &str) -> Step {
    let mut args = vec!["test".to_owned(), "--message-format=json".to_owned(), "--quiet".to_owned()];
    if let Some(package) = &project.package {
        args.extend(["-p".to_owned(), package.clone()]);
    }
    let file_in_crate = project.file.strip_prefix(&project.crate_dir).unwrap_or(&project.file);
    let is_bin = file_in_crate == Path::new("src/main.rs");
    args.push(if is_bin { "--bins" } else { "--lib" }.to_owned());
    args.extend(["--".to_owned(), "--exact".to_owned(), filter.to_owned()]);
    Step { program: "cargo".into(), args, dir: project.crate_dir.clone(), label: "cargo test" }
}

/// `tsc --noEmit`: on the project (`-p tsconfig.json`) when it has one, else on the edited file alone (`file`,
/// relative to the project root: a generated test file, not the source it tests, which it imports); incremental,
/// with its build info kept beside the scratch copy so that a second check re-checks only what changed.
pub fn tsc_step(tsc: PathBuf, has_tsconfig: bool, file: &Path, build_info: &Path) -> Step {
    let mut args = vec!["--noEmit".to_owned(), "--pretty".to_owned(), "false".to_owned(), "--incremental".to_owned()];
    args.extend(["--tsBuildInfoFile".to_owned(), build_info.to_string_lossy().into_owned()]);
    if has_tsconfig {
        args.extend(["-p".to_owned(), "tsconfig.json".to_owned()]);
    } else {
        args.extend(
            [
                "--strict",
                "--skipLibCheck",
                "--target",
                "es2022",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
            ]
            .map(str::to_owned),
        );
        args.push(file.to_string_lossy().into_owned());
    }
    Step { program: tsc, args, dir: PathBuf::new(), label: "tsc --noEmit" }
}

/// The test runner of a TypeScript package, from its package.json.
pub fn js_test_step(project: &Project, test_file: &Path, node_major: Option<u32>) -> Result<Step, String> {
    let bin = |name: &str| project.node_modules.as_ref().map(|dir| dir.join(".bin").join(name)).filter(|p| p.exists());
    let file = test_file.to_string_lossy().into_owned();
    match crate::kinds::ts_framework(Some(&project.root.join(&project.file))) {
        crate::kinds::TsFramework::Vitest => {
            let vitest = bin("vitest").ok_or("vitest is not installed in node_modules")?;
            Ok(Step { program: vitest, args: vec!["run".into(), file], dir: PathBuf::new(), label: "vitest run" })
        }
        crate::kinds::TsFramework::Jest => {
            let jest = bin("jest").ok_or("jest is not installed in node_modules")?;
            Ok(Step { program: jest, args: vec!["--runTestsByPath".into(), file], dir: PathBuf::new(), label: "jest" })
        }
        crate::kinds::TsFramework::NodeTest => {
            // Node runs TypeScript itself from 22.6 on (type stripping); before that it needs a loader.
            if node_major.is_some_and(|major| major >= 23) {
                Ok(Step {
                    program: "node".into(),
                    args: vec!["--test".into(), file],
                    dir: PathBuf::new(),
                    label: "node --test",
                })
            } else if node_major.is_some_and(|major| major >= 22) {
                let args = vec!["--experimental-strip-types".into(), "--test".into(), file];
                Ok(Step { program: "node".into(), args, dir: PathBuf::new(), label: "node --test" })
            } else {
                Err("node:test on TypeScript needs Node 22.6 or later".to_owned())
            }
        }
    }
}

/// node:test on a Node that cannot run TypeScript: the project's `tsc` compiles it (CommonJS packages only) into
/// `out_dir` (outside the copy), then node runs the JavaScript of the test file. Returns both steps.
pub fn node_test_via_tsc(
    project: &Project,
    tsc: PathBuf,
    test_file: &Path,
    out_dir: &Path,
) -> Result<[Step; 2], String> {
    let package = std::fs::read_to_string(project.root.join("package.json")).unwrap_or_default();
    let package: serde_json::Value = serde_json::from_str(&package).unwrap_or_default();
    if package["type"] == "module" {
        return Err("node:test on an ES-module TypeScript package needs Node 22.6 or later".to_owned());
    }
    let out = out_dir.to_string_lossy().into_owned();
    let mut args: Vec<String> = if project.root.join("tsconfig.json").is_file() {
        ["-p", "tsconfig.json", "--noEmit", "false", "--incremental", "false", "--composite", "false"]
            .map(str::to_owned)
            .to_vec()
    } else {
        let mut args: Vec<String> =
            ["--target", "es2022", "--module", "commonjs", "--esModuleInterop", "--skipLibCheck"]
                .map(str::to_owned)
                .to_vec();
        args.push(test_file.to_string_lossy().into_owned());
        args
    };
    args.extend(["--outDir".to_owned(), out, "--rootDir".to_owned(), ".".to_owned()]);
    args.extend(["--declaration", "false", "--sourceMap", "false", "--pretty", "false"].map(str::to_owned));
    let emit = Step { program: tsc, args, dir: PathBuf::new(), label: "tsc" };
    let javascript = out_dir.join(test_file).with_extension("js");
    let run = Step {
        program: "node".into(),
        args: vec!["--test".into(), javascript.to_string_lossy().into_owned()],
        dir: PathBuf::new(),
        label: "node --test",
    };
    Ok([emit, run])
}

fn js_label(framework: crate::kinds::TsFramework) -> &'static str {
    match framework {
        crate::kinds::TsFramework::Vitest => "vitest run",
        crate::kinds::TsFramework::Jest => "jest",
        crate::kinds::TsFramework::NodeTest => "node --test",
    }
}

/// What a command left behind.
#[derive(Debug)]
pub struct Ran {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub ms: u64,
}

/// Why a check could not be made (as opposed to a candidate that failed it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    NoProject,
    Tool(String),
}

/// One task's execution checks: built once per task, asked once per candidate that passed `edit_check`.
pub struct Gate<'a> {
    settings: VerifySettings,
    kind: TaskKind,
    path: Option<&'a Path>,
    original: &'a str,
    target_message: Option<&'a str>,
    /// The original text's errors and the compiler's whole output for it (where the fix path reads the
    /// compiler's own suggestions), computed at most once per task: when a candidate has errors, or when asked.
    baseline: tokio::sync::OnceCell<Result<(Vec<CompilerError>, String), String>>,
    /// What ran for the candidate that passed, for the outcome's title.
    passed: Mutex<Vec<String>>,
}

impl<'a> Gate<'a> {
    pub fn new(
        settings: VerifySettings,
        kind: TaskKind,
        path: Option<&'a Path>,
        original: &'a str,
        target_message: Option<&'a str>,
    ) -> Gate<'a> {
        Gate {
            settings,
            kind,
            path,
            original,
            target_message,
            baseline: tokio::sync::OnceCell::new(),
            passed: Mutex::new(Vec::new()),
        }
    }

    fn compile_on(&self) -> bool {
        self.settings.compile
    }

    fn tests_on(&self) -> bool {
        self.settings.run_tests && self.kind == TaskKind::Tests
    }

    /// Runs the checks the settings turn on for one candidate. `Err` is the refusal to record; a project that
    /// cannot be checked (no manifest, no compiler) lets the candidate through, logged, with nothing claimed.
    pub async fn check(&self, change: &FileChange, cancel: &CancellationToken) -> Result<(), String> {
        self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
        if !self.compile_on() && !self.tests_on() {
            return Ok(());
        }
        let Some(path) = self.path else {
            tracing::info!("execution check skipped: the document has no file path");
            return Ok(());
        };
        let Some(project) = find_project(path) else {
            tracing::info!(path = %path.display(), "execution check skipped: no Cargo.toml, tsconfig.json or package.json above the file");
            return Ok(());
        };
        match self.check_in(&project, change, cancel).await {
            Ok(ran) => {
                *self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = ran;
                Ok(())
            }
            Err(Checked::Refused(reason)) => Err(reason),
            Err(Checked::Unchecked(why)) => {
                tracing::warn!(?why, "execution check skipped");
                Ok(())
            }
        }
    }

    /// Whether candidates are type-checked: `verify.compile` on and a crate or package around the document (its
    /// toolchain may still turn out to be missing: then a candidate passes unchecked, see [`Gate::ran_any`]).
    pub fn compiles(&self) -> bool {
        self.compile_on() && self.path.is_some_and(|path| find_project(path).is_some())
    }

    /// Whether a command ran for the last candidate that passed (false: it passed unchecked, no project or tool).
    pub fn ran_any(&self) -> bool {
        !self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_empty()
    }

    /// What the last accepted candidate passed, e.g. " (cargo check passed, 812 ms)", or "".
    pub fn summary(&self) -> String {
        let passed = self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if passed.is_empty() {
            String::new()
        } else {
            format!(" ({})", passed.join(", "))
        }
    }

    async fn check_in(
        &self,
        project: &Project,
        change: &FileChange,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, Checked> {
        let scratch = Scratch::lock(project).await?;
        let edited_path = match &change.path {
            None => project.file.clone(),
            Some(other) => other.strip_prefix(&project.root).map(Path::to_owned).map_err(|_| {
                Checked::Unchecked(Unchecked::Tool(format!("{} is outside the project", other.display())))
            })?,
        };
        let new_text = change.new_text();
        let mut ran = Vec::new();
        match project.kind {
            ProjectKind::Cargo => {
                let filter = if self.tests_on() {
                    let file_in_crate = project.file.strip_prefix(&project.crate_dir).unwrap_or(&project.file);
                    Some(rust_test_filter(file_in_crate, &change.insert).ok_or_else(|| {
                        Checked::Unchecked(Unchecked::Tool("no test name in the generated code".to_owned()))
                    })?)
                } else {
                    None
                };
                // `cargo test` compiles the tests itself: a separate `cargo check` would only repeat that work.
                if self.compile_on() && filter.is_none() {
                    let step = cargo_check_step(project, self.kind == TaskKind::Tests);
                    let candidate = scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?;
                    let errors = parse_cargo_json(&candidate.stdout);
                    let edited = EditedLines::of(&edited_path, change);
                    self.judge_errors(&scratch, &edited, &step, &errors, parse_cargo_json, cancel).await?;
                    // A failure without a compiler error is the toolchain's or the environment's (no toolchain
                    // for this HOME, an offline registry), not the candidate's: nothing is claimed either way.
                    if errors.is_empty() && candidate.status != Some(0) {
                        let why = format!("cargo check failed: {}", last_line(&candidate.stderr));
                        return Err(Checked::Unchecked(Unchecked::Tool(why)));
                    }
                    ran.push(format!("cargo check passed, {} ms", candidate.ms));
                }
                if let Some(filter) = filter {
                    let step = cargo_test_step(project, &filter);
                    let outcome = scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?;
                    let errors = parse_cargo_json(&outcome.stdout);
                    if let Some(error) = errors.first() {
                        return Err(Checked::Refused(format!("cargo test: {error}")));
                    }
                    let counts = parse_libtest(&outcome.stdout);
                    let started = outcome.stdout.lines().any(|line| line.starts_with("running "));
                    if !started && outcome.status != Some(0) {
                        // No compiler error and no test started: the toolchain failed, not the test.
                        let why = format!("cargo test failed: {}", last_line(&outcome.stderr));
                        return Err(Checked::Unchecked(Unchecked::Tool(why)));
                    }
                    if counts.failed > 0 || outcome.status != Some(0) {
                        let panic = outcome.stdout.lines().find(|line| line.contains("panicked at")).map(str::trim);
                        return Err(Checked::Refused(format!(
                            "cargo test: the generated test fails{}",
                            panic.map(|line| format!(": {line}")).unwrap_or_default()
                        )));
                    }
                    if counts.passed == 0 {
                        return Err(Checked::Refused(format!("cargo test: no test named {filter} ran")));
                    }
                    ran.push(format!("cargo test passed, {} ms", outcome.ms));
                }
            }
            ProjectKind::Node => {
                if self.compile_on() {
                    let tsc = find_tsc(project).ok_or_else(|| {
                        Checked::Unchecked(Unchecked::Tool("no tsc in node_modules/.bin or on PATH".to_owned()))
                    })?;
                    let has_tsconfig = project.root.join("tsconfig.json").is_file();
                    let build_info = scratch.target.join("tsc.tsbuildinfo");
                    let step = tsc_step(tsc, has_tsconfig, &edited_path, &build_info);
                    let candidate = scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?;
                    let errors = parse_tsc_errors(&candidate.stdout);
                    let edited = EditedLines::of(&edited_path, change);
                    self.judge_errors(&scratch, &edited, &step, &errors, parse_tsc_errors, cancel).await?;
                    // tsc exits non-zero for the errors `parse_tsc_errors` leaves out (a package the checkout has
                    // not installed) too: only a failure with no error reported at all is the toolchain's.
                    if parse_tsc(&candidate.stdout).is_empty() && candidate.status != Some(0) {
                        let why = format!("tsc failed: {}", last_line(&candidate.stderr));
                        return Err(Checked::Unchecked(Unchecked::Tool(why)));
                    }
                    ran.push(format!("tsc passed, {} ms", candidate.ms));
                }
                if self.tests_on() {
                    let framework = crate::kinds::ts_framework(Some(&project.root.join(&project.file)));
                    let outcome = match js_test_step(project, &edited_path, node_major().await) {
                        Ok(step) => scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?,
                        Err(why) => {
                            let tsc = find_tsc(project)
                                .filter(|_| framework == crate::kinds::TsFramework::NodeTest)
                                .ok_or(Checked::Unchecked(Unchecked::Tool(why)))?;
                            let out_dir = scratch.target.join("js");
                            let _ = std::fs::remove_dir_all(&out_dir);
                            let [emit, run] = node_test_via_tsc(project, tsc, &edited_path, &out_dir)
                                .map_err(|why| Checked::Unchecked(Unchecked::Tool(why)))?;
                            // Type errors still emit JavaScript; whether the test runs is what is asked here.
                            let emitted =
                                scratch.run_with(&edited_path, &new_text, &emit, self.settings, cancel).await?;
                            if !Path::new(&run.args[1]).is_file() {
                                let reason = parse_tsc(&emitted.stdout).first().map(ToString::to_string);
                                return Err(Checked::Refused(format!(
                                    "tsc: the test did not compile{}",
                                    reason.map(|error| format!(": {error}")).unwrap_or_default()
                                )));
                            }
                            let mut outcome = scratch.run(&run, self.settings, cancel).await?;
                            outcome.ms += emitted.ms;
                            outcome
                        }
                    };
                    let label = js_label(framework);
                    let output = format!("{}\n{}", outcome.stdout, outcome.stderr);
                    let counts = parse_js_tests(&output);
                    if outcome.status != Some(0) || counts.failed > 0 {
                        return Err(Checked::Refused(format!("{label}: the generated test fails")));
                    }
                    if counts.passed == 0 {
                        return Err(Checked::Refused(format!("{label}: no test ran")));
                    }
                    ran.push(format!("{label} passed, {} ms", outcome.ms));
                }
            }
        }
        Ok(ran)
    }

    /// Refuses a candidate whose errors the original text did not have; the original's errors are computed once
    /// per task, and only when a candidate has any.
    async fn judge_errors(
        &self,
        scratch: &Scratch,
        edited: &EditedLines,
        step: &Step,
        errors: &[CompilerError],
        parse: impl Fn(&str) -> Vec<CompilerError>,
        cancel: &CancellationToken,
    ) -> Result<(), Checked> {
        if errors.is_empty() {
            return Ok(());
        }
        // An error on the edited lines refuses the candidate whatever the original had: no need to compile it.
        if let Some(error) = errors.iter().find(|error| edited.contains(error)) {
            return Err(Checked::Refused(format!("{}: in the edit: {error}", step.label)));
        }
        let baseline = self.baseline(scratch, Path::new(&edited.file), step, parse, cancel).await;
        let baseline = baseline.as_ref().ok().map(|(errors, _)| errors.as_slice());
        judge(errors, baseline, self.target_message, Some(edited))
            .map_err(|reason| Checked::Refused(format!("{}: {reason}", step.label)))
    }

    /// The original text's errors and output under `step`, run once per task.
    async fn baseline(
        &self,
        scratch: &Scratch,
        edited_path: &Path,
        step: &Step,
        parse: impl Fn(&str) -> Vec<CompilerError>,
        cancel: &CancellationToken,
    ) -> &Result<(Vec<CompilerError>, String), String> {
        self.baseline
            .get_or_init(|| async {
                // The original of the edited file (a created test file had none).
                let original = if edited_path == scratch.project.file { Some(self.original) } else { None };
                match scratch.run_original(edited_path, original, step, self.settings, cancel).await {
                    Ok(ran) => Ok((parse(&ran.stdout), ran.stdout)),
                    Err(error) => Err(format!("{error:?}")),
                }
            })
            .await
    }

    /// The compiler's output for the task's document as it is (`cargo check --message-format=json`, or `tsc`),
    /// the same run that candidates' errors are judged against: the fix path reads the compiler's own suggested
    /// edits from it. `None` when `verify.compile` is off or no compiler could run here.
    pub async fn original_output(&self, cancel: &CancellationToken) -> Option<(Project, String)> {
        if !self.compile_on() {
            return None;
        }
        let project = find_project(self.path?)?;
        let scratch = Scratch::lock(&project).await.ok()?;
        let baseline = match project.kind {
            ProjectKind::Cargo => {
                let step = cargo_check_step(&project, self.kind == TaskKind::Tests);
                self.baseline(&scratch, &project.file, &step, parse_cargo_json, cancel).await
            }
            ProjectKind::Node => {
                let step = tsc_step(
                    find_tsc(&project)?,
                    project.root.join("tsconfig.json").is_file(),
                    &project.file,
                    &scratch.target.join("tsc.tsbuildinfo"),
                );
                self.baseline(&scratch, &project.file, &step, parse_tsc_errors, cancel).await
            }
        };
        baseline.as_ref().ok().map(|(_, output)| (project.clone(), output.clone()))
    }
}

/// A scratch copy held for a task that runs code of its own there (characterisation tests): the task writes
/// files into the copy and runs commands with a time limit and a cap on their output; the process group is
/// killed at either. The next check of the root syncs the copy back to the user's tree.
pub struct ScratchSession {
    scratch: Scratch,
}

/// What a command run by a [`ScratchSession`] left: its output up to the cap, even when it was killed.
#[derive(Debug, Clone, Default)]
pub struct Capped {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub ms: u64,
    /// Killed at the time limit.
    pub timed_out: bool,
    /// Killed for writing more than the cap.
    pub truncated: bool,
}

/// The most a command run by a [`ScratchSession`] may write to each of stdout and stderr.
pub const OUTPUT_CAP: usize = 4 << 20;

impl Gate<'_> {
    /// The scratch copy of the document's project, locked, for a task that runs the user's code there. `Err`
    /// says why no code may run: `verify.runTests` off, a document without a file, no project around it.
    pub async fn scratch_session(&self) -> Result<ScratchSession, String> {
        if !self.tests_on() {
            return Err("verify.runTests is off".to_owned());
        }
        let path = self.path.ok_or("the document has no file on disk")?;
        let project = find_project(path).ok_or("no Cargo.toml, tsconfig.json or package.json above the file")?;
        let scratch = Scratch::lock(&project).await.map_err(|error| format!("{error:?}"))?;
        Ok(ScratchSession { scratch })
    }

    /// The time limit of one command under these settings.
    pub fn time_limit(&self) -> Duration {
        self.settings.timeout()
    }
}

impl ScratchSession {
    pub fn project(&self) -> &Project {
        &self.scratch.project
    }

    /// The copy's root directory.
    pub fn copy_dir(&self) -> &Path {
        &self.scratch.copy
    }

    /// The directory beside the copy for build output (cargo's target directory, emitted JavaScript).
    pub fn target_dir(&self) -> &Path {
        &self.scratch.target
    }

    /// Writes `text` at `file` (relative to the project root) in the copy.
    pub fn write(&self, file: &Path, text: &str) -> Result<(), String> {
        let destination = self.scratch.copy.join(file);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|error| error.to_string())?;
        }
        std::fs::write(&destination, text).map_err(|error| format!("{}: {error}", destination.display()))
    }

    /// Runs `step` in the copy with `env` added; killed (its whole process group) at `limit`, at cancellation, or
    /// when it writes more than [`OUTPUT_CAP`]. What it wrote until then is kept. `Err`: it could not start.
    pub async fn run(
        &self,
        step: &Step,
        env: &[(&str, String)],
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<Capped, String> {
        let mut command = tokio::process::Command::new(&step.program);
        command
            .args(&step.args)
            .current_dir(self.scratch.copy.join(&step.dir))
            .env("CARGO_TARGET_DIR", &self.scratch.target)
            .env("CARGO_TERM_COLOR", "never")
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .envs(env.iter().map(|(key, value)| (*key, value.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        std::fs::create_dir_all(&self.scratch.target).map_err(|error| error.to_string())?;
        let started = Instant::now();
        let mut child = command.spawn().map_err(|error| format!("{}: {error}", step.program.display()))?;
        let group = child.id().and_then(|pid| i32::try_from(pid).ok());
        let kill_group = || {
            if let Some(pid) = group {
                // SAFETY: killpg only sends a signal; the group is the one this run started (`process_group(0)`).
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
        };
        let (mut stdout_pipe, mut stderr_pipe) = (child.stdout.take(), child.stderr.take());
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut capped = Capped::default();
        {
            let read = async {
                let (out_full, err_full) = tokio::join!(
                    read_capped(stdout_pipe.as_mut(), &mut stdout),
                    read_capped(stderr_pipe.as_mut(), &mut stderr)
                );
                out_full || err_full
            };
            tokio::select! {
                full = read => {
                    if full {
                        kill_group();
                        capped.truncated = true;
                    }
                }
                _ = tokio::time::sleep(limit) => {
                    kill_group();
                    capped.timed_out = true;
                }
                _ = cancel.cancelled() => {
                    kill_group();
                    return Err(format!("{} cancelled", step.label));
                }
            }
        }
        // The pipes are closed or the group killed: waiting is short (a grandchild keeping a pipe open was
        // killed with its group).
        let waited = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        capped.status = match waited {
            Ok(Ok(status)) if !capped.timed_out && !capped.truncated => status.code(),
            _ => None,
        };
        capped.stdout = String::from_utf8_lossy(&stdout).into_owned();
        capped.stderr = String::from_utf8_lossy(&stderr).into_owned();
        capped.ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(command = step.label, status = ?capped.status, ms = capped.ms, timed_out = capped.timed_out, "scratch command ran");
        Ok(capped)
    }
}

/// Reads `pipe` to its end into `out`, at most [`OUTPUT_CAP`] bytes; true when the cap was reached.
async fn read_capped(pipe: Option<&mut (impl tokio::io::AsyncRead + Unpin)>, out: &mut Vec<u8>) -> bool {
    use tokio::io::AsyncReadExt;
    let Some(pipe) = pipe else { return false };
    let mut buffer = [0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(n_read) => {
                let room = OUTPUT_CAP.saturating_sub(out.len());
                out.extend_from_slice(&buffer[..n_read.min(room)]);
                if n_read >= room {
                    return true;
                }
            }
        }
    }
}

/// `cargo test --no-run` of the project's package: builds the test binary of the file's target; its path is in
/// the JSON output ([`test_executable`]).
pub fn cargo_build_tests_step(project: &Project) -> Step {
    let mut step = cargo_test_step(project, "");
    let separator = step.args.iter().position(|arg| arg == "--").unwrap_or(step.args.len());
    step.args.truncate(separator);
    step.args.push("--no-run".to_owned());
    step.label = "cargo test --no-run";
    step
}

/// The test binary in the output of `cargo test --no-run --message-format=json`.
pub fn test_executable(stdout: &str) -> Option<PathBuf> {
    stdout.lines().filter(|line| line.starts_with('{')).find_map(|line| {
        let value = serde_json::from_str::<serde_json::Value>(line).ok()?;
        if value["reason"] != "compiler-artifact" || value["profile"]["test"] != true {
            return None;
        }
        value["executable"].as_str().map(PathBuf::from)
    })
}

/// The project's `tsc` (its own in node_modules/.bin, else one on PATH).
pub fn project_tsc(project: &Project) -> Option<PathBuf> {
    find_tsc(project)
}

/// Why a check did not pass.
#[derive(Debug)]
enum Checked {
    Refused(String),
    Unchecked(Unchecked),
}

fn last_line(text: &str) -> &str {
    text.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("").trim()
}

/// The project's own `tsc`, else one on PATH.
fn find_tsc(project: &Project) -> Option<PathBuf> {
    if let Some(tsc) = project.node_modules.as_ref().map(|dir| dir.join(".bin/tsc")).filter(|tsc| tsc.exists()) {
        return Some(tsc);
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join("tsc")).find(|tsc| tsc.is_file())
}

async fn node_major() -> Option<u32> {
    let output = tokio::process::Command::new("node").arg("--version").output().await.ok()?;
    let version = String::from_utf8_lossy(&output.stdout);
    version.trim().trim_start_matches('v').split('.').next()?.parse().ok()
}

/// The user's cache directory for Spark: `$XDG_CACHE_HOME/spark`, else `~/.cache/spark`.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("spark"))
}

/// FNV-1a of the root's path: a stable name for its scratch directory.
pub fn root_hash(root: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in root.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Directories never copied: build output, VCS data, dependencies (linked instead).
const SKIPPED: &[&str] = &["target", ".git", "node_modules", ".hg", ".svn"];

/// Files the tools write into the copy when the source has none; kept so that they are not made again (cargo
/// would resolve the dependencies anew at every check).
const GENERATED: &[&str] = &["Cargo.lock", "tsconfig.tsbuildinfo"];

/// A root's scratch copy, held under its lock.
struct Scratch {
    project: Project,
    /// The copy of the root.
    copy: PathBuf,
    /// Cargo's target directory, shared by every check of the root.
    target: PathBuf,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

fn locks() -> &'static Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    LOCKS.get_or_init(Default::default)
}

impl Scratch {
    /// Takes the root's lock and syncs its copy with the source tree (off the async threads).
    async fn lock(project: &Project) -> Result<Scratch, Checked> {
        let base = cache_dir()
            .ok_or_else(|| {
                Checked::Unchecked(Unchecked::Tool("no cache directory (HOME and XDG_CACHE_HOME unset)".into()))
            })?
            .join("scratch")
            .join(root_hash(&project.root));
        let lock = locks()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(project.root.clone())
            .or_default()
            .clone();
        let guard = lock.lock_owned().await;
        let copy = base.join("src");
        let (root, copy_for_sync, node_modules) = (project.root.clone(), copy.clone(), project.node_modules.clone());
        let synced = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let copied = sync_tree(&root, &copy_for_sync)?;
            if let Some(node_modules) = node_modules {
                let link = copy_for_sync.join("node_modules");
                if std::fs::read_link(&link).ok().as_deref() != Some(node_modules.as_path()) {
                    let _ = std::fs::remove_file(&link);
                    std::os::unix::fs::symlink(&node_modules, &link)?;
                }
            }
            Ok::<_, std::io::Error>((copied, started.elapsed()))
        })
        .await
        .map_err(|error| Checked::Unchecked(Unchecked::Tool(format!("sync: {error}"))))?
        .map_err(|error| Checked::Unchecked(Unchecked::Tool(format!("copying {}: {error}", project.root.display()))))?;
        tracing::debug!(copied = synced.0, ms = synced.1.as_millis() as u64, "scratch copy synced");
        Ok(Scratch { project: project.clone(), copy, target: base.join("target"), _guard: guard })
    }

    /// Writes `text` at `file` in the copy and runs `step`.
    async fn run_with(
        &self,
        file: &Path,
        text: &str,
        step: &Step,
        settings: VerifySettings,
        cancel: &CancellationToken,
    ) -> Result<Ran, Checked> {
        let destination = self.copy.join(file);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?;
        }
        std::fs::write(&destination, text).map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?;
        self.run(step, settings, cancel).await
    }

    /// Runs `step` with the original text of `file` (or without the file when it had none).
    async fn run_original(
        &self,
        file: &Path,
        original: Option<&str>,
        step: &Step,
        settings: VerifySettings,
        cancel: &CancellationToken,
    ) -> Result<Ran, Checked> {
        match original {
            Some(text) => self.run_with(file, text, step, settings, cancel).await,
            None => {
                let _ = std::fs::remove_file(self.copy.join(file));
                self.run(step, settings, cancel).await
            }
        }
    }

    async fn run(&self, step: &Step, settings: VerifySettings, cancel: &CancellationToken) -> Result<Ran, Checked> {
        let mut command = tokio::process::Command::new(&step.program);
        command
            .args(&step.args)
            .current_dir(self.copy.join(&step.dir))
            .env("CARGO_TARGET_DIR", &self.target)
            .env("CARGO_TERM_COLOR", "never")
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        std::fs::create_dir_all(&self.target)
            .map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?;
        let started = Instant::now();
        let child = command
            .spawn()
            .map_err(|error| Checked::Unchecked(Unchecked::Tool(format!("{}: {error}", step.program.display()))))?;
        let group = child.id();
        let kill_group = || {
            if let Some(pid) = group.and_then(|pid| i32::try_from(pid).ok()) {
                // SAFETY: killpg only sends a signal; the group is the one this check started (`process_group(0)`).
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
        };
        let output = tokio::select! {
            output = child.wait_with_output() => output.map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?,
            _ = tokio::time::sleep(settings.timeout()) => {
                kill_group();
                return Err(Checked::Refused(format!("{} took longer than {} ms", step.label, settings.timeout_ms)));
            }
            _ = cancel.cancelled() => {
                kill_group();
                return Err(Checked::Refused(format!("{} cancelled", step.label)));
            }
        };
        let ran = Ran {
            status: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        tracing::info!(command = step.label, status = ?ran.status, ms = ran.ms, "execution check ran");
        Ok(ran)
    }
}

/// Makes `copy` a copy of `root` (without `SKIPPED`): copies files whose size or mtime differ (keeping the
/// source's mtime, so that cargo's fingerprints see unchanged files as unchanged), removes files the source no
/// longer has. Returns the number of files copied.
pub fn sync_tree(root: &Path, copy: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(copy)?;
    let mut copied = 0;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        for entry in std::fs::read_dir(root.join(&relative))? {
            let entry = entry?;
            let name = entry.file_name();
            if SKIPPED.iter().any(|skipped| name == *skipped) {
                continue;
            }
            let relative = relative.join(&name);
            let file_type = entry.file_type()?;
            if file_type.is_dir() {
                std::fs::create_dir_all(copy.join(&relative))?;
                seen.insert(relative.clone());
                stack.push(relative);
            } else if file_type.is_file() {
                let source = entry.metadata()?;
                let destination = copy.join(&relative);
                let same = std::fs::metadata(&destination).is_ok_and(|copied| {
                    copied.len() == source.len() && copied.modified().ok() == source.modified().ok()
                });
                if !same {
                    std::fs::copy(entry.path(), &destination)?;
                    if let Ok(modified) = source.modified() {
                        std::fs::File::options().write(true).open(&destination)?.set_modified(modified)?;
                    }
                    copied += 1;
                }
                seen.insert(relative);
            }
        }
    }
    remove_unseen(copy, Path::new(""), &seen)?;
    Ok(copied)
}

fn remove_unseen(copy: &Path, relative: &Path, seen: &std::collections::HashSet<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(copy.join(relative))? {
        let entry = entry?;
        let name = entry.file_name();
        if SKIPPED.iter().chain(GENERATED).any(|skipped| name == *skipped) {
            continue;
        }
        let relative = relative.join(&name);
        if seen.contains(&relative) {
            if entry.file_type()?.is_dir() {
                remove_unseen(copy, &relative, seen)?;
            }
        } else if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(file: &str, code: &str, message: &str) -> CompilerError {
        CompilerError { file: file.into(), line: 1, code: Some(code.into()), message: message.into() }
    }

    #[test]
    fn cargo_json_keeps_errors_only() {
        let stdout = [
            r#"{"reason":"compiler-artifact","package_id":"x"}"#,
            r#"{"reason":"compiler-message","message":{"level":"warning","message":"unused variable: `a`","code":{"code":"unused_variables"},"spans":[]}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","message":"mismatched types","code":{"code":"E0308"},"spans":[{"file_name":"src/lib.rs","line_start":3,"is_primary":true}]}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","message":"aborting due to 1 previous error","code":null,"spans":[]}}"#,
            r#"{"reason":"build-finished","success":false}"#,
            "not json",
        ]
        .join("\n");
        let errors = parse_cargo_json(&stdout);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].to_string(), "src/lib.rs:3: error[E0308]: mismatched types");
    }

    #[test]
    fn missing_type_definitions_are_the_checkouts_not_the_candidates() {
        let process = error(
            "src/index.ts",
            "TS2580",
            "Cannot find name 'process'. Do you need to install type definitions for node? Try `npm i --save-dev @types/node`.",
        );
        assert!(is_uninstalled_package(&process));
        assert!(!is_uninstalled_package(&error("src/index.ts", "TS2304", "Cannot find name 'proces'.")));
    }

    #[test]
    fn a_package_the_checkout_lacks_is_not_the_candidates_error() {
        let missing = |name: &str| {
            error(
                "src/a.test.ts",
                "TS2307",
                &format!("Cannot find module '{name}' or its corresponding type declarations."),
            )
        };
        assert!(is_uninstalled_package(&missing("node:test")));
        assert!(is_uninstalled_package(&missing("@scope/pkg")));
        assert!(!is_uninstalled_package(&missing("./helpers")));
        assert!(!is_uninstalled_package(&error("src/a.ts", "TS2304", "Cannot find name 'x'.")));
    }

    #[test]
    fn tsc_lines() {
        let output = "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n  \
                      more detail\nerror TS5058: The specified path does not exist: 'x'.\nsrc/b.ts(1,1): warning: no\n";
        let errors = parse_tsc(output);
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].file, "src/a.ts");
        assert_eq!(errors[0].line, 3);
        assert_eq!(errors[0].code.as_deref(), Some("TS2322"));
        assert_eq!(errors[1].file, "");
    }

    #[test]
    fn judging_against_the_original_errors() {
        let unrelated = error("src/other.rs", "E0425", "cannot find value `zz` in this scope");
        let target = error("src/lib.rs", "E0308", "mismatched types");
        let new_error = error("src/lib.rs", "E0599", "no method named `lenn` found for struct `Vec<u32>`");
        // No error: passes, the original's errors are not even needed.
        assert_eq!(judge(&[], None, Some("mismatched types"), None), Ok(()));
        // An error, and the original was not checked: refused.
        assert!(judge(std::slice::from_ref(&new_error), None, None, None).is_err());
        // An unrelated error the original had too does not block.
        let baseline = [unrelated.clone(), target.clone()];
        assert_eq!(
            judge(std::slice::from_ref(&unrelated), Some(&baseline), Some("mismatched types\nexpected `u32`"), None),
            Ok(())
        );
        // The diagnostic asked for is still there.
        let still = judge(std::slice::from_ref(&target), Some(&baseline), Some("mismatched types"), None).unwrap_err();
        assert!(still.starts_with("still there"), "{still}");
        // A new error.
        assert!(judge(&[new_error], Some(&baseline), Some("mismatched types"), None).is_err());
        // An error the original had once cannot excuse two.
        assert!(judge(&[unrelated.clone(), unrelated.clone()], Some(&baseline), None, None).is_err());
        // An error on the edited lines is refused even when the original had it (no target message given).
        let edited = EditedLines { file: "src/lib.rs".into(), lines: 1..=1 };
        let in_edit = judge(std::slice::from_ref(&target), Some(&baseline), None, Some(&edited)).unwrap_err();
        assert!(in_edit.starts_with("in the edit"), "{in_edit}");
        assert_eq!(judge(&[unrelated], Some(&baseline), None, Some(&edited)), Ok(()));
        let change = FileChange {
            path: None,
            create: false,
            old_text: "a\nb\nc\n".into(),
            replace: 2..3,
            insert: "x\ny".into(),
        };
        assert_eq!(EditedLines::of(Path::new("src/lib.rs"), &change).lines, 2..=3);
    }

    #[test]
    fn test_counts() {
        let libtest = "running 1 test\ntest tests::f_works ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s\n";
        assert_eq!(parse_libtest(libtest), TestCounts { passed: 1, failed: 0 });
        let failing = "test result: FAILED. 0 passed; 1 failed; 0 ignored";
        assert_eq!(parse_libtest(failing), TestCounts { passed: 0, failed: 1 });
        assert_eq!(parse_js_tests(" \u{1b}[2m Tests \u{1b}[22m 2 passed (2)"), TestCounts { passed: 2, failed: 0 });
        assert_eq!(parse_js_tests("Tests:       1 failed, 2 passed, 3 total"), TestCounts { passed: 2, failed: 1 });
        assert_eq!(parse_js_tests("# tests 1\n# pass 1\n# fail 0\n"), TestCounts { passed: 1, failed: 0 });
        assert_eq!(parse_js_tests("ℹ pass 0\nℹ fail 1\n"), TestCounts { passed: 0, failed: 1 });
    }

    #[test]
    fn rust_test_names_and_module_paths() {
        let inserted = "\n    #[test]\n    fn parse_works() {\n        assert!(true);\n    }\n";
        assert_eq!(rust_test_filter(Path::new("src/lib.rs"), inserted).as_deref(), Some("tests::parse_works"));
        assert_eq!(rust_test_filter(Path::new("src/a/b.rs"), inserted).as_deref(), Some("a::b::tests::parse_works"));
        assert_eq!(rust_test_filter(Path::new("src/a/mod.rs"), inserted).as_deref(), Some("a::tests::parse_works"));
        assert_eq!(rust_test_filter(Path::new("src/bin/x.rs"), inserted), None);
        assert_eq!(rust_test_filter(Path::new("src/lib.rs"), "fn no_test() {}"), None);
    }

    #[test]
    fn manifests_and_commands() {
        let manifest = "[package]\nname = \"tiny-crate\"\nversion = \"0.1.0\"\n\n[dependencies]\nname = 1\n";
        assert_eq!(package_name(manifest).as_deref(), Some("tiny-crate"));
        assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
        let project = Project {
            kind: ProjectKind::Cargo,
            root: "/w".into(),
            file: "crates/a/src/lib.rs".into(),
            package: Some("a".into()),
            crate_dir: "crates/a".into(),
            node_modules: None,
        };
        let check = cargo_check_step(&project, false);
        assert_eq!(check.args.join(" "), "check --message-format=json --quiet -p a");
        assert_eq!(check.dir, PathBuf::from("crates/a"));
        assert_eq!(cargo_check_step(&project, true).args.last().map(String::as_str), Some("--tests"));
        let test = cargo_test_step(&project, "tests::f_works");
        assert_eq!(test.args.join(" "), "test --message-format=json --quiet -p a --lib -- --exact tests::f_works");
        let info = Path::new("/c/tsc.tsbuildinfo");
        let source = Path::new("src/m.ts");
        assert_eq!(
            tsc_step("tsc".into(), true, source, info).args.join(" "),
            "--noEmit --pretty false --incremental --tsBuildInfoFile /c/tsc.tsbuildinfo -p tsconfig.json"
        );
        assert!(tsc_step("tsc".into(), false, source, info).args.last().is_some_and(|arg| arg == "src/m.ts"));
        // Without a tsconfig a generated test file is what tsc checks (it imports the source).
        let test_file = Path::new("src/m.test.ts");
        assert!(tsc_step("tsc".into(), false, test_file, info).args.last().is_some_and(|arg| arg == "src/m.test.ts"));
    }

    #[test]
    fn projects_are_found_from_the_file_up() {
        let dir = std::env::temp_dir().join(format!("spark-exec-find-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/crates/a/src")).unwrap();
        std::fs::write(dir.join("ws/Cargo.toml"), "[workspace]\nmembers = [\"crates/a\"]\n").unwrap();
        std::fs::write(dir.join("ws/crates/a/Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
        let found = find_project(&dir.join("ws/crates/a/src/lib.rs")).unwrap();
        assert_eq!((found.root, found.file), (dir.join("ws"), PathBuf::from("crates/a/src/lib.rs")));
        assert_eq!((found.package.as_deref(), found.crate_dir), (Some("a"), PathBuf::from("crates/a")));
        std::fs::create_dir_all(dir.join("pkg/src")).unwrap();
        std::fs::create_dir_all(dir.join("node_modules")).unwrap();
        std::fs::write(dir.join("pkg/tsconfig.json"), "{}").unwrap();
        let found = find_project(&dir.join("pkg/src/m.ts")).unwrap();
        assert_eq!((found.kind, found.root), (ProjectKind::Node, dir.join("pkg")));
        assert_eq!(found.node_modules, Some(dir.join("node_modules")));
        assert_eq!(find_project(&dir.join("pkg/notes.txt")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sync_copies_changes_and_removes_what_is_gone() {
        let dir = std::env::temp_dir().join(format!("spark-exec-sync-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (root, copy) = (dir.join("root"), dir.join("copy"));
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
        std::fs::write(root.join("src/old.rs"), "\n").unwrap();
        std::fs::write(root.join("target/debug/big"), "artefact").unwrap();
        assert_eq!(sync_tree(&root, &copy).unwrap(), 2);
        assert!(!copy.join("target").exists());
        // Nothing changed: nothing copied.
        assert_eq!(sync_tree(&root, &copy).unwrap(), 0);
        // An edit in the copy (a candidate) is undone; a file gone from the source goes; Cargo.lock stays.
        std::fs::write(copy.join("src/lib.rs"), "pub fn candidate() {}\n").unwrap();
        std::fs::write(copy.join("Cargo.lock"), "# made by cargo\n").unwrap();
        std::fs::remove_file(root.join("src/old.rs")).unwrap();
        assert_eq!(sync_tree(&root, &copy).unwrap(), 1);
        assert_eq!(std::fs::read_to_string(copy.join("src/lib.rs")).unwrap(), "pub fn a() {}\n");
        assert!(!copy.join("src/old.rs").exists());
        assert!(copy.join("Cargo.lock").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn status_lists_the_commands() {
        assert!(VerifySettings::off().commands().is_empty());
        assert!(VerifySettings::all().commands().contains(&"cargo test"));
        assert_ne!(root_hash(Path::new("/a")), root_hash(Path::new("/b")));
    }
}
