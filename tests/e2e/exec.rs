//! The execution tier (`verify.compile`, `verify.runTests`, `--run`) with the real toolchains: `cargo check` and
//! `cargo test` on a temporary crate, `tsc --noEmit` on a temporary package (TypeScript pinned by
//! scripts/install-tsc.sh), and `spark-lsp fix --run` end to end with the default model.
//!
//! Timings are printed (run with `--nocapture`), never asserted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use spark_grammars::Lang;
use spark_ide::exec_check::{Gate, VerifySettings};
use spark_ide::tasks::{FileChange, TaskKind};
use spark_tests::{scratch_dir, server_binary, workspace_root};
use tokio_util::sync::CancellationToken;

/// Every check of this process writes its scratch copies under one temporary cache directory, never under the
/// user's.
fn cache_home() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = scratch_dir("exec-cache");
        // Set once, before any check reads it.
        std::env::set_var("XDG_CACHE_HOME", &dir);
        dir
    })
}

const LIB: &str = "pub fn total(prices: &[u32]) -> u32 {\n    prices.iter().sum()\n}\n";

fn temp_crate(name: &str, lib: &str) -> PathBuf {
    let dir = scratch_dir(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
    dir
}

/// The change that replaces `old` (once) in `text` with `new`.
fn replace(path: Option<PathBuf>, text: &str, old: &str, new: &str) -> FileChange {
    let start = text.find(old).unwrap_or_else(|| panic!("{old:?} not in the fixture"));
    FileChange {
        path,
        create: false,
        old_text: text.to_owned(),
        replace: start..start + old.len(),
        insert: new.to_owned(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Lists the files under `dir`, to show that a check wrote nothing into the user's tree.
fn tree(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                files.push((path, text));
            }
        }
    }
    files.sort();
    files
}

fn compile_only() -> VerifySettings {
    VerifySettings { compile: true, run_tests: false, timeout_ms: 120_000, ..VerifySettings::all() }
}

#[test]
fn cargo_check_passes_code_that_type_checks_and_refuses_a_type_error() {
    cache_home();
    let dir = temp_crate("exec_check_rust", LIB);
    let file = dir.join("src/lib.rs");
    let before = tree(&dir);
    let runtime = runtime();
    let cancel = CancellationToken::new();
    // Both candidates parse; only the first type-checks.
    let good = replace(None, LIB, "prices.iter().sum()", "prices.iter().copied().sum::<u32>()");
    let bad = replace(None, LIB, "prices.iter().sum()", "prices.len()");
    assert!(spark_ide::parse::text(Lang::Rust, &bad.new_text()).is_some());
    let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), LIB, None);
    let first = runtime.block_on(gate.check(&good, &cancel));
    assert_eq!(first, Ok(()));
    let cold = gate.summary();
    assert!(cold.contains("cargo check passed"), "{cold}");
    let refused = runtime.block_on(gate.check(&bad, &cancel)).expect_err("a type error is refused");
    assert!(refused.contains("E0308") && refused.contains("mismatched types"), "{refused}");
    // The same good candidate again: only the edited file changed, the artefacts are warm.
    let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), LIB, None);
    assert_eq!(runtime.block_on(gate.check(&good, &cancel)), Ok(()));
    eprintln!("cargo check, first{cold}; warm{}", gate.summary());
    assert_eq!(tree(&dir), before, "a check wrote into the user's tree");
}

/// A workspace over the scripted engine (its every answer is `output`) with the execution check on, and `lib.rs`
/// of a temporary crate open in it.
fn next_edit_workspace(name: &str, lib: &str, output: &str, compile: bool) -> (spark_ide::Workspace, String) {
    use spark_ide::config::Settings;
    let dir = temp_crate(name, lib);
    let engine = std::sync::Arc::new(spark_engine::Engine::start_scripted(vec![output.to_owned()]));
    let mut settings = Settings::default();
    settings.verify.compile = compile;
    settings.next_edit.compile = compile;
    settings.next_edit.model = true;
    let workspace = spark_ide::Workspace::new(engine, settings, spark_ide::position::PositionEncoding::Utf16, |_| {});
    let file = dir.join("src/lib.rs");
    let uri = format!("file://{}", file.display());
    workspace.open(&uri, Some(file), "rust", lib, 1);
    (workspace, uri)
}

/// The user's edit: `old` on `line` (0-based, ASCII) replaced by `new`.
fn user_edit(workspace: &spark_ide::Workspace, uri: &str, lib: &str, line: u32, old: &str, new: &str) {
    use spark_ide::position::LspPosition;
    let text = lib.lines().nth(line as usize).unwrap();
    let column = text.find(old).unwrap() as u32;
    let range = (LspPosition { line, character: column }, LspPosition { line, character: column + old.len() as u32 });
    let change = spark_ide::document::Change { range: Some(range), text: new.to_owned() };
    assert!(workspace.edit(uri, &[change], 2));
}

#[test]
fn next_edits_are_shown_once_they_type_check_and_a_type_error_is_not() {
    cache_home();
    let runtime = runtime();
    // A workspace spawns its background work on the runtime it is made in.
    let _entered = runtime.enter();
    // The rule's rename of a field: shown only after `cargo check` of all of it passed.
    let lib = "pub struct S {\n    pub len: usize,\n}\n\npub fn twice(s: &S) -> usize {\n    s.len * 2\n}\n";
    let (workspace, uri) = next_edit_workspace("next_edit_rename", lib, "", true);
    user_edit(&workspace, &uri, lib, 1, "len", "size");
    assert!(workspace.next_edits(&uri, None).unwrap().edits.is_empty(), "shown before the check");
    let checked = runtime.block_on(workspace.next_edits_with_model(&uri, None, CancellationToken::new())).unwrap();
    assert_eq!(checked.edits.len(), 1, "{checked:?}");
    assert_eq!(checked.edits[0].new_text, "size");
    assert_eq!(workspace.next_edits(&uri, None).unwrap().edits, checked.edits);

    // The model's line carries the user's `2` on but does not type-check (`u32 + &str`): not shown.
    let lib = "pub fn next(x: u32) -> u32 {\n    let y = x + 1;\n    y\n}\n";
    let rewrite = "    let y = x + 2;\n    y + \"2\"\n}";
    let (workspace, uri) = next_edit_workspace("next_edit_model", lib, rewrite, true);
    user_edit(&workspace, &uri, lib, 1, "1", "2");
    let refused = runtime.block_on(workspace.next_edits_with_model(&uri, None, CancellationToken::new())).unwrap();
    assert!(refused.edits.is_empty(), "{refused:?}");
    // The same without the execution check: the parse alone lets it through.
    let (workspace, uri) = next_edit_workspace("next_edit_model_unchecked", lib, rewrite, false);
    user_edit(&workspace, &uri, lib, 1, "1", "2");
    let unchecked = runtime.block_on(workspace.next_edits_with_model(&uri, None, CancellationToken::new())).unwrap();
    assert_eq!(unchecked.edits.len(), 1, "{unchecked:?}");
}

#[test]
fn a_fix_is_judged_against_the_errors_the_file_already_had() {
    cache_home();
    // `other` has an error of its own; the fix targets the one in `total`.
    let lib = "mod other;\n\npub fn total(prices: &[u32]) -> u32 {\n    let n: u32 = \"none\";\n    prices.iter().sum::<u32>() + n\n}\n";
    let dir = temp_crate("exec_check_baseline", lib);
    std::fs::write(dir.join("src/other.rs"), "pub fn broken() -> u32 {\n    missing_name\n}\n").unwrap();
    let file = dir.join("src/lib.rs");
    let runtime = runtime();
    let cancel = CancellationToken::new();
    let message = Some("mismatched types\nexpected `u32`, found `&str`");
    let fixed = replace(None, lib, "let n: u32 = \"none\";", "let n: u32 = 0;");
    let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), lib, message);
    assert_eq!(runtime.block_on(gate.check(&fixed, &cancel)), Ok(()), "the unrelated E0425 must not block");
    // A rewrite that leaves the asked-for error in place is refused, although it changed the code.
    let same = replace(None, lib, "let n: u32 = \"none\";", "let n: u32 = \"zero\";");
    let refused = runtime.block_on(gate.check(&same, &cancel)).expect_err("the diagnostic is still there");
    assert!(refused.contains("in the edit") && refused.contains("mismatched types"), "{refused}");
    // A rewrite that swaps the error for another is refused.
    let other = replace(None, lib, "let n: u32 = \"none\";", "let n: u32 = undefined_value;");
    let refused = runtime.block_on(gate.check(&other, &cancel)).expect_err("a new error is refused");
    assert!(refused.contains("E0425") && refused.contains("undefined_value"), "{refused}");
}

#[test]
fn generated_tests_run_and_a_failing_one_is_refused() {
    cache_home();
    let dir = temp_crate("exec_run_tests", LIB);
    let file = dir.join("src/lib.rs");
    let runtime = runtime();
    let cancel = CancellationToken::new();
    let module = |body: &str| {
        format!("\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn total_works() {{\n        {body}\n    }}\n}}\n")
    };
    let end = LIB.len();
    let change = |body: &str| FileChange {
        path: None,
        create: false,
        old_text: LIB.to_owned(),
        replace: end..end,
        insert: module(body),
    };
    let settings = VerifySettings { compile: true, run_tests: true, timeout_ms: 120_000, ..VerifySettings::all() };
    let gate = Gate::new(settings, TaskKind::Tests, Some(&file), LIB, None);
    assert_eq!(runtime.block_on(gate.check(&change("assert_eq!(total(&[1, 2, 3]), 6);"), &cancel)), Ok(()));
    assert!(gate.summary().contains("cargo test passed"), "{}", gate.summary());
    eprintln!("cargo test, first{}", gate.summary());
    // It compiles and runs, and asserts something false about `total`.
    let refused = runtime
        .block_on(gate.check(&change("assert_eq!(total(&[1, 2, 3]), 7);"), &cancel))
        .expect_err("a failing test is refused");
    assert!(refused.contains("fails"), "{refused}");
    // Only `verify.compile`: test code is type-checked (`--tests`) but not run, so the false assertion passes.
    let gate = Gate::new(compile_only(), TaskKind::Tests, Some(&file), LIB, None);
    assert_eq!(runtime.block_on(gate.check(&change("assert_eq!(total(&[1, 2, 3]), 7);"), &cancel)), Ok(()));
    let refused = runtime
        .block_on(gate.check(&change("assert_eq!(total(&[1, 2, 3]), \"six\");"), &cancel))
        .expect_err("test code that does not type-check is refused");
    assert!(refused.contains("cargo check"), "{refused}");
}

#[test]
fn a_check_past_its_time_limit_is_refused() {
    cache_home();
    // A build script that sleeps: the check must be killed at the limit, not waited for.
    let dir = temp_crate("exec_timeout", LIB);
    std::fs::write(dir.join("build.rs"), "fn main() { std::thread::sleep(std::time::Duration::from_secs(60)); }\n")
        .unwrap();
    let file = dir.join("src/lib.rs");
    let settings = VerifySettings { compile: true, run_tests: false, timeout_ms: 3_000, ..VerifySettings::all() };
    let gate = Gate::new(settings, TaskKind::Fix, Some(&file), LIB, None);
    let good = replace(None, LIB, "prices.iter().sum()", "prices.iter().copied().sum::<u32>()");
    let started = std::time::Instant::now();
    let refused = runtime().block_on(gate.check(&good, &CancellationToken::new())).expect_err("timed out");
    assert!(refused.contains("took longer than 3000 ms"), "{refused}");
    eprintln!("timed-out check returned after {} ms", started.elapsed().as_millis());
}

fn tsc_modules() -> PathBuf {
    let modules = workspace_root().join("target/tools/node_modules");
    assert!(
        modules.join(".bin/tsc").exists(),
        "TypeScript is not installed for the tests: run scripts/install-tsc.sh (make tools)"
    );
    modules
}

/// A strict NodeNext package `name` with an empty `src/`, under the test's scratch directory, its `node_modules`
/// the pinned TypeScript's.
fn ts_package(name: &str) -> PathBuf {
    let modules = tsc_modules();
    let dir = ts_package_files(name, r#", "types": []"#);
    std::os::unix::fs::symlink(&modules, dir.join("node_modules")).unwrap();
    dir
}

/// A package's directory with an empty `src/`, its package.json and a strict NodeNext tsconfig (`options` added to
/// its compiler options), no node_modules yet.
fn ts_package_files(name: &str, options: &str) -> PathBuf {
    let dir = scratch_dir(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("package.json"), format!("{{\"name\": \"{name}\", \"private\": true}}\n")).unwrap();
    let tsconfig = format!(
        r#"{{"compilerOptions": {{"strict": true, "target": "es2022", "module": "nodenext", "skipLibCheck": true{options}}}, "include": ["src"]}}"#
    );
    std::fs::write(dir.join("tsconfig.json"), tsconfig).unwrap();
    dir
}

const TS: &str =
    "export function total(prices: number[]): number {\n  return prices.reduce((sum, p) => sum + p, 0);\n}\n";

#[test]
fn tsc_passes_code_that_type_checks_and_refuses_a_type_error() {
    cache_home();
    let dir = ts_package("exec-ts");
    let file = dir.join("src/total.ts");
    std::fs::write(&file, TS).unwrap();
    let before = tree(&dir.join("src"));
    let runtime = runtime();
    let cancel = CancellationToken::new();
    let good = replace(None, TS, "sum + p, 0)", "sum + p * 1, 0)");
    let bad = replace(None, TS, "sum + p, 0)", "sum + p, \"0\")");
    assert!(spark_ide::parse::text(Lang::TypeScript, &bad.new_text()).is_some());
    let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), TS, None);
    assert_eq!(runtime.block_on(gate.check(&good, &cancel)), Ok(()));
    let first = gate.summary();
    assert!(first.contains("tsc passed"), "{first}");
    let refused = runtime.block_on(gate.check(&bad, &cancel)).expect_err("a type error is refused");
    assert!(refused.contains("TS2"), "{refused}");
    let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), TS, None);
    assert_eq!(runtime.block_on(gate.check(&good, &cancel)), Ok(()));
    eprintln!("tsc, first{first}; second{}", gate.summary());
    assert_eq!(tree(&dir.join("src")), before, "a check wrote into the user's tree");
}

const USE_TS: &str = "import { total } from \"./total.js\";\n\nexport const sum: number = total([1, 2]);\n";

/// The resident TypeScript checker (`ts_service`): one language service per scratch copy, kept warm across
/// tasks; a candidate that breaks a file importing the edited one is refused there, an error the original had
/// elsewhere does not block, and nothing is written into the user's tree. Each candidate's time is printed beside
/// `tsc --noEmit`'s on the same package.
#[test]
fn the_resident_checker_judges_candidates_warm_and_sees_the_importers() {
    cache_home();
    let dir = ts_package("exec-ts-resident");
    let file = dir.join("src/total.ts");
    std::fs::write(&file, TS).unwrap();
    std::fs::write(dir.join("src/use.ts"), USE_TS).unwrap();
    std::fs::write(dir.join("src/other.ts"), "export const broken: number = \"x\";\n").unwrap();
    let before = tree(&dir.join("src"));
    let runtime = runtime();
    let cancel = CancellationToken::new();
    let candidates = [
        ("sum + p, 0)", "sum + p * 2, 0)", true),
        ("sum + p, 0)", "sum + p, \"0\")", false),
        ("number[]): number {", "number[]): number | string {", false),
        ("sum + p, 0)", "sum - p, 0)", true),
        ("sum + p, 0)", "sum + p + 0, 0)", true),
    ];
    let mut times = Vec::new();
    for (old, new, passes) in candidates {
        let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), TS, None);
        let change = replace(None, TS, old, new);
        let started = std::time::Instant::now();
        let checked = runtime.block_on(gate.check(&change, &cancel));
        times.push(started.elapsed().as_millis());
        assert_eq!(checked.is_ok(), passes, "{new}: {checked:?}");
        if passes {
            assert!(gate.summary().contains("tsc passed (resident service)"), "{}", gate.summary());
        }
        if new.contains("| string {") {
            // The function's new return type breaks the file that imports it, not the edited file.
            assert!(checked.as_ref().unwrap_err().contains("src/use.ts"), "{checked:?}");
        }
    }
    let tsc = dir.join("node_modules/.bin/tsc");
    let started = std::time::Instant::now();
    let status =
        Command::new(&tsc).args(["--noEmit", "-p", "tsconfig.json"]).current_dir(&dir).output().unwrap().status;
    eprintln!(
        "resident checker, ms per task (first one starts it): {times:?}; tsc --noEmit: {} ms ({status})",
        started.elapsed().as_millis()
    );
    assert_eq!(tree(&dir.join("src")), before, "a check wrote into the user's tree");
}

/// A package whose `tsc` has no TypeScript compiler module beside it (a wrapper script): the resident checker
/// cannot run, and the check falls back to that `tsc` (which passes everything here).
#[test]
fn without_a_typescript_module_the_check_falls_back_to_tsc() {
    cache_home();
    let dir = scratch_dir("exec-ts-fallback");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("node_modules/.bin")).unwrap();
    std::fs::write(dir.join("package.json"), "{\"name\": \"fallback\", \"private\": true}\n").unwrap();
    std::fs::write(dir.join("tsconfig.json"), "{}\n").unwrap();
    let tsc = dir.join("node_modules/.bin/tsc");
    std::fs::write(&tsc, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&tsc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let file = dir.join("src/total.ts");
    std::fs::write(&file, TS).unwrap();
    let gate = Gate::new(compile_only(), TaskKind::Fix, Some(&file), TS, None);
    let change = replace(None, TS, "sum + p, 0)", "sum + p * 2, 0)");
    assert_eq!(runtime().block_on(gate.check(&change, &CancellationToken::new())), Ok(()));
    let summary = gate.summary();
    assert!(summary.contains("tsc passed") && !summary.contains("resident"), "{summary}");
}

/// `spark-lsp fix --run` with the default model: the grammar's repair of a missing `;` parses but does not
/// type-check here, so without `--run` it is offered, and with `--run` it is refused by `cargo check`.
#[test]
fn cli_fix_with_run_refuses_what_does_not_compile() {
    cache_home();
    let lib =
        "pub fn total(prices: &[u32]) -> u32 {\n    let base: u32 = \"0\"\n    base + prices.iter().sum::<u32>()\n}\n";
    let dir = temp_crate("exec_cli", lib);
    let file = dir.join("src/lib.rs");
    let _lock = spark_tests::model_lock();
    let run = |extra: &[&str]| {
        let output = Command::new(server_binary())
            .env("XDG_CACHE_HOME", cache_home())
            .arg("fix")
            .arg(&file)
            .args(["--at", "2:24", "--json", "--samples", "2", "--strong-model", "none"])
            .args(extra)
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("JSON expected:\n{}", String::from_utf8_lossy(&output.stderr)));
        json
    };
    let unchecked = run(&[]);
    assert_eq!(unchecked["verified"], true, "{unchecked}");
    assert!(unchecked["changes"][0]["diff"].as_str().unwrap().contains("+    let base: u32 = \"0\";"), "{unchecked}");
    let checked = run(&["--run"]);
    let offered = checked["changes"].as_array().unwrap();
    let repair_refused =
        checked["rejections"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("cargo check"));
    if checked["verified"] == true {
        // The model found a fix that compiles: it must say so, and it must not be the grammar's repair.
        assert!(checked["title"].as_str().unwrap().contains("cargo check passed"), "{checked}");
        assert!(!offered[0]["diff"].as_str().unwrap().contains("+    let base: u32 = \"0\";"), "{checked}");
    } else {
        assert!(offered.is_empty());
    }
    assert!(repair_refused, "the grammar's repair must be refused by cargo check: {checked}");
    eprintln!(
        "fix --run: verified {}, title {}, rejections {}",
        checked["verified"], checked["title"], checked["rejections"]
    );
}

/// `spark-lsp fix --run` offers a fix that compiles, and says which check it passed.
#[test]
fn cli_fix_with_run_offers_a_fix_that_compiles() {
    cache_home();
    let lib =
        "pub fn total(prices: &[u32]) -> u32 {\n    let base: u32 = 0\n    base + prices.iter().sum::<u32>()\n}\n";
    let dir = temp_crate("exec_cli_ok", lib);
    let file = dir.join("src/lib.rs");
    let _lock = spark_tests::model_lock();
    let output = Command::new(server_binary())
        .env("XDG_CACHE_HOME", cache_home())
        .arg("fix")
        .arg(&file)
        .args(["--at", "2:22", "--json", "--run", "--strong-model", "none"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("JSON expected:\n{}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(json["verified"], true, "{json}");
    let title = json["title"].as_str().unwrap();
    assert!(title.contains("cargo check passed"), "{title}");
    eprintln!("fix --run on a missing `;`: {title}, {} ms in all", json["ms"]);
}

/// Generated TypeScript tests for node:test run before they are offered. Node here may be older than 22.6 (no
/// type stripping): then the project's tsc compiles them first.
#[test]
fn generated_typescript_tests_run_and_a_failing_one_is_refused() {
    cache_home();
    let modules = tsc_modules();
    let dir = ts_package_files("exec-ts-tests", "");
    std::os::unix::fs::symlink(&modules, dir.join("node_modules")).unwrap();
    let file = dir.join("src/total.ts");
    std::fs::write(&file, TS).unwrap();
    let test_file = |assertion: &str| {
        FileChange {
        path: Some(dir.join("src/total.test.ts")),
        create: true,
        old_text: String::new(),
        replace: 0..0,
        insert: format!(
            "import {{ test }} from \"node:test\";\nimport assert from \"node:assert/strict\";\nimport {{ total }} from \"./total\";\n\n\
             test(\"total works\", () => {{\n  {assertion}\n}});\n"
        ),
    }
    };
    let runtime = runtime();
    let cancel = CancellationToken::new();
    let settings = VerifySettings { compile: false, run_tests: true, timeout_ms: 120_000, ..VerifySettings::all() };
    let gate = Gate::new(settings, TaskKind::Tests, Some(&file), TS, None);
    assert_eq!(runtime.block_on(gate.check(&test_file("assert.equal(total([1, 2, 3]), 6);"), &cancel)), Ok(()));
    assert!(gate.summary().contains("node --test passed"), "{}", gate.summary());
    eprintln!("node --test{}", gate.summary());
    let refused = runtime
        .block_on(gate.check(&test_file("assert.equal(total([1, 2, 3]), 7);"), &cancel))
        .expect_err("a failing test is refused");
    assert!(refused.contains("fails"), "{refused}");
    assert!(!dir.join("src/total.test.ts").exists(), "a check wrote into the user's tree");
}

/// The execution checks are on by default, `spark/status` says what they may run, and turned off the server runs
/// no command.
#[test]
fn status_lists_the_commands_the_settings_allow() {
    use serde_json::{json, Value};
    use std::time::Duration;
    cache_home();
    let mut client = spark_tests::LspClient::start(&[], None).unwrap();
    client.initialize(json!({})).unwrap();
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    let commands = status["result"]["verify"]["commands"].as_array().unwrap();
    for command in ["cargo check", "tsc --noEmit", "cargo test"] {
        assert!(commands.iter().any(|listed| listed == command), "{command} not in {status}");
    }
    assert_eq!(status["result"]["verify"]["compile"], true);
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"spark": {"verify": {"compile": false, "runTests": false, "timeoutMs": 30000}}}}),
        )
        .unwrap();
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    assert_eq!(status["result"]["verify"]["commands"], json!([]), "{status}");
    assert_eq!(status["result"]["verify"]["compile"], false);
    assert_eq!(status["result"]["verify"]["timeoutMs"], 30000);
    client.shutdown(Duration::from_secs(10)).unwrap();
}

/// The compiler's first error in `dir`'s crate: (1-based line, 1-based column, message), as an editor shows it.
fn first_rustc_error(dir: &Path) -> (u64, u64, String) {
    let output = Command::new("cargo")
        .args(["check", "--message-format=json", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", cache_home().join("first-error-target"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let message = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|value| value["reason"] == "compiler-message" && value["message"]["level"] == "error")
        .unwrap_or_else(|| panic!("cargo check reported no error:\n{stdout}"));
    let span = &message["message"]["spans"][0];
    let at = |key: &str| span[key].as_u64().unwrap();
    (at("line_start"), at("column_start"), message["message"]["message"].as_str().unwrap().to_owned())
}

fn cli_fix_json(file: &Path, at: &str, message: &str) -> serde_json::Value {
    let output = Command::new(server_binary())
        .env("XDG_CACHE_HOME", cache_home())
        .arg("fix")
        .arg(file)
        .args(["--at", at, "--message", message, "--json", "--run", "--strong-model", "none"])
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("JSON expected:\n{}", String::from_utf8_lossy(&output.stderr)))
}

/// rustc's own suggestion is a fix candidate: the `use` of a type the file names without importing it (no model
/// writes an import at the top of the file when asked for the function), offered once `cargo check` accepts the
/// file with it, and said to come from the compiler.
#[test]
fn cli_fix_offers_the_import_rustc_suggests() {
    cache_home();
    let lib = "pub fn counts(words: &[&str]) -> HashMap<String, usize> {\n    let mut counts = HashMap::new();\n    \
               for word in words {\n        *counts.entry(word.to_string()).or_insert(0) += 1;\n    }\n    counts\n}\n";
    let dir = temp_crate("exec_suggested", lib);
    let (line, column, message) = first_rustc_error(&dir);
    let _lock = spark_tests::model_lock();
    let json = cli_fix_json(&dir.join("src/lib.rs"), &format!("{line}:{column}"), &message);
    assert_eq!(json["verified"], true, "{json}");
    assert_eq!(json["origin"], "compiler", "{json}");
    let diff = json["changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("+use std::collections::HashMap;"), "{diff}");
    assert!(json["title"].as_str().unwrap().contains("cargo check passed"), "{json}");
    eprintln!("{message}: {} in {} ms", json["title"], json["ms"]);
}

/// tsc's "Cannot find name 'clamp'": the import of the `clamp` a sibling module exports is a candidate, offered
/// once `tsc` accepts it.
#[test]
fn cli_fix_imports_a_name_a_sibling_module_exports() {
    cache_home();
    let dir = ts_package("exec-ts-import");
    std::fs::create_dir_all(dir.join("src/lib")).unwrap();
    std::fs::write(
        dir.join("src/lib/range.ts"),
        "export function clamp(value: number, low: number, high: number): number {\n  return Math.min(Math.max(value, low), high);\n}\n",
    )
    .unwrap();
    let file = dir.join("src/percent.ts");
    std::fs::write(&file, "export function percent(value: number): number {\n  return clamp(value, 0, 100);\n}\n")
        .unwrap();
    let _lock = spark_tests::model_lock();
    let json = cli_fix_json(&file, "2:10", "Cannot find name 'clamp'.");
    assert_eq!(json["verified"], true, "{json}");
    assert_eq!(json["origin"], "compiler", "{json}");
    let diff = json["changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("+import { clamp } from \"./lib/range"), "{diff}");
    eprintln!("{}: {} ms", json["title"], json["ms"]);
}

/// Runs test generation on `text` (the function at `at`) in the file `file`, every execution check on, against a
/// scripted model that answers `model` (asked only when the project and the types give few inputs).
fn generate_tests(file: &Path, text: &str, at: &str, model: &[&str]) -> spark_ide::tasks::TaskOutcome {
    use spark_ide::tasks::{TaskBudget, TaskDocument, TaskTarget};
    let lang = if file.extension().is_some_and(|ext| ext == "rs") { Lang::Rust } else { Lang::TypeScript };
    let document = TaskDocument {
        text: text.to_owned(),
        lang,
        tree: lang.parser().parse(text, None).unwrap(),
        path: Some(file.to_owned()),
        version: 1,
        revision: 0,
        open_files: Vec::new(),
    };
    let engine = spark_engine::Engine::start_scripted(model.iter().map(|answer| (*answer).to_owned()).collect());
    let at = text.find(at).unwrap();
    let settings = VerifySettings { compile: true, run_tests: true, timeout_ms: 120_000, ..VerifySettings::all() };
    let budget = TaskBudget { verify: settings, ..TaskBudget::default() };
    let target = TaskTarget { range: at..at, message: None };
    let generator = spark_ide::route::Generator::local(&engine);
    let started = std::time::Instant::now();
    let outcome = runtime()
        .block_on(spark_ide::tasks::run(
            &generator,
            spark_ide::tasks::TaskInput { kind: TaskKind::Tests, document: &document, target: &target },
            budget,
            &CancellationToken::new(),
        ))
        .unwrap();
    eprintln!("{} ms: {}", started.elapsed().as_millis(), outcome.title);
    outcome
}

const GRADES: &str = "/// The letter of a score: `grade(95)` is 'A'.\npub fn grade(score: u32) -> char {\n    if score >= 90 {\n        'A'\n    } else if score >= 50 {\n        'B'\n    } else {\n        'C'\n    }\n}\n\n/// How many steps the Collatz sequence takes from `n` to 1 (it never reaches 1 from 0).\npub fn steps(n: u64) -> u32 {\n    let mut n = n;\n    let mut count = 0;\n    while n != 1 {\n        n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };\n        count += 1;\n    }\n    count\n}\n\npub fn config() -> String {\n    std::fs::read_to_string(\"config.toml\").unwrap_or_default()\n}\n\npub fn first(words: &[&str]) -> usize {\n    words.len()\n}\n";

#[test]
fn characterisation_tests_assert_observed_values_and_catch_mutants() {
    cache_home();
    let dir = temp_crate("exec_characterise", GRADES);
    let file = dir.join("src/lib.rs");
    let before = tree(&dir);
    let outcome = generate_tests(&file, GRADES, "grade(score", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.title.contains("assertions from observed values, catch"), "{}", outcome.title);
    let test = &outcome.changes[0].insert;
    // Every mutant is caught: the inputs include the boundaries the function compares with.
    assert!(outcome.title.contains("catch 7 of 7 mutants"), "{}", outcome.title);
    // The values are what `grade` returns, written as literals.
    let grade = |score: u32| {
        if score >= 90 {
            'A'
        } else if score >= 50 {
            'B'
        } else {
            'C'
        }
    };
    let mut asserted = 0;
    for line in test.lines().filter_map(|line| line.trim().strip_prefix("assert_eq!(grade(")) {
        let (score, rest) = line.split_once("), '").unwrap();
        let letter = rest.chars().next().unwrap();
        assert_eq!(grade(score.parse().unwrap()), letter, "{line}");
        asserted += 1;
    }
    assert!(asserted >= 4, "{test}");
    // Nothing was written into the user's tree.
    assert_eq!(tree(&dir), before);
}

#[test]
fn an_input_that_hangs_is_dropped_and_the_rest_are_asserted() {
    cache_home();
    let dir = temp_crate("exec_characterise_hang", GRADES);
    let file = dir.join("src/lib.rs");
    let outcome = generate_tests(&file, GRADES, "steps(n", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("assert_eq!(steps(1), 0);") && test.contains("assert_eq!(steps(7), 16);"), "{test}");
    assert!(!test.contains("steps(0)"), "{test}");
}

#[test]
fn a_function_that_reads_files_is_not_run_and_an_early_return_is_a_mutant_too() {
    cache_home();
    let dir = temp_crate("exec_characterise_refused", GRADES);
    let file = dir.join("src/lib.rs");
    let outcome = generate_tests(&file, GRADES, "config()", &[]);
    assert!(!outcome.verified(), "{outcome:?}");
    assert!(outcome.title.contains("not run, it reads or writes files"), "{}", outcome.title);
    // `first` has no operator or literal to mutate, only the early return of the default (0): a non-empty slice
    // catches it, so a test is offered.
    let outcome = generate_tests(&file, GRADES, "first(words", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.title.contains("catch 1 of 1 mutants"), "{}", outcome.title);
}

/// Functions named like the probe's own items (roman's `from` was shadowed by the probe's `let from`).
const NAMED_LIKE_THE_PROBE: &str = "/// The number a word names: `from(\"two\")` is `Some(2)`.\npub fn from(word: &str) -> Option<u8> {\n    match word {\n        \"one\" => Some(1),\n        \"two\" => Some(2),\n        _ => None,\n    }\n}\n\npub fn report(count: usize) -> String {\n    if count == 1 { \"1 item\".to_owned() } else { format!(\"{count} items\") }\n}\n\npub fn probe(depth: u32) -> bool {\n    depth > 3\n}\n";

#[test]
fn functions_named_like_the_probes_own_items_are_characterised() {
    cache_home();
    let dir = temp_crate("exec_characterise_names", NAMED_LIKE_THE_PROBE);
    let file = dir.join("src/lib.rs");
    for (at, call) in
        [("from(word", "from(\"two\"), Some(2)"), ("report(count", "report(1)"), ("probe(depth", "probe(")]
    {
        let outcome = generate_tests(&file, NAMED_LIKE_THE_PROBE, at, &[]);
        assert!(outcome.verified(), "{at}: {outcome:?}");
        assert!(outcome.changes[0].insert.contains(call), "{at}: {}", outcome.changes[0].insert);
    }
}

/// String functions whose answer turns on a length they compare with, or on byte offsets that are not character
/// boundaries.
const STRINGS: &str = "/// The label, cut to six characters and an ellipsis when it is longer.\npub fn ellipsis(label: &str) -> String {\n    if label.chars().count() > 6 {\n        let cut: String = label.chars().take(6).collect();\n        cut + \"…\"\n    } else {\n        label.to_owned()\n    }\n}\n\n/// At most the first four bytes of `text`, cut back to a character boundary.\npub fn head(text: &str) -> &str {\n    let mut end = text.len().min(4);\n    while !text.is_char_boundary(end) {\n        end -= 1;\n    }\n    &text[..end]\n}\n";

#[test]
fn string_inputs_come_as_long_as_the_lengths_compared_with_and_with_wide_characters() {
    cache_home();
    let dir = temp_crate("exec_characterise_strings", STRINGS);
    let file = dir.join("src/lib.rs");
    // Seven characters, one more than the length compared with, are cut: the mutant `> 7` is caught.
    let outcome = generate_tests(&file, STRINGS, "ellipsis(label", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("assert_eq!(ellipsis(\"abcdefg\"), \"abcdef…\");"), "{test}");
    // A four-byte character straddling byte four is what tells `end -= 1` from `end -= 2`.
    let outcome = generate_tests(&file, STRINGS, "head(text", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("assert_eq!(head(\"a😀\"), \"a\");"), "{test}");
}

/// Parameters known only by their bounds, in the function's header or its `impl`'s.
const BOUNDED: &str = "use std::ops::Add;\n\n#[derive(Debug, Clone, Copy, PartialEq)]\npub struct Size(pub u64);\n\nimpl From<u64> for Size {\n    fn from(bytes: u64) -> Self {\n        Size(bytes)\n    }\n}\n\npub fn kib(size: impl Into<u64>) -> u64 {\n    size.into() * 1024\n}\n\nimpl<T: Into<Size>> Add<T> for Size {\n    type Output = Size;\n    fn add(self, rhs: T) -> Size {\n        Size(self.0 + rhs.into().0)\n    }\n}\n";

#[test]
fn parameters_known_by_their_bounds_are_given_values_of_the_conversion_target() {
    cache_home();
    let dir = temp_crate("exec_characterise_bounds", BOUNDED);
    let file = dir.join("src/lib.rs");
    let outcome = generate_tests(&file, BOUNDED, "kib(size", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.changes[0].insert.contains("assert_eq!(kib(2u64), 2048);"), "{}", outcome.changes[0].insert);
    let outcome = generate_tests(&file, BOUNDED, "add(self", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.changes[0].insert.contains(".add("), "{}", outcome.changes[0].insert);
}

#[test]
fn typescript_probes_load_the_packages_dependencies_and_assert_what_two_runs_agree_on() {
    cache_home();
    // node_modules of its own: the compiler (linked) and a dependency the module imports by a bare name.
    let modules = tsc_modules();
    let dir = ts_package_files("exec-ts-characterise-deps", r#", "types": []"#);
    std::fs::create_dir_all(dir.join("node_modules/.bin")).unwrap();
    std::fs::create_dir_all(dir.join("node_modules/pad-dep")).unwrap();
    std::os::unix::fs::symlink(modules.join("typescript"), dir.join("node_modules/typescript")).unwrap();
    std::os::unix::fs::symlink("../typescript/bin/tsc", dir.join("node_modules/.bin/tsc")).unwrap();
    let dep = dir.join("node_modules/pad-dep");
    std::fs::write(
        dep.join("package.json"),
        "{\"name\": \"pad-dep\", \"main\": \"index.js\", \"types\": \"index.d.ts\"}\n",
    )
    .unwrap();
    std::fs::write(dep.join("index.js"), "exports.pad = (text) => \"[\" + text + \"]\";\n").unwrap();
    std::fs::write(dep.join("index.d.ts"), "export declare function pad(text: string): string;\n").unwrap();
    let file = dir.join("src/label.ts");
    let text = "import { pad } from \"pad-dep\";\n\nexport function label(word: string): string {\n  return word === \"\" ? \"-\" : pad(word);\n}\n\nexport function makeItem(word: string) {\n  return { word, id: Math.random(), size: word === \"\" ? \"none\" : \"some\" };\n}\n";
    std::fs::write(&file, text).unwrap();
    let outcome = generate_tests(&file, text, "label(word", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("assert.deepStrictEqual(label(\"hello\"), \"[hello]\");"), "{test}");
    // `id` differs between the two runs: the test asserts the members they agree on.
    let outcome = generate_tests(&file, text, "makeItem(word", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("const { word, size } = makeItem("), "{test}");
    assert!(test.contains("assert.deepStrictEqual({ word, size }, {word: \"hello\", size: \"some\"});"), "{test}");
    assert!(!test.contains("id:"), "{test}");
}

#[test]
fn characterisation_tests_for_typescript_run_with_node() {
    cache_home();
    let dir = ts_package("exec-ts-characterise");
    let file = dir.join("src/clamp.ts");
    let text = "export function clamp(x: number, lo: number, hi: number): number {\n  if (x < lo) return lo;\n  if (x > hi) return hi;\n  return x;\n}\n\nexport function shout(word: string): string {\n  return word.length > 3 ? word.toUpperCase() + \"!\" : word;\n}\n";
    std::fs::write(&file, text).unwrap();
    let outcome = generate_tests(&file, text, "shout(word", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("import { shout } from \"./clamp\";"), "{test}");
    assert!(test.contains("assert.deepStrictEqual(shout(\"hello\"), \"HELLO!\");"), "{test}");
    assert!(outcome.changes[0].path.as_deref() == Some(dir.join("src/clamp.test.ts").as_path()));
    let outcome = generate_tests(&file, text, "clamp(x", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.changes[0].insert.contains("assert.deepStrictEqual(clamp("), "{}", outcome.changes[0].insert);
}

#[test]
fn a_typescript_function_that_returns_a_function_is_asserted_on_through_its_calls() {
    cache_home();
    let dir = ts_package("exec-ts-returned-function");
    let file = dir.join("src/scale.ts");
    // Curried, and a combinator whose returned function is written in place.
    let text = "export function scaleBy(factor: number): (value: number) => number {\n  if (factor < 0) return (value) => 0;\n  return (value) => value * factor + 1;\n}\n\nexport function repeat(step: (x: any) => any, times: number) {\n  return (x: number) => {\n    let out = x;\n    for (let i = 0; i < times; i++) out = step(out);\n    return out;\n  };\n}\n";
    std::fs::write(&file, text).unwrap();
    let outcome = generate_tests(&file, text, "scaleBy(factor", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("assert.deepStrictEqual(scaleBy(1)(2), 3);"), "{test}");
    let outcome = generate_tests(&file, text, "repeat(step", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("assert.deepStrictEqual(repeat((_0: any) => _0 + 1, "), "{test}");
}

#[test]
fn a_class_typed_parameter_is_given_objects_with_the_members_the_function_reads() {
    cache_home();
    let dir = ts_package("exec-ts-class-members");
    let file = dir.join("src/job.ts");
    // A class Spark cannot construct (its runner has no values): `isFinished` reads `job.progress.phase`.
    let text = "export type Phase = 'idle' | 'busy' | 'done';\n\nexport interface Progress {\n  phase: Phase;\n  steps: number;\n}\n\nexport class Job {\n  progress: Progress = { phase: 'idle', steps: 0 };\n  constructor(private readonly runner: { run(): Promise<void> }) {}\n}\n\nexport function isFinished(job: Job): boolean {\n  return job.progress.phase === 'done';\n}\n";
    std::fs::write(&file, text).unwrap();
    let outcome = generate_tests(&file, text, "isFinished(job", &[]);
    assert!(outcome.verified(), "{outcome:?}");
    let test = &outcome.changes[0].insert;
    assert!(test.contains("isFinished({ progress: { phase: 'done' } as any } as any), true"), "{test}");
}
