//! The independent checks. Nothing here asks Spark: a scratch copy of each crate or package is type-checked by
//! the real compiler (`cargo check`, `tsc --noEmit`), generated tests are compiled and run by `cargo test` /
//! `tsc` + `node --test` against the original function and its mutants, and patterns are matched by the `regex`
//! crate itself (the rust dialect: the engine the offered `regex::Regex::new` runs) or node's `RegExp`
//! (TypeScript).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::corpus::{self, Lang, Package};
use super::eval_dir;

/// One compiler error: where (0-based line and column) and the compiler's own message.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Diag {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub end_line: u32,
    pub end_col: u32,
    pub message: String,
}

/// What running generated tests gave.
#[derive(Debug, Clone, PartialEq)]
pub enum TestRun {
    /// The tests (or the code under test) do not compile.
    CompileError(String),
    /// Ran: how many passed and failed (a time-out counts as a failure).
    Ran { passed: usize, failed: usize },
}

/// A scratch copy of one package where files are swapped in, checked and restored. The build directory is
/// kept, so a second check only recompiles what changed.
pub struct Scratch {
    pub package: Package,
    pub dir: PathBuf,
    /// The package's own tests on the original sources (Rust: `cargo test --lib`), run once on first need.
    own_tests: std::sync::OnceLock<TestRun>,
}

const CHECK_TIMEOUT: Duration = Duration::from_secs(180);

impl Scratch {
    /// A fresh copy of the package's sources (build artefacts kept) with a manifest of our own.
    pub fn new(package: &Package) -> Result<Scratch> {
        Scratch::new_in(package, &eval_dir().join("scratch"))
    }

    /// The same under another root (the self-test's own, so it never races a running evaluation).
    pub fn new_in(package: &Package, root: &Path) -> Result<Scratch> {
        let dir = root.join(package.lang.name()).join(package.slug());
        let _ = std::fs::remove_dir_all(dir.join("src"));
        let _ = std::fs::remove_dir_all(dir.join("out"));
        std::fs::create_dir_all(&dir)?;
        corpus::copy_tree(&package.dir().join("src"), &dir.join("src"))?;
        match package.lang {
            Lang::Rust => {
                // The files beside the manifest (README.md: `doctest!("../README.md")` in glob's tests), not the
                // manifest (ours is written below) nor a build script (its build-dependencies are not fetched).
                for entry in std::fs::read_dir(package.dir())?.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if entry.path().is_file() && !name.starts_with("Cargo.") && name != "build.rs" {
                        std::fs::copy(entry.path(), dir.join(&name))?;
                    }
                }
                std::fs::write(dir.join("Cargo.toml"), scratch_cargo_toml(package)?)?;
                // The versions `cargo fetch` chose for the dev-dependencies (corpus::fetch), so that the offline
                // build finds them in cargo's cache.
                let lock = package.dir().join("Cargo.lock");
                if lock.exists() {
                    std::fs::copy(&lock, dir.join("Cargo.lock"))?;
                }
            }
            Lang::Ts => {
                // No test framework in package.json: Spark writes node:test tests, which node runs as they are.
                std::fs::write(dir.join("package.json"), "{\"name\": \"spark-eval-scratch\", \"private\": true}\n")?;
                let base = json!({
                    "compilerOptions": {
                        "target": "ES2022", "module": "commonjs", "moduleResolution": "node", "strict": true,
                        "esModuleInterop": true, "skipLibCheck": true, "lib": ["ES2022", "DOM", "DOM.Iterable"],
                        "types": ["node"], "typeRoots": [corpus::types_dir()], "noEmit": true, "rootDir": "."
                    }
                });
                std::fs::write(dir.join("tsconfig.base.json"), serde_json::to_string_pretty(&base)?)?;
            }
        }
        Ok(Scratch { package: package.clone(), dir, own_tests: std::sync::OnceLock::new() })
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The compiler's errors with `files` swapped in (all errors of the crate; for TypeScript those of the
    /// given files and what they import). The originals are restored afterwards.
    pub fn check(&self, files: &[(&str, &str)]) -> Result<Vec<Diag>> {
        let _restore = self.swap_in(files)?;
        match self.package.lang {
            Lang::Rust => {
                let output = self.cargo(&["check", "--lib", "--message-format=json"])?;
                Ok(rust_errors(&String::from_utf8_lossy(&output.stdout)))
            }
            Lang::Ts => {
                let names: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
                self.tsc(&names, None).map(|(errors, _)| errors)
            }
        }
    }

    /// The errors of every source file at once (the baseline: which files compile cleanly as they are).
    pub fn baseline(&self) -> Result<Vec<Diag>> {
        match self.package.lang {
            Lang::Rust => self.check(&[]),
            Lang::Ts => {
                let sources = self.package.sources();
                let names: Vec<&str> = sources.iter().map(String::as_str).collect();
                self.tsc(&names, None).map(|(errors, _)| errors)
            }
        }
    }

    /// Compiles and runs `test_names` (Rust test functions) or the test file `test_file` (TypeScript) with
    /// `files` swapped in.
    pub fn run_tests(&self, files: &[(&str, &str)], test_names: &[String], test_file: Option<&str>) -> Result<TestRun> {
        self.run_tests_tolerating(files, test_names, test_file, None)
    }

    /// [`Scratch::run_tests`], where TypeScript type errors in the file `tolerated` (a mutant's own: `a || b` made
    /// `a && b` may no longer type-check) do not stop the run: `tsc` emits the JavaScript anyway, and whether the
    /// tests catch the mutant is a question of what that JavaScript does. Errors in the test file still do.
    fn run_tests_tolerating(
        &self,
        files: &[(&str, &str)],
        test_names: &[String],
        test_file: Option<&str>,
        tolerated: Option<&str>,
    ) -> Result<TestRun> {
        let _restore = self.swap_in(files)?;
        match self.package.lang {
            Lang::Rust => {
                let mut args = vec!["test", "--lib", "--", "--test-threads=2"];
                args.extend(test_names.iter().map(String::as_str));
                let output = self.cargo(&args)?;
                let stdout = String::from_utf8_lossy(&output.stdout);
                let Some(result) = stdout.lines().rev().find(|line| line.starts_with("test result:")) else {
                    if output.status.code() == Some(124) {
                        return Ok(TestRun::Ran { passed: 0, failed: 1 });
                    }
                    let stderr = String::from_utf8_lossy(&output.stderr);
                    let error = stderr.lines().find(|line| line.starts_with("error")).unwrap_or("does not compile");
                    return Ok(TestRun::CompileError(error.to_owned()));
                };
                let count = |word: &str| {
                    result
                        .split(';')
                        .find(|part| part.trim_end().ends_with(word))
                        .and_then(|part| part.split_whitespace().rev().nth(1)?.parse::<usize>().ok())
                        .unwrap_or(0)
                };
                Ok(TestRun::Ran { passed: count("passed"), failed: count("failed") })
            }
            Lang::Ts => {
                let test_file = test_file.context("a TypeScript test file")?;
                let _ = std::fs::remove_dir_all(self.dir.join("out"));
                let (errors, _) = self.tsc(&[test_file], Some("out"))?;
                let tolerated = |error: &&Diag| {
                    tolerated.is_some_and(|file| error.file.ends_with(file) || file.ends_with(&error.file))
                };
                if let Some(error) = errors.iter().find(|error| !tolerated(error)) {
                    return Ok(TestRun::CompileError(format!("{}:{}: {}", error.file, error.line + 1, error.message)));
                }
                let js = self.dir.join("out").join(Path::new(test_file).with_extension("js"));
                let output = run_with_timeout(
                    Command::new("node").args(["--test", "--test-reporter=tap"]).arg(&js).current_dir(&self.dir),
                    Duration::from_secs(60),
                )?;
                let stdout = String::from_utf8_lossy(&output.stdout);
                let count = |prefix: &str| {
                    stdout
                        .lines()
                        .find_map(|line| line.strip_prefix(prefix).and_then(|rest| rest.trim().parse::<usize>().ok()))
                        .unwrap_or(0)
                };
                let (passed, mut failed) = (count("# pass "), count("# fail "));
                if output.status.code() == Some(124) || (passed == 0 && failed == 0 && !output.status.success()) {
                    failed += 1;
                }
                Ok(TestRun::Ran { passed, failed })
            }
        }
    }

    /// The JavaScript `tsc` emits for `file` (with `text` swapped in, else the original).
    pub fn emitted_js(&self, file: &str, text: Option<&str>) -> Result<String> {
        let files: Vec<(&str, &str)> = text.map(|text| (file, text)).into_iter().collect();
        let _restore = self.swap_in(&files)?;
        let out = "out-judge";
        let _ = std::fs::remove_dir_all(self.dir.join(out));
        self.tsc(&[file], Some(out))?;
        let js = self.dir.join(out).join(Path::new(file).with_extension("js"));
        std::fs::read_to_string(&js).with_context(|| format!("tsc emitted no {}", js.display()))
    }

    fn cargo(&self, args: &[&str]) -> Result<std::process::Output> {
        let mut command = Command::new("cargo");
        command
            .args(args.iter().take(2))
            .args(["--offline", "--quiet", "--manifest-path"])
            .arg(self.dir.join("Cargo.toml"))
            .args(args.iter().skip(2))
            // Under the scratch root (…/rust/<crate> → …/cargo-target), shared by its crates.
            .env("CARGO_TARGET_DIR", self.dir.join("../../cargo-target"))
            .env_remove("RUSTFLAGS")
            .env("CARGO_TERM_COLOR", "never");
        run_with_timeout(&mut command, CHECK_TIMEOUT)
    }

    /// `tsc` over `files` (with what they import): errors, and whether it ran. `out_dir` emits JavaScript.
    fn tsc(&self, files: &[&str], out_dir: Option<&str>) -> Result<(Vec<Diag>, bool)> {
        let mut options = json!({});
        if let Some(out_dir) = out_dir {
            options = json!({"noEmit": false, "outDir": out_dir});
        }
        let config = json!({"extends": "./tsconfig.base.json", "compilerOptions": options, "files": files});
        std::fs::write(self.dir.join("tsconfig.check.json"), serde_json::to_string(&config)?)?;
        let output = run_with_timeout(
            Command::new("node")
                .arg(corpus::tsc())
                .args(["-p", "tsconfig.check.json", "--pretty", "false"])
                .current_dir(&self.dir),
            CHECK_TIMEOUT,
        )?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        Ok((ts_errors(&stdout), output.status.code() != Some(124)))
    }

    fn swap_in(&self, files: &[(&str, &str)]) -> Result<Restore> {
        let mut restore = Restore { entries: Vec::new() };
        for (name, text) in files {
            let path = self.dir.join(name);
            let original = std::fs::read_to_string(&path).ok();
            restore.entries.push((path.clone(), original));
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(restore)
    }
}

/// Puts swapped files back (or removes files that did not exist) when dropped.
struct Restore {
    entries: Vec<(PathBuf, Option<String>)>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        for (path, original) in self.entries.drain(..).rev() {
            match original {
                Some(text) => {
                    let _ = std::fs::write(&path, text);
                }
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
}

/// A manifest of our own for the scratch crate: name, version, edition, the features that need no
/// dependency (defaults on), no dependencies but the dev-dependencies its sources name (the crate's own unit
/// tests use them: quickcheck, pretty_assertions, …; those of its benches and integration tests are left out,
/// the scratch copy has only `src/`), its own workspace.
fn scratch_cargo_toml(package: &Package) -> Result<String> {
    let original: toml_edit::DocumentMut = std::fs::read_to_string(package.dir().join("Cargo.toml"))?.parse()?;
    let sources: String = package
        .sources()
        .iter()
        .filter_map(|file| std::fs::read_to_string(package.dir().join(file)).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let mut dev_dependencies = String::new();
    if let Some(table) = original.get("dev-dependencies").and_then(|item| item.as_table_like()) {
        for (name, spec) in table.iter() {
            let named = |word: &str| {
                sources.match_indices(word).any(|(at, _)| {
                    let before = sources[..at].chars().next_back();
                    let after = sources[at + word.len()..].chars().next();
                    let ident = |ch: Option<char>| ch.is_some_and(|ch| ch.is_alphanumeric() || ch == '_');
                    !ident(before) && !ident(after)
                })
            };
            if named(&name.replace('-', "_")) {
                let spec = match spec.as_str() {
                    Some(version) => format!("{{ version = \"{version}\" }}"),
                    None => spec.as_inline_table().map(|inline| inline.to_string()).unwrap_or_else(|| {
                        let mut inline = toml_edit::InlineTable::new();
                        if let Some(table) = spec.as_table() {
                            for (key, value) in table.iter() {
                                if let Some(value) = value.as_value() {
                                    inline.insert(key, value.clone());
                                }
                            }
                        }
                        inline.to_string()
                    }),
                };
                dev_dependencies.push_str(&format!("{name} = {}\n", spec.trim()));
            }
        }
    }
    let edition = original["package"].get("edition").and_then(|item| item.as_str()).unwrap_or("2015").to_owned();
    let mut features = String::new();
    if let Some(table) = original.get("features").and_then(|item| item.as_table()) {
        for (name, value) in table.iter() {
            let members: Vec<String> = value
                .as_array()
                .map(|array| {
                    array
                        .iter()
                        .filter_map(|member| member.as_str())
                        .filter(|member| table.contains_key(member))
                        .map(|member| format!("\"{member}\""))
                        .collect()
                })
                .unwrap_or_default();
            features.push_str(&format!("{name} = [{}]\n", members.join(", ")));
        }
    }
    Ok(format!(
        "[package]\nname = \"{}\"\nversion = \"{}\"\nedition = \"{edition}\"\n\n[lib]\npath = \"src/lib.rs\"\n\n[features]\n{features}\n[dev-dependencies]\n{dev_dependencies}\n[workspace]\n\n[lints.rust]\nunexpected_cfgs = \"allow\"\n",
        package.name, package.version
    ))
}

fn rust_errors(stdout: &str) -> Vec<Diag> {
    let mut errors = Vec::new();
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else { continue };
        if message["reason"] != "compiler-message" || message["message"]["level"] != "error" {
            continue;
        }
        let spans = message["message"]["spans"].as_array().cloned().unwrap_or_default();
        let Some(span) = spans.iter().find(|span| span["is_primary"] == true).or(spans.first()) else { continue };
        let number = |key: &str| span[key].as_u64().unwrap_or(1).saturating_sub(1) as u32;
        errors.push(Diag {
            file: span["file_name"].as_str().unwrap_or("").to_owned(),
            line: number("line_start"),
            col: number("column_start"),
            end_line: number("line_end"),
            end_col: number("column_end"),
            message: message["message"]["message"].as_str().unwrap_or("").to_owned(),
        });
    }
    errors
}

fn ts_errors(stdout: &str) -> Vec<Diag> {
    let mut errors = Vec::new();
    for line in stdout.lines() {
        // src/utils.ts(12,5): error TS2304: Cannot find name 'x'.
        let Some((location, rest)) = line.split_once("): error ") else { continue };
        let Some((file, position)) = location.rsplit_once('(') else { continue };
        let mut numbers = position.split(',').map(|n| n.trim().parse::<u32>().unwrap_or(1).saturating_sub(1));
        let (line_no, col) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        let message = rest.split_once(": ").map(|(code, message)| format!("{code}: {message}")).unwrap_or(rest.into());
        errors.push(Diag { file: file.to_owned(), line: line_no, col, end_line: line_no, end_col: col + 1, message });
    }
    errors
}

/// Runs a command with a time limit (`timeout` from coreutils: the exit code is 124 when it fired).
pub fn run_with_timeout(command: &mut Command, limit: Duration) -> Result<std::process::Output> {
    let program = command.get_program().to_owned();
    let mut wrapped = Command::new("timeout");
    wrapped.arg("-k").arg("5").arg(format!("{}", limit.as_secs())).arg(&program).args(command.get_args());
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    wrapped.stdin(Stdio::null()).output().with_context(|| format!("running {}", program.to_string_lossy()))
}

/// How a fix was judged ([`judge_fix`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict", content = "why")]
pub enum FixVerdict {
    /// The fixed file is the original again (blanks aside).
    ExactRestore,
    /// It compiles, the diagnostic is gone, and it behaves as the original: the package's own tests pass as they
    /// do on the original (Rust), or the JavaScript it compiles to is the original's (TypeScript: types aside,
    /// the same program).
    SameBehaviour(String),
    /// It compiles and the diagnostic is gone, but nothing shows it behaves as the original (no own tests cover
    /// the crate, or the emitted JavaScript differs): not counted right.
    Unproven(String),
    /// It does not compile, the diagnostic is still there, or the package's tests fail.
    Wrong(String),
}

impl FixVerdict {
    pub fn is_right(&self) -> bool {
        matches!(self, FixVerdict::ExactRestore | FixVerdict::SameBehaviour(_))
    }
}

/// The verdict on a fix, judged by behaviour, not by "it compiles" alone: deleting the statement, using another
/// variable of the same type or casting to `any` all compile, and none of them is the fix. Right is the original
/// restored, or a compiling edit with the diagnostic gone that behaves as the original did (see [`FixVerdict`]).
pub fn judge_fix(scratch: &Scratch, file: &str, fixed: &str, asked: &Diag) -> Result<FixVerdict> {
    let errors = scratch.check(&[(file, fixed)])?;
    if errors.iter().any(|error| error.message == asked.message && error.file == asked.file) {
        return Ok(FixVerdict::Wrong(format!("still: {}", asked.message)));
    }
    if let Some(error) = errors.first() {
        return Ok(FixVerdict::Wrong(format!("{}:{}: {}", error.file, error.line + 1, error.message)));
    }
    let original = scratch.package.read(file)?;
    let squeezed = |text: &str| text.split_whitespace().collect::<String>();
    if squeezed(fixed) == squeezed(&original) {
        return Ok(FixVerdict::ExactRestore);
    }
    match scratch.package.lang {
        Lang::Rust => {
            let baseline = scratch.own_tests.get_or_init(|| {
                scratch.run_tests(&[], &[], None).unwrap_or_else(|error| TestRun::CompileError(format!("{error:#}")))
            });
            let passed_before = match baseline {
                TestRun::Ran { passed, failed: 0 } if *passed > 0 => *passed,
                _ => return Ok(FixVerdict::Unproven("the crate has no own tests that pass here".into())),
            };
            match scratch.run_tests(&[(file, fixed)], &[], None)? {
                TestRun::Ran { passed, failed: 0 } if passed == passed_before => {
                    Ok(FixVerdict::SameBehaviour(format!("the crate's {passed} own tests pass")))
                }
                TestRun::Ran { failed, .. } => {
                    Ok(FixVerdict::Wrong(format!("{failed} of the crate's own tests fail after the fix")))
                }
                TestRun::CompileError(error) => Ok(FixVerdict::Wrong(format!("its tests do not compile: {error}"))),
            }
        }
        Lang::Ts => {
            let before = scratch.emitted_js(file, None)?;
            let after = scratch.emitted_js(file, Some(fixed))?;
            if squeezed(&before) == squeezed(&after) {
                Ok(FixVerdict::SameBehaviour("the same JavaScript as the original".into()))
            } else {
                Ok(FixVerdict::Unproven("compiles, but to other JavaScript than the original".into()))
            }
        }
    }
}

/// The verdict on generated tests: they compile and pass against the original and at least one of them fails
/// against a mutant.
pub fn tests_are_correct(
    scratch: &Scratch,
    file: &str,
    with_tests: &str,
    mutants_with_tests: &[String],
    test_names: &[String],
    test_file: Option<(&str, &str)>,
) -> Result<Result<(), String>> {
    let mut files = vec![(file, with_tests)];
    files.extend(test_file);
    let test_path = test_file.map(|(path, _)| path);
    match scratch.run_tests(&files, test_names, test_path)? {
        TestRun::CompileError(error) => return Ok(Err(format!("does not compile: {error}"))),
        TestRun::Ran { passed: 0, .. } => return Ok(Err("no test ran".into())),
        TestRun::Ran { failed, .. } if failed > 0 => return Ok(Err(format!("{failed} fail on the original"))),
        TestRun::Ran { .. } => {}
    }
    for mutant in mutants_with_tests {
        let mut files = vec![(file, mutant.as_str())];
        files.extend(test_file);
        if let TestRun::Ran { failed, .. } = scratch.run_tests_tolerating(&files, test_names, test_path, Some(file))? {
            if failed > 0 {
                return Ok(Ok(()));
            }
        }
    }
    Ok(Err("pass against every mutant: they assert nothing the function does".into()))
}

/// The verdict on a pattern: the engine the offered code runs finds it in every held-back positive and in no
/// held-back negative (search semantics, as the offered code uses it). Rust patterns are judged by the `regex`
/// crate in this process (its own `Regex::new` and `is_match`, nothing of Spark's), TypeScript ones by node's
/// `RegExp` in a child process.
pub fn regex_is_correct(
    lang: Lang,
    pattern: &str,
    positives: &[String],
    negatives: &[String],
) -> Result<Result<(), String>> {
    let (missed, matched): (Vec<String>, Vec<String>) = match lang {
        Lang::Rust => {
            let compiled = match regex::Regex::new(pattern) {
                Ok(compiled) => compiled,
                Err(error) => {
                    let first = error.to_string().lines().last().unwrap_or("").trim().to_owned();
                    return Ok(Err(format!("does not compile in the regex crate: {first}")));
                }
            };
            (
                positives.iter().filter(|example| !compiled.is_match(example)).cloned().collect(),
                negatives.iter().filter(|example| compiled.is_match(example)).cloned().collect(),
            )
        }
        Lang::Ts => match node_regex(pattern, positives, negatives)? {
            Ok(lists) => lists,
            Err(error) => return Ok(Err(format!("does not compile in node: {error}"))),
        },
    };
    if !missed.is_empty() {
        return Ok(Err(format!("misses {}", json!(missed))));
    }
    if !matched.is_empty() {
        return Ok(Err(format!("matches {}", json!(matched))));
    }
    Ok(Ok(()))
}

/// The positives a pattern misses and the negatives it finds.
type MissedAndMatched = (Vec<String>, Vec<String>);

/// node's `RegExp` on the examples: the positives it misses and the negatives it finds, or its compile error.
fn node_regex(pattern: &str, positives: &[String], negatives: &[String]) -> Result<Result<MissedAndMatched, String>> {
    let input = json!({"pattern": pattern, "positives": positives, "negatives": negatives}).to_string();
    let script = "const q = JSON.parse(require('fs').readFileSync(0, 'utf8'));\nlet r;\ntry { r = new RegExp(q.pattern); } catch (e) { console.log(JSON.stringify({error: String(e)})); process.exit(0); }\nconsole.log(JSON.stringify({missed: q.positives.filter(s => !r.test(s)), matched: q.negatives.filter(s => r.test(s))}));\n";
    let mut child = Command::new("node")
        .arg("-e")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running node")?;
    std::io::Write::write_all(child.stdin.as_mut().context("stdin")?, input.as_bytes())?;
    drop(child.stdin.take());
    let output = child.wait_with_output()?;
    let verdict: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("node: {}", String::from_utf8_lossy(&output.stderr)))?;
    if let Some(error) = verdict["error"].as_str() {
        return Ok(Err(error.to_owned()));
    }
    if !output.status.success() {
        bail!("node failed");
    }
    let list = |key: &str| -> Vec<String> {
        verdict[key]
            .as_array()
            .map(|items| items.iter().filter_map(|item| item.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    Ok(Ok((list("missed"), list("matched"))))
}

/// What a user sees of a suggestion: its first non-empty line (a suggestion that starts with a line break shows
/// its text on the lines below), trimmed at the end; empty when the suggestion is blank.
pub fn first_visible_line(suggestion: &str) -> &str {
    suggestion.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim_end()
}

/// The first line of a ghost-text suggestion is correct when it is exactly what the file has next on that line
/// (a suggestion that starts with a line break is wrong while the line has more to type: accepting it breaks
/// the line).
pub fn ghost_line_is_correct(rest_of_line: &str, suggestion: &str) -> bool {
    let first = suggestion.split('\n').next().unwrap_or("");
    !first.is_empty() && first.trim_end() == rest_of_line.trim_end()
}

/// Whether accepting `suggestion` at byte `at` adds syntax errors, as the language's own toolchain parses it
/// (rustc's parser through `rustfmt`, TypeScript's `createSourceFile`: never Spark's tree-sitter grammars): more
/// than the document has before it, and more than the real file has. The document at a keystroke lacks the rest
/// of the span still to type, so it may have errors of its own; a suggestion breaks the parse only when it makes
/// that worse. An error of the parser itself (a missing toolchain) is an error of the harness.
pub fn breaks_parse(lang: Lang, document: &str, at: usize, suggestion: &str, real_file: &str) -> Result<bool> {
    let accepted = format!("{}{}{}", &document[..at], suggestion, &document[at..]);
    let after = toolchain_syntax_errors(lang, &accepted)?;
    Ok(after > 0
        && after > toolchain_syntax_errors(lang, document)?
        && after > toolchain_syntax_errors(lang, real_file)?)
}

/// How many syntax errors the language's toolchain reports for `text` (0: it parses).
pub fn toolchain_syntax_errors(lang: Lang, text: &str) -> Result<usize> {
    // The real file is asked about at every keystroke of its spans: remembered (a few hundred texts at most).
    static SEEN: std::sync::Mutex<Vec<(String, usize)>> = std::sync::Mutex::new(Vec::new());
    let key = super::fingerprint(&[lang.name(), text]);
    if let Some((_, errors)) = SEEN.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(seen, _)| *seen == key) {
        return Ok(*errors);
    }
    let errors = match lang {
        Lang::Rust => rustc_parse_errors(text)?,
        Lang::Ts => TS_PARSER.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).errors(text)?,
    };
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen.len() >= 256 {
        seen.remove(0);
    }
    seen.push((key, errors));
    Ok(errors)
}

/// rustc's parser, through `rustfmt` (which parses with it, and formats nothing when that fails): its `error`
/// lines. rustfmt ships with the toolchain, no build of ours.
fn rustc_parse_errors(text: &str) -> Result<usize> {
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2021", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running rustfmt (rustc's parser)")?;
    let mut stdin = child.stdin.take().context("rustfmt's stdin")?;
    let input = text.to_owned();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, input.as_bytes()));
    let output = child.wait_with_output()?;
    let _ = writer.join();
    if output.status.success() {
        return Ok(0);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors =
        stderr.lines().filter(|line| line.starts_with("error") && !line.starts_with("error: aborting")).count();
    Ok(errors.max(1))
}

/// One node process with the eval's TypeScript loaded, answering a line of JSON (`{"text"}`) with the parse
/// diagnostics' count of `ts.createSourceFile` (started on first use, started again if it died).
struct TsParser {
    child: Option<(std::process::Child, std::io::BufReader<std::process::ChildStdout>)>,
}

static TS_PARSER: std::sync::Mutex<TsParser> = std::sync::Mutex::new(TsParser { child: None });

const TS_PARSER_SCRIPT: &str = "const ts = require(process.argv[1]);\n\
const rl = require('readline').createInterface({input: process.stdin});\n\
rl.on('line', (line) => {\n\
  const text = JSON.parse(line).text;\n\
  const file = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);\n\
  process.stdout.write(JSON.stringify({errors: file.parseDiagnostics.length}) + '\\n');\n\
});\n";

impl TsParser {
    fn errors(&mut self, text: &str) -> Result<usize> {
        use std::io::{BufRead, Write};
        if self.child.is_none() {
            let typescript = eval_dir().join("tools/node_modules/typescript");
            let mut child = Command::new("node")
                .arg("-e")
                .arg(TS_PARSER_SCRIPT)
                .arg(&typescript)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("starting node with TypeScript's parser")?;
            let stdout = std::io::BufReader::new(child.stdout.take().context("node's stdout")?);
            self.child = Some((child, stdout));
        }
        let (child, stdout) = self.child.as_mut().expect("started above");
        let mut line = json!({ "text": text }).to_string();
        line.push('\n');
        let mut answer = String::new();
        let asked = child
            .stdin
            .as_mut()
            .context("node's stdin")
            .and_then(|stdin| stdin.write_all(line.as_bytes()).context("writing to node"))
            .and_then(|()| stdout.read_line(&mut answer).context("reading from node"));
        let parsed = asked.ok().and_then(|_| serde_json::from_str::<Value>(&answer).ok());
        match parsed.and_then(|value| value["errors"].as_u64()) {
            Some(errors) => Ok(errors as usize),
            None => {
                // Gone or confused: the next call starts a new one.
                if let Some((mut child, _)) = self.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                bail!("TypeScript's parser (node) gave no answer: {answer:?}")
            }
        }
    }
}
