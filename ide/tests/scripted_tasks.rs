//! The tasks against a scripted model: each verifier branch is driven by what the "model" writes, through
//! the real engine and task code, and no refused candidate is ever offered.

use std::time::Duration;

use spark_engine::Engine;
use spark_grammars::Lang;
use spark_ide::route::Generator;
use spark_ide::tasks::{self, Origin, TaskBudget, TaskDocument, TaskInput, TaskKind, TaskOutcome, TaskTarget};
use tokio_util::sync::CancellationToken;

fn document(lang: Lang, text: &str) -> TaskDocument {
    TaskDocument {
        text: text.to_owned(),
        lang,
        tree: lang.parser().parse(text, None).unwrap(),
        path: None,
        version: 1,
        revision: 0,
        open_files: Vec::new(),
    }
}

fn run(kind: TaskKind, lang: Lang, fixture: &str, outputs: &[&str]) -> TaskOutcome {
    let at = fixture.find("$0").expect("a $0 cursor");
    let document = document(lang, &fixture.replace("$0", ""));
    let engine = Engine::start_scripted(outputs.iter().map(|output| (*output).to_owned()).collect());
    let budget = TaskBudget { samples: outputs.len(), time: Duration::from_secs(20), ..TaskBudget::default() };
    let target = TaskTarget { range: at..at, message: None };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime
        .block_on(tasks::run(
            &Generator::local(&engine),
            TaskInput { kind, document: &document, target: &target },
            budget,
            &CancellationToken::new(),
        ))
        .unwrap()
}

const BROKEN: &str = "pub fn f(a: u32) -> u32 {\n    let x = a +$0;\n    x\n}\n";

fn refused(outcome: &TaskOutcome, reason: &str) {
    assert!(!outcome.verified(), "nothing may be offered: {outcome:?}");
    assert!(
        outcome.rejections.iter().any(|rejection| rejection.contains(reason)),
        "{reason:?} not in {:?}",
        outcome.rejections
    );
}

#[test]
fn a_fix_that_does_not_parse_is_refused() {
    refused(&run(TaskKind::Fix, Lang::Rust, BROKEN, &["let x = a + 2 3;"]), "syntax errors");
}

#[test]
fn a_fix_that_runs_past_its_node_is_refused() {
    refused(&run(TaskKind::Fix, Lang::Rust, BROKEN, &["let x = a + 1;\n    x"]), "runs past the node");
}

#[test]
fn a_fix_that_deletes_too_much_is_refused() {
    let fixture = "pub fn f(items: &[u32], discount: u32) -> u32 {\n    let total_amount = compute_total(items, discount) +$0;\n    total_amount\n}\n";
    refused(&run(TaskKind::Fix, Lang::Rust, fixture, &["let t = 1;"]), "deletes more");
}

#[test]
fn a_fix_that_rewrites_too_much_is_refused() {
    refused(&run(TaskKind::Fix, Lang::Rust, BROKEN, &["if ready { start(a) }"]), "rewrites too much");
}

#[test]
fn the_first_good_sample_is_offered_after_bad_ones() {
    let outcome = run(TaskKind::Fix, Lang::Rust, BROKEN, &["let x = a + 2 3;", "let x = a + 1;"]);
    assert!(outcome.verified(), "{outcome:?}");
    assert_eq!(outcome.samples_tried, 2);
    assert!(outcome.changes[0].new_text().contains("let x = a + 1;"));
}

#[test]
fn a_regex_the_examples_settle_is_offered_without_asking_the_model() {
    // The examples alone settle one reading (four digits, a counter-example of two): offered from them, in each
    // language's dialect; the scripted model's wrong answer is never asked for.
    let fixture = "fn f() {\n    // regex: a year, matches 2024, 1999, not 24$0\n}\n";
    let outcome = run(TaskKind::Regex, Lang::Rust, fixture, &["\\d+$"]);
    assert!(outcome.verified(), "{outcome:?}");
    assert_eq!((outcome.origin, outcome.samples_tried), (Origin::Examples, 0), "{outcome:?}");
    assert!(
        outcome.changes[0].insert.contains(r#"regex::Regex::new(r"^[0-9]{4}$")"#),
        "{:?}",
        outcome.changes[0].insert
    );
    let fixture = "export function f(s: string) {\n  // regex: a year, matches 2024, 1999, not 24$0\n  return s;\n}\n";
    let outcome = run(TaskKind::Regex, Lang::TypeScript, fixture, &["\\d+$"]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.changes[0].insert.contains("const re = /^[0-9]{4}$/;"), "{:?}", outcome.changes[0].insert);
}

#[test]
fn a_regex_nothing_settles_is_not_guessed() {
    // Every reading of the examples also takes the counter-example, and one model sample alone is never offered:
    // nothing is, and the reasons say why.
    let fixture = "export function f(s: string) {\n  // regex: after a, matches ab, not cb$0\n  return s;\n}\n";
    let outcome = run(TaskKind::Regex, Lang::TypeScript, fixture, &["(?<=a)b$", ".b$", "ab$"]);
    refused(&outcome, "matches \"cb\"");
}

#[test]
fn tests_without_an_assertion_or_with_the_wrong_arity_are_refused() {
    let fixture = "pub fn add(a: i32, b: i32) -> i32 {\n    a $0+ b\n}\n";
    refused(&run(TaskKind::Tests, Lang::Rust, fixture, &["        add(1, 2);"]), "no assertion");
    refused(&run(TaskKind::Tests, Lang::Rust, fixture, &["        assert_eq!(add(1), 3);"]), "argument");
    let outcome = run(TaskKind::Tests, Lang::Rust, fixture, &["        assert_eq!(add(1, 2), 3);"]);
    assert!(outcome.verified(), "{outcome:?}");
    let new_text = outcome.changes[0].new_text();
    assert!(new_text.contains("#[cfg(test)]\nmod tests {\n    use super::*;"), "{new_text}");
}

#[test]
fn a_fix_that_leaves_the_diagnosed_code_alone_is_refused() {
    // A compiler's diagnostic at `x` in code that parses: the fix must change the arguments around it.
    let fixture = "pub fn f(a: u32, b: u32) -> u32 {\n    let total = sum($0x, a) + 1;\n    total\n}\n";
    let elsewhere = "let total = sum(x, a) + 2;";
    refused(&run(TaskKind::Fix, Lang::Rust, fixture, &[elsewhere]), "leaves the diagnosed code unchanged");
    let outcome = run(TaskKind::Fix, Lang::Rust, fixture, &[elsewhere, "let total = sum(b, a) + 1;"]);
    assert!(outcome.verified(), "{outcome:?}");
    assert_eq!(outcome.changes[0].insert, "b");
}

#[test]
fn typescript_tests_import_the_function_as_it_is_exported() {
    // The scripted model has no chat template: it answers the few-shot prompt, which ends in the test's header.
    let test = "  assert.equal(f(1), 2);";
    let default = "export default function f(a: number): number {\n  return a $0+ 1;\n}\n";
    let outcome = run(TaskKind::Tests, Lang::TypeScript, default, &[test]);
    assert!(outcome.verified(), "{outcome:?}");
    assert!(outcome.changes[0].insert.contains("import f from \"./module\";"), "{}", outcome.changes[0].insert);
    let aliased = "function f(a: number): number {\n  return a $0+ 1;\n}\nexport { f as increment };\n";
    let outcome = run(TaskKind::Tests, Lang::TypeScript, aliased, &[test]);
    assert!(outcome.changes[0].insert.contains("import { increment as f } from"), "{}", outcome.changes[0].insert);
    // Not exported: a test file cannot import it, so nothing is generated (and the model is not asked).
    let private = "function f(a: number): number {\n  return a $0+ 1;\n}\n";
    let outcome = run(TaskKind::Tests, Lang::TypeScript, private, &[test]);
    assert!(!outcome.verified(), "{outcome:?}");
    assert!(outcome.title.contains("`f` is not exported"), "{}", outcome.title);
    assert_eq!(outcome.samples_tried, 0);
}
