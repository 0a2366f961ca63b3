//! Tests of `edit.rs` and `generated_tests.rs`.

use super::*;
use crate::verify::generated_tests::*;

fn callee(lang: Lang, file_text: &str, test_code: &str) -> Option<String> {
    unknown_callee(lang, file_text, test_code, &crate::parse::text(lang, test_code)?)
}

fn macro_errors(test_code: &str) -> usize {
    assertion_syntax_errors(test_code, &crate::parse::text(Lang::Rust, test_code).unwrap())
}

#[test]
fn expected_values_of_the_wrong_kind_are_refused() {
    let ts =
        "export function isEvenCount(value: unknown): value is number {\n  return typeof value === 'number' && value % 2 === 0;\n}";
    let check = |code: &str| check_expected_values(Lang::TypeScript, ts, code, "isEvenCount");
    assert_eq!(
        check("  assert.equal(isEvenCount(1), 2);"),
        Err(Rejection::WrongExpectedKind { returns: "a boolean", expected: "2".to_owned() })
    );
    assert_eq!(check("  assert.equal(isEvenCount(1), true);"), Ok(()));
    assert_eq!(check("  expect(isEvenCount(Infinity)).toBe(false);"), Ok(()));
    assert!(check("  expect(isEvenCount(f(1, 2))).toBe('no');").is_err());
    let rust = "pub fn total(xs: &[u32]) -> u32 {\n    xs.iter().sum()\n}";
    let check = |code: &str| check_expected_values(Lang::Rust, rust, code, "total");
    assert_eq!(check("        assert_eq!(total(&[1, 2]), 3);"), Ok(()));
    assert!(check("        assert_eq!(total(&[1, 2]), \"3\");").is_err());
    // Unknown return types, or expected values that are not literals, are left to the other checks.
    let option = "pub fn first(xs: &[u32]) -> Option<u32> {\n    xs.first().copied()\n}";
    assert_eq!(check_expected_values(Lang::Rust, option, "assert_eq!(first(&[1]), 1);", "first"), Ok(()));
    assert_eq!(check("        assert_eq!(total(&[1, 2]), three);"), Ok(()));
    // A Rust function without `->` returns `()`: no literal is what a call of it equals.
    let unit = "pub fn push_padded(out: &mut String, value: u32) {\n    out.push('0');\n}";
    assert_eq!(
        check_expected_values(
            Lang::Rust,
            unit,
            "assert_eq!(push_padded(&mut String::new(), 10), \"10\");",
            "push_padded"
        ),
        Err(Rejection::WrongExpectedKind { returns: "nothing", expected: "\"10\"".to_owned() })
    );
}

#[test]
fn tests_that_call_what_the_file_does_not_have_are_refused() {
    let file = "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\nimport pipeline from \"./pipeline\";\n";
    let calls = |code: &str| callee(Lang::TypeScript, &format!("{file}{code}"), code);
    assert_eq!(calls("test(\"c\", () => {\n  assert.equal(add(2, 3), 5);\n});"), Some("add".to_owned()));
    assert_eq!(calls("test(\"c\", () => {\n  assert.equal(pipeline()(1), 1);\n});"), None);
    assert_eq!(
        calls(
            "test(\"c\", () => {\n  const twice = (x: number) => 2 * x;\n  assert.equal(pipeline(twice)(1), 2);\n});"
        ),
        None
    );
    assert_eq!(calls("test(\"c\", () => {\n  const f = (g: any) => g(1);\n  expect(Number(f(pipeline)));\n});"), None);
    let unknown_enum = "test(\"c\", () => {\n  assert.equal(pipeline(RetryPolicy.OPEN), false);\n});";
    assert_eq!(calls(unknown_enum), Some("RetryPolicy".to_owned()));
    let framework = "test(\"c\", () => {\n  assert.equal(pipeline(test.retryPolicy), false);\n});";
    assert_eq!(calls(framework), Some("test.retryPolicy".to_owned()));
    assert_eq!(calls("test.skip(\"c\", () => {\n  assert.equal(pipeline(), 1);\n});"), None);
    let locals = "test(\"c\", () => {\n  const xs = [1, 2];\n  for (const x of xs) assert.equal(pipeline(x, Math.PI), { x });\n});";
    assert_eq!(calls(locals), None);
    let rust_file = "use std::collections::HashMap;\npub fn total(xs: &[u32]) -> u32 { xs.iter().sum() }\nfn helper() -> u32 { 1 }\n";
    let rust = |code: &str| callee(Lang::Rust, &format!("{rust_file}{code}"), code);
    assert_eq!(
        rust("#[test]\nfn t() {\n    assert_eq!(total(&[1, 2]), 3);\n    assert_eq!(helper(), Some(1).unwrap());\n}\n"),
        None
    );
    assert_eq!(rust("#[test]\nfn t() {\n    assert_eq!(add(1, 2), 3);\n}\n"), Some("add".to_owned()));
    assert_eq!(rust("#[test]\nfn t() {\n    assert_eq!(total(&[a, 2]), 3);\n}\n"), Some("a".to_owned()));
    let bound = "#[test]\nfn t() {\n    let a = 1;\n    for b in [2] {\n        assert_eq!(total(&[a, b]), 3, \"{}\", a.max(b));\n    }\n}\n";
    assert_eq!(rust(bound), None);
    // A `let a` in another function of the file does not put `a` in the test's scope.
    let other = "pub fn total(xs: &[u32]) -> u32 {\n    let a = 1;\n    a\n}\n";
    let test = "#[test]\nfn t() {\n    assert_eq!(total(&[a]), 1);\n}\n";
    assert_eq!(callee(Lang::Rust, &format!("{other}{test}"), test), Some("a".to_owned()));
    let test = "#[test]\nfn t() {\n    assert_eq!(total(&[a, b]), 1);\n}\n";
    assert_eq!(callee(Lang::Rust, &format!("{other}{test}"), test), Some("a".to_owned()));
    let closure = "#[test]\nfn t() {\n    let f = |a, b: u32| total(&[a, b]);\n    assert_eq!(f(1, 2), 3);\n}\n";
    assert_eq!(callee(Lang::Rust, &format!("{other}{closure}"), closure), None);
    assert_eq!(macro_errors("fn t() {\n    assert_eq!(total(&[1, 2]), 3);\n}\n"), 0);
    assert!(macro_errors("fn t() {\n    assert_eq!(total(x: &[1, 2]), 3);\n}\n") > 0);
    assert_eq!(
        rust("#[test]\nfn t() {\n    let m: HashMap<u32, u32> = HashMap::new();\n    assert!(m.is_empty());\n}\n"),
        None
    );
}

#[test]
fn a_fix_of_a_compiler_error_must_change_the_diagnosed_code() {
    let source = "fn f(m: &mut M, bigram: u32) {\n    *m.entry(bigarm).or_insert(0) += 1;\n    m.push(1);\n}\n";
    let tree = crate::parse::text(Lang::Rust, source).unwrap();
    let at = |needle: &str| source.find(needle).unwrap()..source.find(needle).unwrap() + needle.len();
    let check =
        |diagnosed: &str, edit: &str| check_changes_diagnosed_node(&tree, source, at(diagnosed), None, (at(edit), "x"));
    // `bigarm` is an argument: changing it (or the argument list) fixes it, changing `or_insert(0)` does not.
    assert_eq!(check("bigarm", "bigarm"), Ok(()));
    assert_eq!(check("bigarm", "0)"), Err(Rejection::MissesDiagnosedCode));
    // A callee's name (rustc reports a missing argument there): the call's arguments may change.
    assert_eq!(check("push", "1);"), Ok(()));
    assert_eq!(check("push", "or_insert"), Err(Rejection::MissesDiagnosedCode));
    assert_eq!(diagnosed_region(&tree, at("push")), at("m.push(1)"));
    // The message names the diagnosed text: the edit must touch the name itself.
    let unknown = |edit: Range<usize>, insert: &str| {
        let message = Some("cannot find function `push` in this scope");
        check_changes_diagnosed_node(&tree, source, at("push"), message, (edit, insert))
    };
    assert_eq!(unknown(at("1);"), "2"), Err(Rejection::MissesDiagnosedCode));
    assert_eq!(unknown(at("push"), "pop"), Ok(()));
    // A path put before it (`Vec::push`, an import's crate) changes it; so does a name that goes on after it
    // (`push` → `push_str` narrows to an insertion at its end); a `;` or a `?` after it does not.
    let start = at("push").start;
    assert_eq!(unknown(start..start, "Vec::"), Ok(()));
    let end = at("push").end;
    assert_eq!(unknown(end..end, "_str"), Ok(()));
    assert_eq!(unknown(end..end, ";"), Err(Rejection::MissesDiagnosedCode));
    // Given as a position only, the token there is what the message names.
    let message = Some("cannot find function `push` in this scope");
    let point = at("push").start + 1..at("push").start + 1;
    let misses = check_changes_diagnosed_node(&tree, source, point, message, (at("1);"), "2"));
    assert_eq!(misses, Err(Rejection::MissesDiagnosedCode));
    // Or as its first character (a checker that reports where the error starts).
    let first = at("push").start..at("push").start + 1;
    let misses = check_changes_diagnosed_node(&tree, source, first, message, (at("1);"), "2"));
    assert_eq!(misses, Err(Rejection::MissesDiagnosedCode));
}

fn rewrite(fixture: &str, candidate: &str) -> Result<String, Rejection> {
    let start = fixture.find("<<").unwrap();
    let end = fixture.find(">>").unwrap() - 2;
    let source = fixture.replace("<<", "").replace(">>", "");
    check_rewrite(Lang::Rust, &source, start..end, candidate, false)
}

#[test]
fn a_syntax_fix_must_leave_fewer_errors_and_unmatched_brackets() {
    // An `if` lost its `}`. Closing it fixes the file; dropping the `else` parses inside the rewritten lines,
    // and the error count drops, but the file's braces still do not match.
    let source = "export function outer() {\n  function choose(x: number) {\n    if (x > 0) {\n      return 1\n     else return 2\n  }\n  helper()\n}\n";
    let old_tree = crate::parse::text(Lang::TypeScript, source).unwrap();
    let node = source.find("if (x").unwrap()..source.find("\n  }\n  helper").unwrap();
    let apply = |candidate: &str| format!("{}{}{}", &source[..node.start], candidate, &source[node.end..]);
    let closed = apply("if (x > 0) {\n      return 1\n    } else return 2");
    assert_eq!(check_clears_syntax_error(Lang::TypeScript, &old_tree, &closed), Ok(()));
    let dropped_else = apply("if (x > 0) {\n      return 1\n");
    assert!(matches!(
        check_clears_syntax_error(Lang::TypeScript, &old_tree, &dropped_else),
        Err(Rejection::BracketsStillUnmatched { .. } | Rejection::SyntaxErrors { .. })
    ));
    // The Gemma shape: the `else` line deleted, so the function's `}` now closes the `if`.
    let moved = source.replace("      return 1\n     else return 2\n", "      return 1\n");
    assert!(matches!(
        check_clears_syntax_error(Lang::TypeScript, &old_tree, &moved),
        Err(Rejection::BracketsStillUnmatched { before: 1, after: 1 })
    ));
    // A file whose brackets matched must still match.
    let fine = "fn f() {\n    let x = 1 +;\n}\n";
    let fine_tree = crate::parse::text(Lang::Rust, fine).unwrap();
    assert_eq!(check_clears_syntax_error(Lang::Rust, &fine_tree, "fn f() {\n    let x = 1 + 2;\n}\n"), Ok(()));
    assert!(check_clears_syntax_error(Lang::Rust, &fine_tree, "fn f() {\n    let x = (1 + 2;\n}\n").is_err());
}

#[test]
fn rewrite_table() {
    let broken = "fn f() {\n    <<let x = 1 +;>>\n    let y = 2;\n}\n";
    assert!(rewrite(broken, "let x = 1 + 2;").is_ok());
    assert_eq!(rewrite(broken, "let x = 1 +;"), Err(Rejection::Unchanged));
    assert_eq!(rewrite(broken, "   "), Err(Rejection::Empty));
    assert!(matches!(rewrite(broken, "let x = (1 + 2;"), Err(Rejection::EscapesNode | Rejection::SyntaxErrors { .. })));
    let got = rewrite(broken, "let x = 1 + 2 3;");
    assert!(matches!(got, Err(Rejection::SyntaxErrors { .. })), "{got:?}");
    assert_eq!(rewrite(broken, "let x = 1 + 2;\n    let y = 2;"), Err(Rejection::EscapesNode));
    let long = "fn f() {\n    <<let total_amount = compute_total(items, discount) +;>>\n}\n";
    assert_eq!(rewrite(long, "let t = 1;"), Err(Rejection::DeletesTooMuch));
    // Renaming a binding the next line reads breaks the code (a 270M model's "fix" seen in the eval).
    let used = "fn f(width: u32) -> u32 {\n    <<let scaled = width * * width>>\n    scaled\n}\n";
    assert_eq!(rewrite(used, "let scale = width * * width;"), Err(Rejection::DropsName("scaled".into())));
    assert!(rewrite(used, "let scaled = width * width;").is_ok());
    let statement = "fn f() {\n    <<let sum: u32 = prices.iter().sum()>>\n    sum\n}\n";
    assert!(rewrite(statement, "let sum: u32 = prices.iter().sum();").is_ok());
    assert!(matches!(
        rewrite(statement, "if ready { sum = prices.iter().max() }"),
        Err(Rejection::TooDifferent { .. })
    ));
    // A deletion is allowed only when asked for.
    let source = "fn f() {\n    let x = 1 +;\n}\n";
    let start = source.find("let").unwrap();
    let end = source.find(";\n}").unwrap() + 1;
    assert!(check_rewrite(Lang::Rust, source, start..end, "", true).is_ok());
}

#[test]
fn tests_table() {
    let old = "fn add(a: i32, b: i32) -> i32 { a + b }\n";
    let good = "#[test]\nfn add_works() {\n    assert_eq!(add(1, 2), 3);\n}\n";
    assert_eq!(check_tests(Lang::Rust, old, &format!("{old}{good}"), good, "add", Some((2, 2))), Ok(()));
    let arity = "#[test]\nfn add_works() {\n    assert_eq!(add(1), 3);\n}\n";
    assert_eq!(
        check_tests(Lang::Rust, old, &format!("{old}{arity}"), arity, "add", Some((2, 2))),
        Err(Rejection::WrongArity { expected: (2, 2), found: 1 })
    );
    let no_assert = "#[test]\nfn add_works() {\n    add(1, 2);\n}\n";
    assert_eq!(
        check_tests(Lang::Rust, old, &format!("{old}{no_assert}"), no_assert, "add", None),
        Err(Rejection::NoAssertion)
    );
    let broken = "#[test]\nfn add_works() {\n    assert_eq!(add(1, 2), 3;\n}\n";
    assert!(matches!(
        check_tests(Lang::Rust, old, &format!("{old}{broken}"), broken, "add", None),
        Err(Rejection::SyntaxErrors { .. })
    ));
}

#[test]
fn call_arity_table() {
    assert_eq!(call_arities("f(1, g(2, 3)) + f() + x.f(9) + f(\"a,b\", [1, 2])", "f"), vec![2, 0, 2]);
    assert_eq!(call_arities("sum([1, 2, 3])", "sum"), vec![1]);
}

#[test]
fn stale_versions_are_refused() {
    assert_eq!(check_version(3, 3), Ok(()));
    assert_eq!(check_version(3, 4), Err(Rejection::Stale { computed_for: 3, current: 4 }));
}
