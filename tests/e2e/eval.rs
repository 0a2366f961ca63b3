//! The evaluation's self-test, without a model: the corpus is pinned, fetched and absent from Spark's sources,
//! and every independent check scores a known-good answer right and a known-bad one wrong (a fix on a fetched
//! crate and package, tests against a function and its mutants, regexes in the regex crate and node, a ghost line, next
//! edits against a hand-made history). A small slice of the next-edit cases also runs through the real server, end
//! to end. The scores themselves come from `make eval`, never from here.

use std::collections::HashMap;

use spark_tests::eval::check::{self, Scratch};
use spark_tests::eval::corpus::{self, Lang, Package, Split};
use spark_tests::eval::history::{self, Edit, History, Verdict};
use spark_tests::eval::{cases, drive, report, run};

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
    // A held-out test split of its own: at least 3 crates and 3 npm packages nobody tuned on.
    let held_out = |lang: Lang| packages.iter().filter(|p| p.lang == lang && p.split == Split::Test).count();
    assert!(held_out(Lang::Rust) >= 3 && held_out(Lang::Ts) >= 3, "{packages:?}");
    for package in &packages {
        assert!(package.version.split('.').all(|part| part.parse::<u32>().is_ok()), "pinned: {package:?}");
        assert!(package.why.len() > 20, "says why: {package:?}");
        assert!(!corpus::FORBIDDEN.contains(&package.name.as_str()), "{}", package.name);
        assert!(!package.sources().is_empty(), "fetched with sources: {package:?}");
    }
}

/// The text of every file under `dir`, in its folders too (`target` aside), one after the other.
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

fn spark_sources() -> String {
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
                // A `Display` impl's signature is the same in every crate.
                let boilerplate = ["//", "*", "/*", "#[", "use ", "import ", "export ", "}", "pub use", "fn fmt(&self"]
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
fn regex_specs_are_enough_held_back_and_scored_right_by_the_regex_crate_and_node() {
    let specs = cases::regex_cases().unwrap();
    assert!(specs.len() >= 40, "{} specs", specs.len());
    let held_out: Vec<_> = specs.iter().filter(|spec| spec.split == Split::Test).collect();
    assert!(held_out.len() >= 20 && held_out.iter().all(|spec| spec.id.starts_with("test-")), "{held_out:?}");
    for lang in [Lang::Rust, Lang::Ts] {
        assert!(specs.iter().filter(|spec| spec.lang == lang).count() >= 20);
    }
    // Every source file of the tasks, in folders too (tasks/fix/).
    let mut tasks = String::new();
    walk(&spark_tests::workspace_root().join("ide/src/tasks"), &mut tasks);
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
    // A suggestion that starts with a line break is shown (on the lines below) and wrong mid-line.
    assert!(!check::ghost_line_is_correct("foo(a, b);", "\n    foo(a, b);"));
    assert_eq!(check::first_visible_line("\n  \n    foo(a, b);\nbar"), "    foo(a, b);");
    assert_eq!(check::first_visible_line(" \n"), "");
    let real = "fn f() -> i32 {\n    let x = 1;\n    x\n}\n";
    let document = "fn f() -> i32 {\n    \n    x\n}\n";
    let at = document.find("\n    \n").unwrap() + 5;
    // Judged by the toolchains' own parsers (rustc's through rustfmt, TypeScript's), not by Spark's grammars.
    assert!(!check::breaks_parse(Lang::Rust, document, at, "let x = 1;", real).unwrap());
    assert!(check::breaks_parse(Lang::Rust, document, at, "let x = (1;", real).unwrap());
    corpus::ensure_tools().expect("the eval's TypeScript");
    let real = "function f(): number {\n  const x = 1;\n  return x;\n}\n";
    let document = "function f(): number {\n  \n  return x;\n}\n";
    let at = document.find("\n  \n").unwrap() + 3;
    assert!(!check::breaks_parse(Lang::Ts, document, at, "const x = 1;", real).unwrap());
    assert!(check::breaks_parse(Lang::Ts, document, at, "const x = (1;", real).unwrap());
    assert_eq!(check::toolchain_syntax_errors(Lang::Ts, real).unwrap(), 0);
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
fn fixes_are_judged_by_behaviour_not_by_compiling() {
    use check::FixVerdict;
    let _serial = serial();
    // (package, file, a statement whose deletion still compiles but changes what the code does, an edit of
    // types only: the same program).
    let cases = [
        ("strsim", "src/lib.rs", "matches += 1;", None),
        (
            "redux",
            "src/compose.ts",
            "return <T>(arg: T) => arg",
            Some(("...funcs: Function[]) {", "...funcs: any[]) {")),
        ),
    ];
    for (name, file, statement, types_only) in cases {
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
        assert_eq!(check::judge_fix(&scratch, file, &original, &diag).unwrap(), FixVerdict::ExactRestore, "{name}");
        let verdict = |text: &str| check::judge_fix(&scratch, file, text, &diag).unwrap();
        let wrong = broken.replacen(&original[function.clone()][..4], "", 0);
        assert!(matches!(verdict(&wrong), FixVerdict::Wrong(_)), "{name}: no fix");
        let still_wrong = format!("{broken}\n");
        assert!(matches!(verdict(&still_wrong), FixVerdict::Wrong(_)), "{name}: a wrong fix");
        // Compiles, the diagnostic is gone, and it is not the fix: a statement deleted.
        assert!(original.contains(statement), "{name}: {statement}");
        let deleted = original.replacen(statement, "", 1);
        assert!(scratch.check(&[(file, &deleted)]).unwrap().is_empty(), "{name}: the deletion compiles");
        let judged = verdict(&deleted);
        assert!(!judged.is_right(), "{name}: a deleted statement is not a fix: {judged:?}");
        if let Some((from, to)) = types_only {
            assert!(original.contains(from), "{name}: {from}");
            let judged = verdict(&original.replacen(from, to, 1));
            assert!(matches!(judged, FixVerdict::SameBehaviour(_)), "{name}: types only: {judged:?}");
        }
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
        let module = format!(
            "{text}\n#[cfg(test)]\nmod eval_self_test {{\n    use super::*;\n\n    #[test]\n    fn osa_self_test() {{\n        {body}\n    }}\n}}\n"
        );
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
    let test_against = |body: &str, mutants: &[String]| {
        let text = format!(
            "import {{ test }} from \"node:test\";\nimport assert from \"node:assert/strict\";\nimport compose from \"./compose\";\n\ntest(\"compose\", () => {{\n  {body}\n}});\n"
        );
        check::tests_are_correct(
            &scratch,
            "src/compose.ts",
            &module,
            mutants,
            &[],
            Some(("src/compose.test.ts", &text)),
        )
        .unwrap()
    };
    let test = |body: &str| test_against(body, &mutants);
    let good = "assert.equal(compose((x: number) => x + 1, (x: number) => x * 2)(3), 7);\n  assert.equal(compose()(5), 5);\n  const f = (x: number) => x;\n  assert.equal(compose(f), f);";
    assert_eq!(test(good), Ok(()));
    assert!(test("assert.ok(typeof compose === \"function\");").is_err(), "asserts nothing the mutants change");
    // A mutant that no longer type-checks still runs (tsc emits its JavaScript): what that does decides.
    let ill_typed = module.replacen("funcs.length === 0", "funcs.length === \"0\"", 1);
    assert_ne!(ill_typed, module);
    assert_eq!(test_against("assert.equal(compose()(5), 5);", std::slice::from_ref(&ill_typed)), Ok(()));
    assert!(
        test_against("assert.equal(compose((x: number) => x)(5), 5);", &[ill_typed]).is_err(),
        "the mutant behaves the same"
    );
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
        offered_edit: None,
        source: if offered { "fast tier".into() } else { String::new() },
        title: String::new(),
        fix_verdict: None,
        split: Split::Test,
    };
    let keystroke = |shown: &str, correct: bool, after_tab: bool| Keystroke {
        lang: Lang::Ts,
        case: "g".into(),
        ms: 50,
        shown: shown.into(),
        correct,
        breaks_parse: !correct && !shown.is_empty(),
        crash_or_timeout: false,
        error: false,
        after_tab,
        split: Split::Test,
    };
    let run = Run {
        label: "self-test".into(),
        model: "none".into(),
        results: vec![case("a", true, true, false), case("b", true, false, false), case("c", false, false, true)],
        // Typed through: the last two keystrokes come after the first right answer (Tab).
        keystrokes: vec![
            keystroke("", false, false),
            keystroke("x(", false, false),
            keystroke("foo();", true, false),
            keystroke("oo();", true, true),
            keystroke("o(1);", false, true),
        ],
        spans: vec![Span { lang: Lang::Ts, split: Split::Test, case: "g".into(), chars: 10, supplied: 6 }],
        next_edits: Vec::new(),
        wall_s: 1.0,
        ..Default::default()
    };
    let mut run = run;
    // A case the harness could not finish is in no denominator; a server error is its own column.
    run.results.push(CaseResult { harness_error: true, ..case("h", false, false, false) });
    run.keystrokes.push(Keystroke { error: true, ..keystroke("", false, true) });
    // The dev split's rows stand beside the test split's.
    run.results.push(CaseResult { split: Split::Dev, ..case("d", true, true, false) });
    let rows = report::task_rows(&run);
    assert_eq!((rows[0].split, rows[0].cases, rows[0].correct), (Split::Dev, 1, 1));
    assert_eq!((rows[1].offered, rows[1].correct, rows[1].offered_but_wrong, rows[1].crash_or_timeout), (2, 1, 1, 1));
    assert_eq!((rows[1].cases, rows[1].harness_errors), (3, 1));
    let ghost = report::ghost_rows(&run);
    assert_eq!(
        (ghost[0].keystrokes, ghost[0].shown, ghost[0].correct_first_line, ghost[0].shown_wrong, ghost[0].breaks_parse),
        (6, 4, 2, 2, 2)
    );
    assert_eq!(ghost[0].errors, 1);
    let pause = |shown: &str, correct: bool, ms: Option<u64>| run::Pause {
        lang: Lang::Ts,
        split: Split::Test,
        case: "g".into(),
        burst: 3,
        shown: shown.into(),
        correct,
        ms,
    };
    run.pauses = vec![pause("foo();", true, Some(300)), pause("", false, None), pause("bar", false, Some(900))];
    let ghost = report::ghost_rows(&run);
    assert_eq!((ghost[0].pauses, ghost[0].pauses_shown, ghost[0].pauses_right), (3, 2, 1));
    assert_eq!((ghost[0].pause_p50_ms, ghost[0].pause_p95_ms), (900, 900));
    assert_eq!((ghost[0].until_tab, ghost[0].spans_right), ((3, 1, 1), 1));
    let markdown = report::markdown(&run);
    assert!(markdown.contains("offered but wrong") && markdown.contains("| fix | rust | test | 3 |"), "{markdown}");
    // The tables are made again from report.json alone (`spark-eval --tables`), the same.
    let again = report::from_json(&serde_json::json!([report::to_json(&run)])).unwrap();
    assert_eq!(report::markdown(&again[0]), markdown);
    let summary = report::summary(&again[0]);
    assert!(summary.contains("| fix | rust | test | 3 | 1 (33%) | **1** |"), "{summary}");
    let png = std::env::temp_dir().join(format!("spark-eval-self-test-{}.png", std::process::id()));
    report::plot(&[run], &png).unwrap();
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    let _ = std::fs::copy(&png, spark_tests::workspace_root().join("target/eval-self-test.png"));
}

/// The histories, fetched once at a time (two tests need them; two `cargo vendor`s into one place would clash).
fn histories() -> Vec<History> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _fetching = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    history::prepare().expect("fetching the histories (cargo vendor, npm pack)")
}

fn hand_made_history() -> History {
    History {
        lang: Lang::Rust,
        name: "hand".into(),
        old: "1.0.0".into(),
        new: "1.0.1".into(),
        why: String::new(),
        split: Split::Dev,
    }
}

/// A rename made at its declaration (the user's edit) with three uses to follow and an argument added at a call;
/// the scoring of right, blank-different, partial, wrong, duplicate and out-of-range predictions.
#[test]
fn next_edit_cases_and_scoring_on_a_hand_made_history() {
    let before = "fn area(w: u32, h: u32) -> u32 {\n    let count = w * h;\n    // twice\n    log(count, count);\n    // then\n    count\n}\n\nfn log(x: u32, y: u32) {}\n\nfn main() {\n    area(1, 2);\n}\n";
    let after = before.replace("count", "total").replace("area(1, 2)", "area(1, 2, 3)");
    let case = history::case_for_file(&hand_made_history(), "src/lib.rs", before, &after).expect("four hunks");
    // The user's edit: `count` → `total` on the `let` line, as one range.
    let at = before.find("count").unwrap();
    assert_eq!(case.user_edit, Edit { start: at, end: at + 5, new_text: "total".into() });
    let document = case.document();
    assert_eq!(case.cursor(), at + 5);
    assert!(document.contains("let total = w * h;\n    // twice\n    log(count, count);"));
    // Three follow-up hunks: the call to `log` (two atomic edits), the last use, the added argument.
    let edit = |start: usize, end: usize, text: &str| Edit { start, end, new_text: text.into() };
    let log_at = document.find("log(count").unwrap() + 4;
    let last_at = document.rfind("    count\n").unwrap() + 4;
    let call_at = document.find("area(1, 2)").unwrap() + "area(1, 2".len();
    assert_eq!(
        case.follow_ups,
        vec![
            vec![edit(log_at, log_at + 5, "total"), edit(log_at + 7, log_at + 12, "total")],
            vec![edit(last_at, last_at + 5, "total")],
            vec![edit(call_at, call_at, ", 3")],
        ]
    );
    assert_eq!(case.follow_up_lines, [3, 5, 11]);
    assert_eq!(history::apply_all(&document, case.follow_ups.iter().flatten()), after);

    let check = |predicted: Vec<Edit>, verdicts: &[Verdict], hunks_predicted: usize| {
        let score = history::score(&document, &case.follow_ups, &predicted);
        assert_eq!(score.verdicts, verdicts, "{predicted:?}");
        assert_eq!(score.hunks_predicted, hunks_predicted, "{predicted:?}");
    };
    use Verdict::{Exact, Normalised, Wrong};
    check(vec![], &[], 0);
    // The last use, exactly: one hunk.
    check(vec![edit(last_at, last_at + 5, "total")], &[Exact], 1);
    // The same change over a wider range, or with other blanks: right once blanks are ignored.
    check(vec![edit(last_at - 4, last_at + 5, "    total")], &[Normalised], 1);
    check(vec![edit(call_at, call_at, ",3")], &[Normalised], 1);
    // One use of two in the call: right, but its hunk is not predicted; both (in any order): it is.
    check(vec![edit(log_at + 7, log_at + 12, "total")], &[Exact], 0);
    check(
        vec![
            edit(log_at + 7, log_at + 12, "total"),
            edit(last_at, last_at + 5, "total"),
            edit(log_at, log_at + 5, "total"),
        ],
        &[Exact, Exact, Exact],
        2,
    );
    // Both uses in one edit do what the hunk's two atomic edits do together: right, and the hunk is predicted;
    // a wider one that changes more is wrong and does not count as joining them.
    check(vec![edit(log_at, log_at + 12, "total, total")], &[Normalised], 1);
    check(vec![edit(log_at, log_at + 12, "total, totals")], &[Wrong], 0);
    let joined = |prediction: Edit| history::score(&document, &case.follow_ups, &[prediction]).joins_atomic_edits;
    assert_eq!(joined(edit(log_at, log_at + 12, "total, totals")), [false]);
    // Wrong: another name, an argument without its comma or glued to its neighbour, inside the user's own edit,
    // outside every hunk, the same atomic edit twice, a range outside the document.
    check(vec![edit(last_at, last_at + 5, "totals")], &[Wrong], 0);
    check(vec![edit(call_at, call_at, " 3")], &[Wrong], 0);
    check(vec![edit(call_at, call_at, "3")], &[Wrong], 0);
    check(vec![edit(at, at + 5, "sum")], &[Wrong], 0);
    let signature_at = document.find("y: u32)").unwrap() + "y: u32".len();
    check(vec![edit(signature_at, signature_at, ", z: u32")], &[Wrong], 0);
    check(vec![edit(last_at, last_at + 5, "total"), edit(last_at, last_at + 5, "total")], &[Exact, Wrong], 1);
    check(vec![edit(document.len(), document.len() + 3, "x")], &[Wrong], 0);
    // Wrong predictions at a follow-up's place are told from the others (for reading the report).
    let score = history::score(&document, &case.follow_ups, &[edit(log_at, log_at + 12, "x"), edit(at, at + 5, "y")]);
    assert_eq!(score.at_follow_up, [true, false]);

    // Part of an atomic edit, the same way: right (not wrong), but the hunk is not done; another name is wrong.
    let partly = "fn f() {\n    let count = 1;\n    // then\n    g(count);\n}\n";
    let after = partly.replace("let count", "let total").replace("g(count)", "g(total, 1)");
    let case = history::case_for_file(&hand_made_history(), "src/lib.rs", partly, &after).expect("two hunks");
    let document = case.document();
    let use_at = document.find("g(count)").unwrap() + 2;
    assert_eq!(case.follow_ups, vec![vec![edit(use_at, use_at + 5, "total, 1")]]);
    let score = history::score(&document, &case.follow_ups, &[edit(use_at, use_at + 5, "total")]);
    assert_eq!((score.verdicts, score.hunks_predicted), (vec![Verdict::Partial], 0));
    let score = history::score(&document, &case.follow_ups, &[edit(use_at, use_at + 5, "sum")]);
    assert_eq!(score.verdicts, [Wrong]);
    // Only whole tokens: `t` (a token cut short) is not part of `total, 1`; and each atomic edit is credited once.
    let score = history::score(&document, &case.follow_ups, &[edit(use_at, use_at + 5, "t")]);
    assert_eq!(score.verdicts, [Wrong]);
    let twice = [edit(use_at, use_at + 5, "total"), edit(use_at, use_at + 5, "total,")];
    assert_eq!(history::score(&document, &case.follow_ups, &twice).verdicts, [Verdict::Partial, Wrong]);

    // A change of blanks only is matched exactly or not at all (else a no-op near it would count as right).
    let blanks = "fn f() {\n    a(1,2);\n    c();\n    b(1,2);\n}\n";
    let case = history::case_for_file(&hand_made_history(), "src/lib.rs", blanks, &blanks.replace("1,2", "1, 2"))
        .expect("two hunks");
    let document = case.document();
    let b_at = document.find("b(1,").unwrap() + 4;
    assert_eq!(case.follow_ups, vec![vec![edit(b_at, b_at, " ")]]);
    let score = history::score(&document, &case.follow_ups, &[edit(b_at, b_at, "  "), edit(b_at, b_at, " ")]);
    assert_eq!((score.verdicts, score.hunks_predicted), (vec![Wrong, Exact], 1));

    // Cases need 2..=12 hunks of at most 4 lines: one hunk, or a big one, is no case.
    assert!(history::case_for_file(&hand_made_history(), "a.rs", "a\nb\nc\n", "a\nB\nc\n").is_none());
    let big_before = "a\nb\nc\nd\ne\nf\ng\n";
    assert!(history::case_for_file(&hand_made_history(), "a.rs", big_before, "A\nb\nC\nD\nE\nF\nG\n").is_none());
    // Words, blanks and single other characters.
    assert_eq!(
        history::tokens("let x_1 =  f(é);\n"),
        ["let", " ", "x_1", " ", "=", "  ", "f", "(", "é", ")", ";", "\n"]
    );
}

/// The report's next-edit row adds up its cases.
#[test]
fn the_next_edit_row_counts_hunks_predictions_and_wrong_ones() {
    let result = |id: &str, follow_ups: usize, hunks: usize, exact: usize, normalised: usize, wrong: usize, ms: u64| {
        run::NextEditResult {
            lang: Some(Lang::Ts),
            case: id.into(),
            follow_ups,
            hunks_predicted: hunks,
            predictions: exact + normalised + wrong,
            partial: 0,
            exact,
            normalised,
            wrong,
            ms,
            ms_from_change: ms + 1,
            ..Default::default()
        }
    };
    let mut timed_out = result("c", 2, 0, 0, 0, 0, 30_000);
    timed_out.crash_or_timeout = true;
    let run = run::Run {
        label: "self-test".into(),
        next_edits: vec![result("a", 3, 2, 2, 1, 0, 10), result("b", 1, 0, 0, 0, 2, 30), timed_out],
        ..Default::default()
    };
    let rows = report::next_edit_rows(&run);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row.cases, row.follow_up_hunks, row.hunks_predicted, row.predictions, row.correct, row.wrong),
        (3, 6, 2, 5, 3, 2)
    );
    assert_eq!((row.correct_normalised, row.crash_or_timeout, row.p50_ms, row.p95_ms), (1, 1, 30, 30));
    let markdown = report::markdown(&run);
    assert!(markdown.contains("| ts | dev | 3 | 6 | 2 (33%) | 5 | 3 (1, 0) | **2 (40%)** | 0 (0) |"), "{markdown}");
}

/// The histories are pinned pairs of releases, fetched, and make cases deterministically; a slice of them (one
/// per package) runs through the real `spark-lsp`: every case gets a result, and every answer is scored.
#[test]
fn next_edit_cases_come_from_pinned_releases_and_run_end_to_end() {
    let histories = histories();
    let count = |lang: Lang| histories.iter().filter(|history| history.lang == lang).count();
    assert!(count(Lang::Rust) >= 5 && count(Lang::Ts) >= 5, "{histories:?}");
    for history in &histories {
        assert!(!corpus::FORBIDDEN.contains(&history.name.as_str()), "{}", history.name);
        assert!(history.why.len() > 20, "says why: {history:?}");
        assert_ne!(history.old, history.new);
        for version in [&history.old, &history.new] {
            assert!(version.split('.').all(|part| part.parse::<u32>().is_ok()), "pinned: {history:?}");
            assert!(!history.sources(version).is_empty(), "fetched with sources: {} {version}", history.name);
        }
    }
    let cases = history::cases(&histories).unwrap();
    assert_eq!(cases, history::cases(&histories).unwrap(), "deterministic");
    for history in &histories {
        let of_package = cases.iter().filter(|case| case.package == history.name).count();
        assert!((1..=history::CASES_PER_PACKAGE).contains(&of_package), "{}: {of_package} cases", history.name);
    }
    for case in &cases {
        assert!((1..history::MAX_HUNKS).contains(&case.follow_ups.len()), "{}", case.id);
        assert!(case.follow_ups.iter().all(|hunk| !hunk.is_empty()), "{}", case.id);
        let path = case.path(histories.iter().find(|history| history.name == case.package).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), case.before, "{}", case.id);
    }

    let slice = history::slice(&cases, Some(1));
    assert_eq!(slice.len(), histories.len());
    let stderr = spark_tests::eval::eval_dir().join("logs/spark-lsp-next-edit-self-test.log");
    std::fs::create_dir_all(stderr.parent().unwrap()).unwrap();
    let mut server = drive::Server::start(None, &serde_json::json!({}), stderr).unwrap();
    for case in &slice {
        let history = histories.iter().find(|history| history.name == case.package).unwrap();
        let result = run::next_edit_case(&mut server, history, case).unwrap();
        assert!(!result.crash_or_timeout && result.error.is_none(), "{}: {result:?}", case.id);
        assert_eq!(result.answered_version, Some(2), "{}: answered for the version after the user's edit", case.id);
        assert_eq!(result.predictions, result.edits.len());
        assert_eq!(result.predictions, result.exact + result.normalised + result.partial + result.wrong, "{}", case.id);
        assert!(result.hunks_predicted <= result.follow_ups, "{}", case.id);
        // The verdicts are the scoring's own, on the same edits.
        let edits: Vec<Edit> = result.edits.iter().map(|predicted| predicted.edit.clone()).collect();
        let rescored = history::score(&case.document(), &case.follow_ups, &edits);
        let verdicts: Vec<Verdict> = result.edits.iter().map(|predicted| predicted.verdict).collect();
        assert_eq!((rescored.verdicts, rescored.hunks_predicted), (verdicts, result.hunks_predicted));
    }
    server.shutdown();
}

/// Spark's sources neither use the history packages nor hold the text of a follow-up (no answer is built in).
#[test]
fn no_history_text_occurs_in_the_server_or_engine() {
    let spark = spark_sources();
    let histories = histories();
    for history in &histories {
        let crate_name = history.name.replace('-', "_");
        for needle in [
            format!("{crate_name}::"),
            format!("\n{} = ", history.name),
            format!("from \"{}\"", history.name),
            format!("from '{}'", history.name),
        ] {
            assert!(!contains_word(&spark, &needle), "{needle:?} of the histories occurs in server/, ide/ or engine/");
        }
    }
    let mut sampled = 0;
    for case in history::cases(&histories).unwrap() {
        for atomic in case.follow_ups.iter().flatten() {
            let text = atomic.new_text.trim();
            let boilerplate = ["//", "*", "#["].iter().any(|prefix| text.starts_with(prefix));
            if text.len() >= 24 && !boilerplate {
                sampled += 1;
                assert!(!spark.contains(text), "a follow-up of {} occurs in server/, ide/ or engine/: {text}", case.id);
            }
        }
    }
    assert!(sampled > 20, "sampled {sampled} follow-ups");
}
