//! Stop rules and clean-up of generated text, pure functions over `&str`.
//!
//! `stop_at` runs after every generated token and says where to cut; `finalize` runs once on the result and
//! removes what the user must never see: whitespace-only text, repeated lines, text that repeats what already
//! follows the cursor.

use spark_grammars::brackets::for_each_bracket;

/// Where a suggestion should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// The cursor is mid-line: complete the rest of this line only.
    Line,
    /// The cursor is at the end of a line or on an empty one: complete up to the end of the block.
    Block,
    /// A task prompt (fix, tests, regex): only the request's stop strings, end of generation and the budget
    /// end it; the text is returned as generated.
    Free,
}

/// What the stop rules need to know about the cursor's surroundings.
#[derive(Debug, Clone, Copy)]
pub struct StopContext<'a> {
    pub mode: StopMode,
    /// Leading whitespace of the cursor's line: a generated line indented less than this ends the block.
    pub indent: &'a str,
    /// The document text after the cursor (a window of it is enough).
    pub suffix: &'a str,
    /// Most lines a block suggestion may have.
    pub max_lines: usize,
}

/// Where to cut the text generated so far, if a stop rule fires; `None` means keep generating.
pub fn stop_at(generated: &str, context: &StopContext<'_>) -> Option<usize> {
    match context.mode {
        StopMode::Line => generated.find('\n'),
        StopMode::Block => block_stop(generated, context),
        StopMode::Free => None,
    }
}

fn block_stop(generated: &str, context: &StopContext<'_>) -> Option<usize> {
    let next_suffix_line = context.suffix.lines().map(str::trim).find(|line| !line.is_empty());
    let mut line_start = 0;
    let mut n_lines = 0;
    let mut previous_blank = false;
    // Only complete lines are judged: the last line may still grow.
    while let Some(newline) = generated[line_start..].find('\n') {
        let line_end = line_start + newline;
        let line = &generated[line_start..line_end];
        let is_first = line_start == 0;
        // A line break first ends the cursor's line as it is: the suggestion's first line is the next one.
        if !(is_first && line.trim().is_empty()) {
            n_lines += 1;
        }
        if !is_first {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                if previous_blank {
                    return Some(line_start.saturating_sub(1));
                }
                previous_blank = true;
            } else {
                previous_blank = false;
                if indent_width(line) < indent_width(context.indent) {
                    return Some(line_start.saturating_sub(1));
                }
                if Some(trimmed) == next_suffix_line {
                    return Some(line_start.saturating_sub(1));
                }
            }
        }
        if n_lines >= context.max_lines {
            return Some(line_end);
        }
        line_start = line_end + 1;
    }
    // A partial last line that already dedents below the block can be cut at once.
    let tail = &generated[line_start..];
    if line_start > 0 && !tail.trim().is_empty() && indent_width(tail) < indent_width(context.indent) {
        return Some(line_start - 1);
    }
    None
}

/// Width of a line's leading whitespace, a tab counting as four columns.
fn indent_width(line: &str) -> usize {
    line.chars().take_while(|ch| ch.is_whitespace() && *ch != '\n').map(|ch| if ch == '\t' { 4 } else { 1 }).sum()
}

/// Cleans a finished suggestion; `None` when nothing worth showing is left.
pub fn finalize(generated: &str, context: &StopContext<'_>) -> Option<String> {
    let mut text = match stop_at(generated, context) {
        Some(cut) => generated[..cut].to_owned(),
        None => generated.to_owned(),
    };
    if context.mode == StopMode::Block {
        text = drop_repeated_lines(&text);
        text = drop_lines_repeating_suffix(&text, context.suffix);
        text = balance_lines(&text);
    }
    text = trim_suffix_overlap(&text, context.suffix);
    let trimmed_len = text.trim_end().len();
    text.truncate(trimmed_len);
    if text.trim().is_empty() {
        return None;
    }
    Some(text)
}

/// Removes the end of `text` that the text after the cursor already has on the cursor's line: the model often
/// types the closing `)` or `;` that is already there. When the whole rest of the line appears inside the
/// suggestion, the suggestion is cut where it starts repeating it.
pub fn trim_suffix_overlap(text: &str, suffix: &str) -> String {
    let line_suffix = suffix.split('\n').next().unwrap_or("").trim_end();
    if line_suffix.trim().is_empty() {
        return text.to_owned();
    }
    let first_line_end = text.find('\n').unwrap_or(text.len());
    let (first_line, rest) = text.split_at(first_line_end);
    if let Some(found) = first_line.find(line_suffix.trim_start()) {
        if found > 0 || line_suffix.trim_start().len() > 1 {
            return first_line[..found].to_owned();
        }
    }
    // Longest end of the first line that is a start of the line suffix.
    let suffix_start = line_suffix.trim_start();
    let mut best = 0;
    for (idx, _) in suffix_start.char_indices().skip(1).chain(std::iter::once((suffix_start.len(), ' '))) {
        if first_line.ends_with(&suffix_start[..idx]) {
            best = idx;
        }
    }
    if best > 0 {
        return first_line[..first_line.len() - best].to_owned();
    }
    format!("{first_line}{rest}")
}

/// A multi-line suggestion that leaves a bracket open would break the code after it: keep the longest prefix
/// of whole lines whose brackets balance. A single line may stay open (`if ready {`): the user writes on.
pub fn balance_lines(text: &str) -> String {
    if !text.contains('\n') || unclosed_after(text, 0) == 0 {
        return text.to_owned();
    }
    let mut depth = 0;
    let mut best_end = None;
    let mut offset = 0;
    for line in text.split('\n') {
        depth = unclosed_after(line, depth);
        offset += line.len();
        if depth == 0 && !line.trim().is_empty() {
            best_end = Some(offset);
        }
        offset += 1;
    }
    match best_end {
        Some(end) => text[..end].to_owned(),
        None => text.split('\n').next().unwrap_or("").to_owned(),
    }
}

/// Brackets still open after `text`, starting from `depth` open ones; closing a bracket opened before the
/// suggestion (depth zero) is fine and does not count.
fn unclosed_after(text: &str, depth: i32) -> i32 {
    let mut depth = depth;
    for_each_bracket(text, |delta| depth = (depth + delta).max(0));
    depth
}

/// Cuts at the second of two identical consecutive non-trivial lines: small models loop.
fn drop_repeated_lines(text: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        if let Some(previous) = kept.last() {
            if line.trim().len() > 2 && previous.trim() == line.trim() {
                break;
            }
        }
        kept.push(line);
    }
    kept.join("\n")
}

/// Cuts the suggestion where its lines start repeating the first non-empty line after the cursor.
fn drop_lines_repeating_suffix(text: &str, suffix: &str) -> String {
    let after_cursor_line = suffix.split_once('\n').map(|(_, rest)| rest).unwrap_or("");
    let Some(next_line) = after_cursor_line.lines().map(str::trim).find(|line| !line.is_empty()) else {
        return text.to_owned();
    };
    let mut offset: usize = 0;
    for (line_idx, line) in text.split('\n').enumerate() {
        if line_idx > 0 && line.trim() == next_line {
            return text[..offset.saturating_sub(1)].to_owned();
        }
        offset += line.len() + 1;
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(suffix: &str) -> StopContext<'_> {
        StopContext { mode: StopMode::Line, indent: "", suffix, max_lines: 8 }
    }

    fn block<'a>(indent: &'a str, suffix: &'a str) -> StopContext<'a> {
        StopContext { mode: StopMode::Block, indent, suffix, max_lines: 8 }
    }

    #[test]
    fn finalize_table() {
        // (generated, context, expected)
        let cases: &[(&str, StopContext<'_>, Option<&str>)] = &[
            ("   \n  ", line(""), None),
            ("x + 1;\nmore", line(""), Some("x + 1;")),
            ("foo(a, b);", line(");"), Some("foo(a, b")),
            ("foo(a, b)", line(")"), Some("foo(a, b")),
            ("a, b) + c;", line(") + c;\n"), Some("a, b")),
            ("}", line("}\n"), None),
            ("let y = 2;\n    y + 1\n}\nfn other() {}", block("    ", "\n}\n"), Some("let y = 2;\n    y + 1")),
            ("a();\n    a();\n    a();", block("    ", ""), Some("a();")),
            ("a();\n    b();\n    c();", block("    ", "\n    c();\n}"), Some("a();\n    b();")),
            ("x\n\n\nfn f() {}", block("", ""), Some("x")),
            ("a);\n    if b {\n        c();", block("    ", ""), Some("a);")),
            ("if b {\n        c();", block("    ", ""), Some("if b {")),
            ("if b {\n        c();\n    }\n    d();", block("    ", ""), Some("if b {\n        c();\n    }\n    d();")),
            ("f(\"{\");\n    g();", block("    ", ""), Some("f(\"{\");\n    g();")),
        ];
        for (generated, context, expected) in cases {
            assert_eq!(finalize(generated, context).as_deref(), *expected, "generated {generated:?}");
        }
    }

    #[test]
    fn line_mode_stops_at_newline() {
        assert_eq!(stop_at("abc\ndef", &line("")), Some(3));
        assert_eq!(stop_at("abc", &line("")), None);
    }

    #[test]
    fn block_mode_stops_at_dedent_and_max_lines() {
        let context = block("    ", "");
        assert_eq!(stop_at("a\n    b\n}", &context), Some(7));
        assert_eq!(stop_at("a\n    b\n    ", &context), None);
        let short = StopContext { max_lines: 2, ..context };
        assert_eq!(stop_at("a\n    b\n    c\n", &short), Some(7));
    }

    #[test]
    fn a_one_line_block_is_the_rest_of_the_line_or_else_the_next_line() {
        let one = StopContext { max_lines: 1, ..block("    ", "\n}\n") };
        assert_eq!(stop_at(" + 1;\n    y", &one), Some(5));
        // The cursor's line was complete: the next line is the suggestion, and it ends with its line break.
        assert_eq!(stop_at("\n    foo();\n    bar", &one), Some(11));
        assert_eq!(stop_at("\n    foo(", &one), None);
        assert_eq!(finalize("\n    foo();\n    bar();", &one).as_deref(), Some("\n    foo();"));
        assert_eq!(finalize("\n}\n", &one), None);
    }

    proptest::proptest! {
        /// The cut `stop_at` asks for is a character boundary of what was generated; in line mode nothing past
        /// the first line survives.
        #[test]
        fn stop_at_cuts_on_a_boundary(generated in "[a-z😀é \t{}();\n]{0,60}", suffix in "[a-z }\n]{0,20}", indent in "[ \t]{0,6}", max_lines in 1usize..6) {
            for mode in [StopMode::Line, StopMode::Block, StopMode::Free] {
                let context = StopContext { mode, indent: &indent, suffix: &suffix, max_lines };
                if let Some(cut) = stop_at(&generated, &context) {
                    proptest::prop_assert!(cut <= generated.len() && generated.is_char_boundary(cut));
                }
                if let Some(text) = finalize(&generated, &context) {
                    if mode == StopMode::Line {
                        proptest::prop_assert!(!text.contains('\n'), "{:?}", text);
                    }
                    // A blank first line (a line break that ends the cursor's line) is not one of the lines.
                    let blank_first = text.lines().next().is_some_and(|first| first.trim().is_empty());
                    let n_lines = text.lines().count() - usize::from(blank_first);
                    proptest::prop_assert!(n_lines <= max_lines.max(1) || mode != StopMode::Block);
                }
            }
        }

        #[test]
        fn finalize_never_panics_and_never_grows(generated in "\\PC{0,40}(\n\\PC{0,20}){0,4}", suffix in "\\PC{0,10}(\n\\PC{0,10}){0,2}") {
            for context in [line(&suffix), block("  ", &suffix)] {
                if let Some(text) = finalize(&generated, &context) {
                    proptest::prop_assert!(text.len() <= generated.len());
                    proptest::prop_assert!(!text.trim().is_empty());
                    proptest::prop_assert!(generated.starts_with(&text) || context.mode == StopMode::Block);
                }
            }
        }
    }
}
