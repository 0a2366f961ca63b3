//! Tests of `core.rs`.

use super::*;

#[test]
fn patterns_are_read_back_from_the_statement() {
    for (lang, pattern) in [
        (Lang::Rust, r"^\d{4}-\d{2}$"),
        (Lang::Rust, r#"^"[a-z]+"$"#),
        (Lang::TypeScript, r"^a/b\/c$"),
        (Lang::TypeScript, r"^[0-9]+$"),
    ] {
        let statement = tasks::regex_statement(lang, pattern, false);
        let read = pattern_of(lang, &statement).unwrap();
        assert_eq!(tasks::regex_statement(lang, &read, false), statement, "{pattern}");
    }
}

#[test]
fn the_example_table_says_which_example_failed() {
    let rows = example_table(RegexFlavor::Rust, r"^[0-9]+$", &["12".into(), "x".into()], &["3".into(), "y".into()]);
    let verdicts: Vec<(bool, bool)> = rows.iter().map(|row| (row.matches, row.ok)).collect();
    assert_eq!(verdicts, [(true, true), (false, false), (true, false), (false, true)]);
}

#[test]
fn check_rows_catch_a_syntax_error_and_pass_a_fix() {
    let old = "fn f() -> u32 {\n    let a = 1\n    a\n}\n";
    let start = old.find("let a = 1").unwrap();
    let good = syntax_row(Lang::Rust, old, &old.replacen("= 1\n", "= 1;\n", 1), start..start + 10);
    assert!(good.passed, "{good:?}");
    let clean = old.replacen("= 1\n", "= 1;\n", 1);
    let bad_text = clean.replacen("a\n}", "a +\n}", 1);
    let at = bad_text.find("a +").unwrap();
    let bad = syntax_row(Lang::Rust, &clean, &bad_text, at..at + 3);
    assert!(!bad.passed, "{bad:?}");
}
