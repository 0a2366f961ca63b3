//! Lexical bracket counting, shared by the engine's stop rules and Spark's verification: openers and closers
//! outside string literals (`"` and backtick strings), no parse needed. Language knowledge, so it lives with
//! the grammars.

/// Openers minus closers; quotes toggle a string state so that brackets inside literals are skipped.
pub fn bracket_depth(text: &str) -> i32 {
    let mut depth = 0;
    for_each_bracket(text, |delta| depth += delta);
    depth
}

/// Calls `on_bracket(+1)` for each opener and `on_bracket(-1)` for each closer outside string literals.
pub fn for_each_bracket(text: &str, mut on_bracket: impl FnMut(i32)) {
    let mut in_string: Option<char> = None;
    let mut escaped = false;
    for ch in text.chars() {
        if let Some(quote) = in_string {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == quote {
                in_string = None;
            }
            continue;
        }
        match ch {
            '"' | '`' => in_string = Some(ch),
            '(' | '[' | '{' => on_bracket(1),
            ')' | ']' | '}' => on_bracket(-1),
            _ => {}
        }
    }
}
