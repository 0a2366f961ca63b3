//! The evaluation's self-test, without a model: the corpus is pinned, fetched and absent from Spark's sources,
//! and every independent check scores a known-good answer right and a known-bad one wrong (a fix on a fetched
//! crate and package, tests against a function and its mutants, regexes in Python and node, a ghost line).
//! The scores themselves come from `make eval`, never from here.

use std::collections::HashMap;

use spark_tests::eval::check::{self, Scratch};
use spark_tests::eval::corpus::{self, Lang, Package};
use spark_tests::eval::{cases, drive, run};

/// The tests share scratch copies and the fetch: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A scratch copy of its own: `make eval` may be running at the same time.
fn scratch_copy(package: &Package) -> Result<Scratch, anyhow::Error> {
    Scratch::new_in(package, &spark_tests::eval::eval_dir().join("self-test-scratch"))
}

fn packages() -> Vec<Package> {
    corpus::prepare().expect("fetching the eval corpus (cargo vendor, npm pack) and installing tsc")
}

fn package(name: &str) -> Package {
    packages().into_iter().find(|package| package.name == name).expect("in the corpus")
}

#[test]
fn the_corpus_is_pinned_fetched_and_big_enough() {
    let _serial = serial();
    let packages = packages();
    let count = |lang: Lang| packages.iter().filter(|package| package.lang == lang).count();
    assert!(count(Lang::Rust) >= 4 && count(Lang::Ts) >= 3, "{packages:?}");
    for package in &packages {
        assert!(package.version.split('.').all(|part| part.parse::<u32>().is_ok()), "pinned: {package:?}");
        assert!(package.why.len() > 20, "says why: {package:?}");
        assert!(!corpus::FORBIDDEN.contains(&package.name.as_str()), "{}", package.name);
        assert!(!package.sources().is_empty(), "fetched with sources: {package:?}");
    }
}

fn spark_sources() -> String {
    fn walk(dir: &std::path::Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|name| name != "target") {
                walk(&path, out);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                out.push_str(&text);
                out.push('\n');
            }
        }
    }
    let mut text = String::new();
    for dir in ["server", "ide", "engine"] {
        walk(&spark_tests::workspace_root().join(dir), &mut text);
    }
    text
}

/// `needle` in `haystack` not preceded by an identifier character (`heck::` is not in `edit_check::`).
fn contains_word(haystack: &str, needle: &str) -> bool {
    haystack
        .match_indices(needle)
        .any(|(at, _)| !haystack[..at].chars().next_back().is_some_and(|ch| ch.is_alphanumeric() || ch == '_'))
}

#[test]
fn no_corpus_text_occurs_in_the_server_or_engine() {
    let _serial = serial();
    let spark = spark_sources();
    assert!(spark.len() > 100_000, "read Spark's sources");
    let mut sampled = 0;
    for package in packages() {
        // The package's name as code would use it: a crate path, a dependency line, an import.
        let crate_name = package.name.replace('-', "_");
        for needle in [
            format!("{crate_name}::"),
            format!("\n{} = ", package.name),
            format!("from \"{}\"", package.name),
            format!("from '{}'", package.name),
        ] {
            assert!(!contains_word(&spark, &needle), "{needle:?} of the corpus occurs in server/ or engine/");
        }
        if package.name.len() >= 5 {
            assert!(!spark.contains(&package.name), "{} occurs in server/ or engine/", package.name);
        }
        // A sample of distinctive lines of its sources.
        for file in package.sources() {
            let text = package.read(&file).unwrap();
            for (idx, line) in text.lines().map(str::trim).enumerate() {
                let boilerplate = ["//", "*", "/*", "#[", "use ", "import ", "export ", "}", "pub use"]
                    .iter()
                    .any(|prefix| line.starts_with(prefix));
                if line.len() < 40 || boilerplate || idx % 3 != 0 {
                    continue;
                }
                sampled += 1;
                assert!(
                    !spark.contains(line),
                    "a line of {} {file} occurs in server/ or engine/: {line}",
                    package.name
                );
            }
        }
    }
    assert!(sampled > 300, "sampled {sampled} lines");
}

#[test]
fn regex_specs_are_enough_held_back_and_scored_right_by_python_and_node() {
    let specs = cases::regex_cases().unwrap();
    assert!(specs.len() >= 40, "{} specs", specs.len());
    for lang in [Lang::Rust, Lang::Ts] {
        assert!(specs.iter().filter(|spec| spec.lang == lang).count() >= 20);
    }
    let tasks_dir = spark_tests::workspace_root().join("ide/src/tasks");
    let tasks: String = std::fs::read_dir(&tasks_dir)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    let few_shots: Vec<_> = tasks
        .split(['\n', '"'])
        .filter_map(|line| line.split_once("Description: ").or_else(|| line.split_once("regex: ")))
        .filter_map(|(_, rest)| spark_ide::tasks::parse_regex_spec(&format!("regex: {}", rest.replace("\\n", " "))))
        .collect();
    assert!(few_shots.len() >= 3, "{few_shots:?}");
    for (idx, spec) in specs.iter().enumerate() {
        assert!(spec.held.len() >= 2 && spec.held_not.len() >= 3, "{spec:?}");
        for example in spec.held.iter().chain(&spec.held_not) {
            assert!(!spec.shown.contains(example) && !spec.shown_not.contains(example), "held back: {example}");
        }
        // Not one of the few-shot examples of the prompts (nor of the server's own tests).
        for few_shot in &few_shots {
            assert!(!few_shot.description.contains(&spec.description), "{}", spec.description);
            for example in spec.shown.iter().chain(&spec.held) {
                assert!(!few_shot.positives.contains(example), "{example} is a few-shot example");
            }
        }
        let good = check::regex_is_correct(spec.lang, &spec.reference, &spec.held, &spec.held_not).unwrap();
        assert_eq!(good, Ok(()), "the reference of {:?}", spec.description);
        if idx % 6 == 0 {
            for bad in [".*", "^$", "^[a-z]+$", "(unclosed"] {
                let verdict = check::regex_is_correct(spec.lang, bad, &spec.held, &spec.held_not).unwrap();
                assert!(verdict.is_err(), "{bad:?} scored correct for {:?}", spec.description);
            }
        }
    }
    assert_eq!(run::inserted_pattern(Lang::Rust, r#"const PATTERN: &str = r"^\d{3}$";"#).as_deref(), Some(r"^\d{3}$"));
    assert_eq!(
        run::inserted_pattern(Lang::Rust, r###"let re = regex::Regex::new(r#"^"a"$"#).unwrap();"###).as_deref(),
        Some(r#"^"a"$"#)
    );
    assert_eq!(run::inserted_pattern(Lang::Ts, r"const re = /^a\/b$/;").as_deref(), Some(r"^a\/b$"));
}

#[test]
fn ghost_lines_and_edits_are_scored_right() {
    assert!(check::ghost_line_is_correct("foo(a, b);", "foo(a, b);\n}"));
    assert!(!check::ghost_line_is_correct("foo(a, b);", "foo(a, c);"));
    assert!(!check::ghost_line_is_correct("foo(a, b);", "foo(a, b"));
    assert!(!check::ghost_line_is_correct("foo(a, b);", ""));
    let real = "fn f() -> i32 {\n    let x = 1;\n    x\n}\n";
    let document = "fn f() -> i32 {\n    \n    x\n}\n";
    let at = document.find("\n    \n").unwrap() + 5;
    assert!(!check::breaks_parse(Lang::Rust, document, at, "let x = 1;", real));
    assert!(check::breaks_parse(Lang::Rust, document, at, "let x = (1;", real));
    // Edits as the server sends them: UTF-16 positions, a created file.
    let mut files = HashMap::from([("file:///a.ts".to_owned(), "const é = 1;\nlet b = 2;\n".to_owned())]);
    let edit = serde_json::json!({"documentChanges": [
        {"textDocument": {"uri": "file:///a.ts", "version": 1},
         "edits": [{"range": {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 11}}, "newText": "3"}]},
        {"kind": "create", "uri": "file:///a.test.ts"},
        {"textDocument": {"uri": "file:///a.test.ts", "version": null},
         "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "newText": "test"}]}
    ]});
    drive::apply_edit(&edit, &mut files).unwrap();
    assert_eq!(files["file:///a.ts"], "const é = 3;\nlet b = 2;\n");
    assert_eq!(files["file:///a.test.ts"], "test");
    assert_eq!(
        drive::uri_path("file:///t/tanstack%2Bquery-core/a%20b.ts"),
        std::path::PathBuf::from("/t/tanstack+query-core/a b.ts")
    );
}

#[test]
fn a_right_and_a_wrong_fix_are_scored_right_by_cargo_and_tsc() {
    let _serial = serial();
    for (name, file) in [("strsim", "src/lib.rs"), ("redux", "src/compose.ts")] {
        let package = package(name);
        let scratch = scratch_copy(&package).unwrap();
        let original = package.read(file).unwrap();
        let function = cases::function_ranges(package.lang, &original).into_iter().next().expect("a function");
        // Break it: the body's first `(` opens a call or condition; drop the `)` that closes it.
        let open = function.start + original[function.clone()].find('(').unwrap();
        let close = open + original[open..].find(')').unwrap();
        let mut broken = original.clone();
        broken.remove(close);
        let errors = scratch.check(&[(file, &broken)]).unwrap();
        let diag =
            errors.iter().find(|error| error.file == file).expect("the compiler rejects the broken file").clone();
        assert_eq!(check::fix_is_correct(&scratch, file, &original, &diag).unwrap(), Ok(()), "{name}: the right fix");
        let wrong = broken.replacen(&original[function.clone()][..4], "", 0);
        assert!(check::fix_is_correct(&scratch, file, &wrong, &diag).unwrap().is_err(), "{name}: no fix");
        let still_wrong = format!("{broken}\n");
        assert!(check::fix_is_correct(&scratch, file, &still_wrong, &diag).unwrap().is_err(), "{name}: a wrong fix");
    }
}

#[test]
fn tests_that_assert_and_tests_that_do_not_are_told_apart() {
    let _serial = serial();
    // Rust: strsim's osa_distance against its mutants.
    let strsim = package("strsim");
    let scratch = scratch_copy(&strsim).unwrap();
    let text = cases::without_test_modules(Lang::Rust, &strsim.read("src/lib.rs").unwrap());
    let start = text.find("pub fn osa_distance").unwrap();
    let end = start + text[start..].find("\n}\n").unwrap() + 2;
    let mutants = cases::mutation_sites(Lang::Rust, &text, start..end);
    assert!(mutants.len() >= 3, "{mutants:?}");
    let with = |body: &str| {
        let module = format!("{text}\n#[cfg(test)]\nmod eval_self_test {{\n    use super::*;\n\n    #[test]\n    fn osa_self_test() {{\n        {body}\n    }}\n}}\n");
        let mutated: Vec<String> = mutants
            .iter()
            .take(3)
            .map(|(from, to, replacement)| {
                let mut mutant = module.clone();
                mutant.replace_range(*from..*to, replacement);
                mutant
            })
            .collect();
        check::tests_are_correct(&scratch, "src/lib.rs", &module, &mutated, &["osa_self_test".to_owned()], None)
            .unwrap()
    };
    let good = "assert_eq!(osa_distance(\"ab\", \"bca\"), 3);\n        assert_eq!(osa_distance(\"kitten\", \"sitting\"), 3);\n        assert_eq!(osa_distance(\"ab\", \"ba\"), 1);";
    assert_eq!(with(good), Ok(()));
    assert!(with("let _ = osa_distance(\"a\", \"b\");").is_err(), "asserts nothing");
    assert!(with("assert_eq!(osa_distance(\"ab\", \"ba\"), 7);").is_err(), "fails on the original");
    assert!(with("assert_eq!(osa_distance(\"ab\", 3), 1);").is_err(), "does not compile");

    // TypeScript: redux's compose, with node:test.
    let redux = package("redux");
    let scratch = scratch_copy(&redux).unwrap();
    let module = redux.read("src/compose.ts").unwrap();
    let start = module.find("export default function compose(...funcs").unwrap();
    let mutants: Vec<String> = cases::mutation_sites(Lang::Ts, &module, start..module.len())
        .into_iter()
        .map(|(from, to, replacement)| {
            let mut mutant = module.clone();
            mutant.replace_range(from..to, &replacement);
            mutant
        })
        .collect();
    let test = |body: &str| {
        let text = format!("import {{ test }} from \"node:test\";\nimport assert from \"node:assert/strict\";\nimport compose from \"./compose\";\n\ntest(\"compose\", () => {{\n  {body}\n}});\n");
        check::tests_are_correct(
            &scratch,
            "src/compose.ts",
            &module,
            &mutants,
            &[],
            Some(("src/compose.test.ts", &text)),
        )
        .unwrap()
    };
    let good = "assert.equal(compose((x: number) => x + 1, (x: number) => x * 2)(3), 7);\n  assert.equal(compose()(5), 5);\n  const f = (x: number) => x;\n  assert.equal(compose(f), f);";
    assert_eq!(test(good), Ok(()));
    assert!(test("assert.ok(typeof compose === \"function\");").is_err(), "asserts nothing the mutants change");
}

#[test]
fn the_report_counts_offered_but_wrong_and_crashes_in_their_own_columns() {
    use spark_tests::eval::report;
    use spark_tests::eval::run::{CaseResult, Keystroke, Run, Span};
    let case = |id: &str, offered: bool, correct: bool, crash: bool| CaseResult {
        task: "fix".into(),
        lang: Lang::Rust,
        id: id.into(),
        offered,
        verified: offered,
        correct,
        crash_or_timeout: crash,
        harness_error: false,
        ms: 100,
        note: String::new(),
    };
    let keystroke = |shown: &str, correct: bool| Keystroke {
        lang: Lang::Ts,
        case: "g".into(),
        ms: 50,
        shown: shown.into(),
        correct,
        breaks_parse: !correct && !shown.is_empty(),
        crash_or_timeout: false,
    };
    let run = Run {
        label: "self-test".into(),
        model: "none".into(),
        results: vec![case("a", true, true, false), case("b", true, false, false), case("c", false, false, true)],
        keystrokes: vec![keystroke("", false), keystroke("x(", false), keystroke("foo();", true)],
        spans: vec![Span { lang: Lang::Ts, case: "g".into(), chars: 10, supplied: 6 }],
        wall_s: 1.0,
    };
    let rows = report::task_rows(&run);
    assert_eq!((rows[0].offered, rows[0].correct, rows[0].offered_but_wrong, rows[0].crash_or_timeout), (2, 1, 1, 1));
    let ghost = report::ghost_rows(&run);
    assert_eq!(
        (ghost[0].shown, ghost[0].correct_first_line, ghost[0].shown_wrong, ghost[0].breaks_parse),
        (2, 1, 1, 1)
    );
    let markdown = report::markdown(&run);
    assert!(markdown.contains("offered but wrong") && markdown.contains("| fix | rust | 3 |"), "{markdown}");
    let png = std::env::temp_dir().join(format!("spark-eval-self-test-{}.png", std::process::id()));
    report::plot(&[run], &png).unwrap();
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    let _ = std::fs::copy(&png, spark_tests::workspace_root().join("target/eval-self-test.png"));
}
