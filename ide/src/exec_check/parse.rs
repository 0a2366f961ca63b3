//! Pure readers of the tools' output: compiler errors (`cargo --message-format=json`, `tsc --pretty false`), test
//! counts (libtest, vitest, jest, node:test), and the judgement of a candidate's errors against the original's.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::kinds::FileChange;

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
pub(super) fn parse_tsc_errors(output: &str) -> Vec<CompilerError> {
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
    /// Every line of the file counts as edited: the original did not parse, so its errors (the compiler's
    /// recovery from the syntax error) say nothing of what the fixed file may still have.
    pub whole_file: bool,
}

impl EditedLines {
    pub fn of(file: &Path, change: &FileChange) -> EditedLines {
        let first = change.old_text[..change.replace.start].matches('\n').count() as u32 + 1;
        let last = first + change.insert.matches('\n').count() as u32;
        EditedLines { file: file.to_string_lossy().into_owned(), lines: first..=last, whole_file: false }
    }

    pub(super) fn contains(&self, error: &CompilerError) -> bool {
        error.file == self.file && (self.whole_file || self.lines.contains(&error.line))
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
/// crate, the test module (the one the inserted text declares, else the last `#[cfg(test)]` module opened in
/// `before`, the file's text before the insertion: `mod test`, `mod unit`; `tests` when neither says), and the
/// last `#[test]` function of the inserted text.
pub fn rust_test_filter(file_in_crate: &Path, before: &str, inserted: &str) -> Option<String> {
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
    let tests = test_module(inserted).or_else(|| test_module(before)).unwrap_or_else(|| "tests".to_owned());
    Some(if module.is_empty() { format!("{tests}::{name}") } else { format!("{module}::{tests}::{name}") })
}

/// The name of the last `#[cfg(test)]` module that `text` opens (`#[cfg(test)]` up to two lines above
/// `mod name {`).
fn test_module(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines.iter().enumerate().rev().find_map(|(idx, line)| {
        let rest = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub ")).unwrap_or(line);
        let rest = rest.strip_prefix("mod ")?;
        let name: String = rest.chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
        let opens = rest[name.len()..].trim_start().starts_with('{');
        let gated = lines[idx.saturating_sub(2)..idx].iter().any(|above| above.starts_with("#[cfg(test)]"));
        (opens && gated && !name.is_empty()).then_some(name)
    })
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
        let edited = EditedLines { file: "src/lib.rs".into(), lines: 1..=1, whole_file: false };
        let in_edit = judge(std::slice::from_ref(&target), Some(&baseline), None, Some(&edited)).unwrap_err();
        assert!(in_edit.starts_with("in the edit"), "{in_edit}");
        assert_eq!(judge(std::slice::from_ref(&unrelated), Some(&baseline), None, Some(&edited)), Ok(()));
        // The original did not parse: an error anywhere in the edited file refuses, the original's or not.
        let elsewhere = EditedLines { file: "src/other.rs".into(), lines: 90..=91, whole_file: false };
        assert_eq!(judge(std::slice::from_ref(&unrelated), Some(&baseline), None, Some(&elsewhere)), Ok(()));
        let whole = EditedLines { whole_file: true, ..elsewhere };
        assert!(judge(&[unrelated], Some(&baseline), None, Some(&whole)).unwrap_err().starts_with("in the edit"));
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
        let filter = |file: &str, before: &str, inserted: &str| rust_test_filter(Path::new(file), before, inserted);
        assert_eq!(filter("src/lib.rs", "", inserted).as_deref(), Some("tests::parse_works"));
        assert_eq!(filter("src/a/b.rs", "", inserted).as_deref(), Some("a::b::tests::parse_works"));
        assert_eq!(filter("src/a/mod.rs", "", inserted).as_deref(), Some("a::tests::parse_works"));
        assert_eq!(filter("src/bin/x.rs", "", inserted), None);
        assert_eq!(filter("src/lib.rs", "", "fn no_test() {}"), None);
        // Added to the file's own test module, whatever its name; a module nested in it is not it.
        let before = "fn f() {}\n\n#[cfg(test)]\nmod test {\n    use super::*;\n    mod inner {\n    }\n";
        assert_eq!(filter("src/lib.rs", before, inserted).as_deref(), Some("test::parse_works"));
        let new_module = format!("\n#[cfg(test)]\nmod tests {{\n{inserted}}}\n");
        assert_eq!(filter("src/lib.rs", before, &new_module).as_deref(), Some("tests::parse_works"));
    }
}
