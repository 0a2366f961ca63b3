//! Verification of task edits before they are offered, pure functions over text and trees. An edit that fails
//! any check is never shown; the caller tries another sample or says plainly that nothing verified.

use spark_grammars::{syntax_errors, tree_sitter::Tree, Lang};
use std::ops::Range;

use super::regex::REGEX_MATCH_LIMIT;

/// Why a candidate edit was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    Empty,
    Unchanged,
    /// The edited text has syntax errors (or more than before outside the edit).
    SyntaxErrors {
        in_edit: usize,
        total_before: usize,
        total_after: usize,
    },
    /// The candidate runs past its node: it repeats the code that follows or leaves brackets open.
    EscapesNode,
    /// A fix at a syntax error that leaves the file's brackets as unmatched as they were (or more): the error
    /// moved instead of going away.
    BracketsStillUnmatched {
        before: usize,
        after: usize,
    },
    /// The candidate removes much more than it writes and is not a deletion fix.
    DeletesTooMuch,
    /// The candidate changes too much of the code it rewrites to be a fix of it (the model wrote something
    /// else, often its prompt's example): counted in tokens deleted and inserted.
    TooDifferent {
        deleted: usize,
        inserted: usize,
        of: usize,
    },
    /// The candidate drops a name that the rest of the file uses (a rename or a deleted binding breaks the code
    /// the fix claims to repair).
    DropsName(String),
    /// A fix of a compiler's diagnostic that leaves the diagnosed code as it was (it changed something else).
    MissesDiagnosedCode,
    /// The document changed since the edit was computed.
    Stale {
        computed_for: i32,
        current: i32,
    },
    RegexInvalid(String),
    RegexMissesExample(String),
    RegexMatchesCounterexample(String),
    /// Matching the examples took longer than [`REGEX_MATCH_LIMIT`] (catastrophic backtracking).
    RegexTooSlow,
    /// The pattern is not anchored at both ends: the offered code searches with it, so it would find a match
    /// inside a longer string.
    RegexUnanchored,
    /// The pattern holds one of its examples literally: it spells out what it was shown.
    RegexSpellsOutExample(String),
    /// The pattern matches its examples and nothing like them (an alternation of the examples).
    RegexOnlyItsExamples,
    /// The pattern matches a near miss Spark wrote from the examples that is certainly not of the kind described.
    RegexMatchesProbe(String),
    /// Generated tests without an assertion that calls the function under test.
    NoAssertion,
    /// Generated tests call a function that the test file neither defines nor imports (often the prompt's
    /// example, `add`): they would not compile.
    UnknownCall(String),
    /// An assertion expects a value of another kind than the function returns (`assert.equal(isValid(1), 2)` for a
    /// function that returns a boolean).
    WrongExpectedKind {
        returns: &'static str,
        expected: String,
    },
    /// A call of the function under test with the wrong number of arguments.
    WrongArity {
        expected: (usize, usize),
        found: usize,
    },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Empty => write!(f, "empty"),
            Rejection::Unchanged => write!(f, "changes nothing"),
            Rejection::BracketsStillUnmatched { before, after } => {
                write!(f, "leaves {after} unmatched brackets in the file (it had {before})")
            }
            Rejection::SyntaxErrors { in_edit, total_before, total_after } => {
                write!(f, "syntax errors: {in_edit} in the edit, {total_after} in the file (was {total_before})")
            }
            Rejection::EscapesNode => write!(f, "runs past the node it rewrites"),
            Rejection::DeletesTooMuch => write!(f, "deletes more than it replaces"),
            Rejection::TooDifferent { deleted, inserted, of } => {
                write!(f, "rewrites too much: {deleted} of {of} tokens deleted, {inserted} inserted")
            }
            Rejection::DropsName(name) => write!(f, "drops `{name}`, which the rest of the file uses"),
            Rejection::MissesDiagnosedCode => write!(f, "leaves the diagnosed code unchanged"),
            Rejection::Stale { computed_for, current } => {
                write!(f, "computed for version {computed_for}, the document is at {current}")
            }
            Rejection::RegexInvalid(error) => write!(f, "does not compile: {error}"),
            Rejection::RegexMissesExample(example) => write!(f, "does not match {example:?}"),
            Rejection::RegexMatchesCounterexample(example) => write!(f, "matches {example:?}"),
            Rejection::RegexUnanchored => write!(f, "is not anchored with ^ and $"),
            Rejection::RegexSpellsOutExample(example) => write!(f, "spells out its example {example:?}"),
            Rejection::RegexOnlyItsExamples => write!(f, "matches its examples and nothing like them"),
            Rejection::RegexMatchesProbe(probe) => write!(f, "matches the near miss {probe:?}"),
            Rejection::RegexTooSlow => {
                write!(f, "too slow: matching the examples took over {} ms", REGEX_MATCH_LIMIT.as_millis())
            }
            Rejection::NoAssertion => write!(f, "no assertion calls the function"),
            Rejection::WrongExpectedKind { returns, expected } => {
                write!(f, "expects {expected} from a function that returns {returns}")
            }
            Rejection::UnknownCall(name) => {
                write!(f, "uses `{name}`, which the test file neither defines nor imports")
            }
            Rejection::WrongArity { expected: (min, max), found } => {
                write!(f, "calls the function with {found} argument(s), it takes {min}..={max}")
            }
        }
    }
}

/// An edit is only applied to the document version it was computed for.
pub fn check_version(computed_for: i32, current: i32) -> Result<(), Rejection> {
    if computed_for == current {
        Ok(())
    } else {
        Err(Rejection::Stale { computed_for, current })
    }
}

fn count_errors(tree: &Tree, range: Option<Range<usize>>) -> usize {
    syntax_errors(tree.root_node(), 10_000)
        .into_iter()
        .filter(|node| match &range {
            Some(range) => node.start_byte() <= range.end && node.end_byte() >= range.start,
            None => true,
        })
        .count()
}

/// Tokens (identifiers, numbers, single punctuation) deleted from and inserted into `old` to get `new`, and
/// the number of tokens of `old`.
fn token_changes(old: &str, new: &str) -> (usize, usize, usize) {
    let old_tokens = tokens(old);
    let new_tokens = tokens(new);
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &old_tokens, &new_tokens);
    let (mut deleted, mut inserted) = (0, 0);
    for op in ops {
        match op {
            similar::DiffOp::Equal { .. } => {}
            similar::DiffOp::Delete { old_len, .. } => deleted += old_len,
            similar::DiffOp::Insert { new_len, .. } => inserted += new_len,
            similar::DiffOp::Replace { old_len, new_len, .. } => {
                deleted += old_len;
                inserted += new_len;
            }
        }
    }
    (deleted, inserted, old_tokens.len())
}

fn tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut word_start: Option<usize> = None;
    for (idx, ch) in text.char_indices() {
        let is_word = ch.is_alphanumeric() || ch == '_';
        match (is_word, word_start) {
            (true, None) => word_start = Some(idx),
            (false, Some(start)) => {
                out.push(&text[start..idx]);
                word_start = None;
            }
            _ => {}
        }
        if !is_word && !ch.is_whitespace() {
            out.push(&text[idx..idx + ch.len_utf8()]);
        }
    }
    if let Some(start) = word_start {
        out.push(&text[start..]);
    }
    out
}

/// Checks a rewrite of `node` (a byte range of `source`) into `candidate`: it changes something, parses with no
/// error inside the edit and no new error elsewhere, stays inside its node, and does not delete more than it
/// writes (an empty candidate is a deletion and allowed only when `allow_deletion`).
pub fn check_rewrite(
    lang: Lang,
    source: &str,
    node: Range<usize>,
    candidate: &str,
    allow_deletion: bool,
) -> Result<String, Rejection> {
    let old = &source[node.clone()];
    if candidate.trim().is_empty() && !allow_deletion {
        return Err(Rejection::Empty);
    }
    if squash(candidate) == squash(old) {
        return Err(Rejection::Unchanged);
    }
    let old_weight = squash(old).len();
    let new_weight = squash(candidate).len();
    if !candidate.trim().is_empty() && new_weight * 2 < old_weight {
        return Err(Rejection::DeletesTooMuch);
    }
    if escapes(source, node.end, candidate, old) {
        return Err(Rejection::EscapesNode);
    }
    if !candidate.trim().is_empty() {
        let (deleted, inserted, of) = token_changes(old, candidate);
        if deleted > (of / 4).max(2) || inserted > (of / 3).max(4) {
            return Err(Rejection::TooDifferent { deleted, inserted, of });
        }
    }
    let new_source = format!("{}{}{}", &source[..node.start], candidate, &source[node.end..]);
    let old_tree = crate::parse::text(lang, source);
    if let Some(name) = old_tree.as_ref().and_then(|tree| dropped_name(tree, source, node.clone(), candidate)) {
        return Err(Rejection::DropsName(name));
    }
    let before = old_tree.map(|tree| count_errors(&tree, None)).unwrap_or(usize::MAX);
    let tree = crate::parse::text(lang, &new_source).ok_or(Rejection::SyntaxErrors {
        in_edit: 1,
        total_before: before,
        total_after: usize::MAX,
    })?;
    let edit_range = node.start..node.start + candidate.len();
    let in_edit = count_errors(&tree, Some(edit_range));
    let total_after = count_errors(&tree, None);
    if in_edit > 0 || total_after > before {
        return Err(Rejection::SyntaxErrors { in_edit, total_before: before, total_after });
    }
    Ok(new_source)
}

/// An edit that needs no other check of its shape (a compiler's own suggestion, which the compiler then judges)
/// must still parse: no syntax error inside what it inserts and none more in the file.
pub fn check_parses_no_worse(
    lang: Lang,
    old_tree: &Tree,
    new_source: &str,
    edit: Range<usize>,
) -> Result<(), Rejection> {
    let before = count_errors(old_tree, None);
    let Some(tree) = crate::parse::text(lang, new_source) else {
        return Err(Rejection::SyntaxErrors { in_edit: 1, total_before: before, total_after: usize::MAX });
    };
    let (in_edit, total_after) = (count_errors(&tree, Some(edit)), count_errors(&tree, None));
    if in_edit > 0 || total_after > before {
        return Err(Rejection::SyntaxErrors { in_edit, total_before: before, total_after });
    }
    Ok(())
}

/// A fix at a syntax error must leave the file with fewer syntax errors than it had and, when its brackets did
/// not match, fewer unmatched brackets: a rewrite that parses inside its node but moves the error elsewhere is
/// no fix (Gemma 3 270M "fixed" an `if` missing its `}` by deleting the `else` after it, which parsed, left the
/// function's last brace unmatched, and `tsc` said so). `new_source` is the file with the rewrite applied.
pub fn check_clears_syntax_error(lang: Lang, old_tree: &Tree, new_source: &str) -> Result<(), Rejection> {
    let before = count_errors(old_tree, None);
    let Some(new_tree) = crate::parse::text(lang, new_source) else {
        return Err(Rejection::SyntaxErrors { in_edit: 0, total_before: before, total_after: usize::MAX });
    };
    let after = count_errors(&new_tree, None);
    if after >= before {
        return Err(Rejection::SyntaxErrors { in_edit: 0, total_before: before, total_after: after });
    }
    let (unmatched_before, unmatched_after) = (unmatched_brackets(old_tree), unmatched_brackets(&new_tree));
    if unmatched_after > unmatched_before || (unmatched_before > 0 && unmatched_after == unmatched_before) {
        return Err(Rejection::BracketsStillUnmatched { before: unmatched_before, after: unmatched_after });
    }
    Ok(())
}

/// Brackets of the file without a partner, counted over the parser's bracket tokens (so never inside strings or
/// comments; tokens the parser only assumed, MISSING ones, are not there): per kind, the difference between
/// openers and closers. TypeScript's `${` opens a `}`.
fn unmatched_brackets(tree: &Tree) -> usize {
    let mut balance = [0i64; 3];
    let mut cursor = tree.walk();
    loop {
        let node = cursor.node();
        if node.child_count() == 0 && !node.is_missing() {
            match node.kind() {
                "{" | "${" => balance[0] += 1,
                "}" => balance[0] -= 1,
                "(" => balance[1] += 1,
                ")" => balance[1] -= 1,
                "[" => balance[2] += 1,
                "]" => balance[2] -= 1,
                _ => {}
            }
        }
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                return balance.iter().map(|count| count.unsigned_abs() as usize).sum();
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
}

/// A fix of a diagnostic in code that parses (a compiler's error: a misspelled name, a wrong type, a call missing
/// an argument) must change the diagnosed code: the diagnosed node, widened from a single token to the node around
/// it (`bigarm` in `entry(bigarm)`: the arguments) and from a callee's name to its call (rustc reports a missing
/// argument at the function's name). Gemma 3 270M "fixed" `entry(bigarm).or_insert(0)` by writing `or_insert(1)`.
/// When the message names the diagnosed text itself (rustc's "cannot find function `transform`", "no method named
/// `x`", TypeScript's "Cannot find name 'x'"), the edit must touch that name: changing the arguments of a call to
/// an unknown function, or adding a `;` after it, leaves it unknown (`edit` is replaced by `insert`; text put
/// right after the name must go on with it, as a completed typo does once narrowed to what changed).
pub fn check_changes_diagnosed_node(
    tree: &Tree,
    source: &str,
    diagnosed: Range<usize>,
    message: Option<&str>,
    (edit, insert): (Range<usize>, &str),
) -> Result<(), Rejection> {
    let touches = |region: Range<usize>| edit.start <= region.end && edit.end.max(edit.start) >= region.start;
    // A range inside one token (a position without a range, as the CLI's `--at` or an agent gives it; a checker
    // that reports only where its error starts): the whole token.
    let leaf = tree.root_node().descendant_for_byte_range(diagnosed.start, diagnosed.end);
    let diagnosed = leaf.filter(|leaf| leaf.child_count() == 0).map_or(diagnosed.clone(), |leaf| {
        let token = leaf.byte_range();
        token.start.min(diagnosed.start)..token.end.max(diagnosed.end)
    });
    let named = source.get(diagnosed.clone()).filter(|text| {
        !text.is_empty()
            && text.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$')
            && message.is_some_and(|message| message_names(message, text))
    });
    if named.is_some() {
        let overlaps = edit.start < diagnosed.end && edit.end > diagnosed.start;
        let before = edit.end == diagnosed.start;
        let goes_on = edit.start == diagnosed.end && insert.starts_with(|ch: char| ch.is_alphanumeric() || ch == '_');
        return if overlaps || before || goes_on { Ok(()) } else { Err(Rejection::MissesDiagnosedCode) };
    }
    let region = diagnosed_region(tree, diagnosed.clone());
    if touches(region) {
        return Ok(());
    }
    Err(Rejection::MissesDiagnosedCode)
}

/// Whether a compiler's message names `name` as rustc (`` `name` ``) and tsc (`'name'`) quote it.
pub fn message_names(message: &str, name: &str) -> bool {
    message.contains(&format!("`{name}`")) || message.contains(&format!("'{name}'"))
}

/// The code a diagnostic at `diagnosed` is about (see [`check_changes_diagnosed_node`]).
pub fn diagnosed_region(tree: &Tree, diagnosed: Range<usize>) -> Range<usize> {
    let Some(mut node) = tree.root_node().descendant_for_byte_range(diagnosed.start, diagnosed.end) else {
        return diagnosed;
    };
    if node.named_child_count() == 0 {
        node = node.parent().unwrap_or(node);
    }
    while matches!(node.kind(), "field_expression" | "member_expression" | "scoped_identifier" | "generic_function") {
        match node.parent() {
            Some(parent)
                if matches!(
                    parent.kind(),
                    "call_expression"
                        | "generic_function"
                        | "field_expression"
                        | "member_expression"
                        | "scoped_identifier"
                ) =>
            {
                node = parent
            }
            _ => break,
        }
    }
    let range = node.byte_range();
    range.start.min(diagnosed.start)..range.end.max(diagnosed.end)
}

/// A name (an identifier of any kind) in the rewritten node that the rest of the file also uses and that the
/// candidate no longer has: renaming `scaled` while the next line reads it is not a fix.
fn dropped_name(tree: &Tree, source: &str, node: Range<usize>, candidate: &str) -> Option<String> {
    let mut inside = std::collections::BTreeSet::new();
    let mut outside = std::collections::HashSet::new();
    let mut cursor = tree.walk();
    loop {
        let current = cursor.node();
        if current.is_named() && current.child_count() == 0 && current.kind().ends_with("identifier") {
            let range = current.byte_range();
            if let Some(text) = source.get(range.clone()) {
                if range.start >= node.start && range.end <= node.end {
                    inside.insert(text);
                } else {
                    outside.insert(text);
                }
            }
        }
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                let kept: std::collections::HashSet<&str> = tokens(candidate).into_iter().collect();
                return inside
                    .into_iter()
                    .find(|name| outside.contains(name) && !kept.contains(name))
                    .map(str::to_owned);
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
}

/// A candidate escapes its node when it goes on into the code after the node (the model kept writing the
/// file) or when its brackets do not balance the way the original's did.
fn escapes(source: &str, node_end: usize, candidate: &str, old: &str) -> bool {
    let after = &source[node_end..];
    // Lines the candidate has beyond the original's that repeat the code right after the node.
    let following: Vec<&str> =
        after.split('\n').skip(1).map(str::trim).filter(|line| !line.is_empty()).take(3).collect();
    let repeats_following = candidate
        .lines()
        .skip(old.lines().count())
        .map(str::trim)
        .any(|line| !line.is_empty() && following.contains(&line));
    if repeats_following {
        return true;
    }
    let next_line = after.split('\n').skip(1).map(str::trim).find(|line| line.len() > 3);
    if let Some(next_line) = next_line {
        if candidate.lines().any(|line| line.trim() == next_line) && !old.lines().any(|line| line.trim() == next_line) {
            return true;
        }
    }
    let depth = spark_grammars::brackets::bracket_depth;
    depth(candidate) != depth(old) && depth(candidate) != 0
}

/// Text without whitespace, to compare code regardless of layout.
fn squash(text: &str) -> String {
    text.chars().filter(|ch| !ch.is_whitespace()).collect()
}

/// The number of arguments of every call `name(…)` in `code` (not method calls `x.name(…)`): top-level
/// commas counted with brackets and string literals skipped.
pub fn call_arities(code: &str, name: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let pattern = format!("{name}(");
    let mut from = 0;
    while let Some(idx) = code[from..].find(&pattern) {
        let start = from + idx;
        from = start + pattern.len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '.') {
            continue;
        }
        let mut depth = 0usize;
        let mut commas = 0;
        let mut any = false;
        let mut quote: Option<char> = None;
        let mut escaped = false;
        for ch in code[from..].chars() {
            if let Some(open) = quote {
                if escaped {
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == open {
                    quote = None;
                }
                continue;
            }
            match ch {
                '"' | '`' => {
                    quote = Some(ch);
                    any = true;
                }
                '(' | '[' | '{' => {
                    depth += 1;
                    any = true;
                }
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => commas += 1,
                ch if !ch.is_whitespace() => any = true,
                _ => {}
            }
        }
        found.push(if any { commas + 1 } else { 0 });
    }
    found
}

pub(super) fn first_line(text: &str) -> String {
    text.lines().map(str::trim).rfind(|line| !line.is_empty()).unwrap_or("").to_owned()
}

/// Generated tests parse in their file (`new_file_text`, the whole test file or module after the insertion, with
/// no new syntax error) and contain an assertion that calls `function_name`.
pub fn check_tests(
    lang: Lang,
    old_file_text: &str,
    new_file_text: &str,
    test_code: &str,
    function_name: &str,
    arity: Option<(usize, usize)>,
) -> Result<(), Rejection> {
    if let Some((min, max)) = arity {
        for found in call_arities(test_code, function_name) {
            if found < min || found > max {
                return Err(Rejection::WrongArity { expected: (min, max), found });
            }
        }
    }
    let before = crate::parse::text(lang, old_file_text).map(|tree| count_errors(&tree, None)).unwrap_or(0);
    let tree = crate::parse::text(lang, new_file_text).ok_or(Rejection::SyntaxErrors {
        in_edit: 1,
        total_before: before,
        total_after: 1,
    })?;
    let total_after = count_errors(&tree, None);
    if total_after > before {
        return Err(Rejection::SyntaxErrors { in_edit: total_after - before, total_before: before, total_after });
    }
    // The test code alone (it parses by itself: a `#[test]` function, a `test(…)` call).
    let test_tree = crate::parse::text(lang, test_code);
    if let Some(name) = test_tree.as_ref().and_then(|tree| unknown_callee(lang, new_file_text, test_code, tree)) {
        return Err(Rejection::UnknownCall(name));
    }
    if let Some(test_tree) = test_tree.as_ref().filter(|_| lang == Lang::Rust) {
        let in_macros = assertion_syntax_errors(test_code, test_tree);
        if in_macros > 0 {
            return Err(Rejection::SyntaxErrors {
                in_edit: in_macros,
                total_before: before,
                total_after: before + in_macros,
            });
        }
    }
    let call = format!("{function_name}(");
    let asserts = test_code.lines().any(|line| {
        let line = line.trim();
        (line.contains("assert") || line.contains("expect(")) && line.contains(&call)
    });
    let calls_then_asserts =
        test_code.contains(&call) && test_code.lines().any(|line| line.contains("assert") || line.contains("expect("));
    if asserts || calls_then_asserts {
        Ok(())
    } else {
        Err(Rejection::NoAssertion)
    }
}

/// What kind of value a function's declared return type is, when it is a plain boolean, number or string.
fn return_kind(lang: Lang, function_source: &str) -> Option<&'static str> {
    let body_at = function_source.find('{').unwrap_or(function_source.len());
    let signature = &function_source[..body_at];
    let declared = if lang == Lang::Rust {
        signature.rsplit_once("->")?.1.split(" where").next()?.trim()
    } else {
        let (_, after) = signature.rsplit_once(')')?;
        after.trim_start().strip_prefix(':')?.split("=>").next()?.trim()
    };
    let numbers = [
        "number", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
    ];
    let is_predicate = declared.split_whitespace().nth(1) == Some("is");
    match declared {
        "boolean" | "bool" => Some("a boolean"),
        _ if is_predicate => Some("a boolean"),
        "string" | "String" | "&str" | "&'static str" => Some("a string"),
        _ if numbers.contains(&declared) => Some("a number"),
        _ => None,
    }
}

/// The kind of a literal expected value: `true`, `2`, `"a"`.
fn literal_kind(literal: &str) -> Option<&'static str> {
    let literal = literal.trim();
    if literal == "true" || literal == "false" {
        return Some("a boolean");
    }
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    if digits.starts_with(|ch: char| ch.is_ascii_digit())
        && digits.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '_')
    {
        return Some("a number");
    }
    let quoted = |q: char| literal.len() >= 2 && literal.starts_with(q) && literal.ends_with(q);
    if quoted('"') || quoted('\'') || quoted('`') {
        return Some("a string");
    }
    None
}

/// Each one-line assertion on a call of `name` whose expected value is a literal must expect the kind of value
/// the function's declared return type is (`assert.equal(name(…), X)`, `assert_eq!(name(…), X)`,
/// `expect(name(…)).toBe(X)`): a small model copies its prompt's example (`add(2, 3) → 5`) onto any function.
pub fn check_expected_values(lang: Lang, function_source: &str, test_code: &str, name: &str) -> Result<(), Rejection> {
    let Some(returns) = return_kind(lang, function_source) else { return Ok(()) };
    let call = format!("{name}(");
    for line in test_code.lines().map(str::trim) {
        let Some(at) = line.find(&call) else { continue };
        let starts_with_call = |prefix: &str| line.starts_with(prefix) && line[prefix.len()..].starts_with(&call);
        let direct = [
            "assert.equal(",
            "assert.strictEqual(",
            "assert.deepEqual(",
            "assert.deepStrictEqual(",
            "assert_eq!(",
            "expect(",
        ]
        .iter()
        .any(|prefix| starts_with_call(prefix));
        if !direct || line.contains("?.") {
            continue;
        }
        // The call's own closing parenthesis, then `, X)` or `).toBe(X)` / `).toEqual(X)` to the end of the line.
        let mut depth = 0usize;
        let mut close = None;
        for (idx, ch) in line[at + call.len() - 1..].char_indices() {
            match ch {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        close = Some(at + call.len() - 1 + idx + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let rest = line[close..].trim_end_matches(';').trim_end();
        let expected = if let Some(value) = rest.strip_prefix(',') {
            value.trim().strip_suffix(')')
        } else {
            rest.strip_prefix(").toBe(")
                .or_else(|| rest.strip_prefix(").toEqual("))
                .and_then(|value| value.strip_suffix(')'))
        };
        let Some(expected) = expected.map(str::trim) else { continue };
        if let Some(kind) = literal_kind(expected) {
            if kind != returns {
                return Err(Rejection::WrongExpectedKind { returns, expected: expected.to_owned() });
            }
        }
    }
    Ok(())
}

/// Syntax errors inside Rust assertion macros, which tree-sitter reads as bare token trees: each
/// `assert!(…)`, `assert_eq!(…)`, `assert_ne!(…)` is parsed again as the expression `(…)`.
fn assertion_syntax_errors(test_code: &str, tree: &Tree) -> usize {
    let mut errors = 0;
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.kind() == "macro_invocation" {
            let name = node.child_by_field_name("macro").and_then(|name| test_code.get(name.byte_range()));
            let mut cursor = node.walk();
            let arguments = node.children(&mut cursor).find(|child| child.kind() == "token_tree");
            let text = arguments.and_then(|arguments| test_code.get(arguments.byte_range())).unwrap_or("");
            if matches!(name, Some("assert" | "assert_eq" | "assert_ne")) && text.starts_with('(') {
                let expression = format!("fn __spark() {{\n    let _ = {text};\n}}\n");
                errors += crate::parse::text(Lang::Rust, &expression).map_or(1, |tree| count_errors(&tree, None));
            }
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    errors
}

/// Functions every test file may call by a bare name: the test frameworks' and the language's own.
const TS_GLOBAL_CALLS: &[&str] = &[
    "test",
    "it",
    "describe",
    "expect",
    "assert",
    "beforeEach",
    "afterEach",
    "beforeAll",
    "afterAll",
    "Number",
    "String",
    "Boolean",
    "Symbol",
    "BigInt",
    "Array",
    "Object",
    "Date",
    "Error",
    "TypeError",
    "RangeError",
    "Promise",
    "parseInt",
    "parseFloat",
    "isNaN",
    "isFinite",
    "setTimeout",
    "clearTimeout",
    "setInterval",
    "clearInterval",
    "queueMicrotask",
    "structuredClone",
    "encodeURIComponent",
    "decodeURIComponent",
    "encodeURI",
    "decodeURI",
    "require",
    "fetch",
    "fail",
    "Math",
    "JSON",
    "console",
    "globalThis",
    "window",
    "document",
    "process",
    "Buffer",
    "Map",
    "Set",
    "WeakMap",
    "WeakSet",
    "Reflect",
    "Proxy",
    "Intl",
    "RegExp",
    "NaN",
    "Infinity",
    "Uint8Array",
    "Int32Array",
    "Float64Array",
    "ArrayBuffer",
    "TextEncoder",
    "TextDecoder",
    "URL",
    "URLSearchParams",
    "AbortController",
    "arguments",
    "vi",
    "jest",
];
const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait",
    "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn", "_",
];
const RUST_GLOBAL_CALLS: &[&str] = &["Some", "Ok", "Err", "drop", "Box", "Vec", "String"];

/// The first function `test_code` calls by a bare name (`add(2, 3)`, not `x.add()` or `m::add()`), or in
/// TypeScript the first name it reads at all (`NetworkMode.OPEN`), that `file_text` (the test file with the tests
/// in it) neither declares nor names in an import, and that is not a global or a prelude function; `None` when
/// every name resolves (or the code does not parse).
fn unknown_callee(lang: Lang, file_text: &str, test_code: &str, tree: &Tree) -> Option<String> {
    let globals = if lang == Lang::Rust { RUST_GLOBAL_CALLS } else { TS_GLOBAL_CALLS };
    let mut callees = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        // TypeScript: every name read in an expression (`identifier`; properties, types and shorthand keys are
        // other kinds). Names declared in the test code itself are found by `declared` below.
        if lang != Lang::Rust && node.kind() == "identifier" {
            if let Some(name) = test_code.get(node.byte_range()) {
                callees.push(name);
                // The framework's `test` read as a value (`test.networkMode`, `f(test)`): a model that mistook it
                // for the code under test. Only its modifiers are members.
                let parent = node.parent();
                let as_value = parent.is_some_and(|parent| match parent.kind() {
                    "arguments" => true,
                    "member_expression" => {
                        let property = parent.child_by_field_name("property");
                        let property = property.and_then(|property| test_code.get(property.byte_range()));
                        !matches!(property, Some("skip" | "only" | "todo" | "each" | "concurrent"))
                    }
                    _ => false,
                });
                if matches!(name, "test" | "it") && as_value {
                    let used = parent.filter(|parent| parent.kind() == "member_expression");
                    return Some(used.and_then(|used| test_code.get(used.byte_range())).unwrap_or(name).to_owned());
                }
            }
        }
        if node.kind() == "call_expression" {
            let callee = node.child_by_field_name("function").filter(|callee| callee.kind() == "identifier");
            if let Some(name) = callee.and_then(|callee| test_code.get(callee.byte_range())) {
                callees.push(name);
            }
        }
        let mut cursor = node.walk();
        let children: Vec<_> = node.children(&mut cursor).collect();
        // Inside a Rust macro (`assert_eq!(add(1, 2), 3)`) a call is a name and a `(…)` token tree.
        if node.kind() == "token_tree" {
            for (idx, pair) in children.windows(2).enumerate() {
                let after_path = idx > 0 && matches!(children[idx - 1].kind(), "." | "::");
                let opens = test_code.get(pair[1].byte_range()).is_some_and(|text| text.starts_with('('));
                if pair[0].kind() == "identifier" && pair[1].kind() == "token_tree" && opens && !after_path {
                    if let Some(name) = test_code.get(pair[0].byte_range()) {
                        callees.push(name);
                    }
                }
            }
            // A value read inside the macro (`assert_eq!(f(a), 1)` with no `a` anywhere): a lowercase name that is
            // neither a path segment, a field, a macro, a call, a struct literal nor a field of one.
            for (idx, child) in children.iter().enumerate() {
                let previous = idx.checked_sub(1).map(|at| children[at].kind());
                let next = children.get(idx + 1);
                let next_text = next.and_then(|next| test_code.get(next.byte_range())).unwrap_or("");
                let qualified = matches!(previous, Some("." | "::" | "'" | "$"));
                let followed = matches!(next.map(|next| next.kind()), Some("!" | "::" | ":"))
                    || next_text.starts_with('(')
                    || next_text.starts_with('{');
                let Some(name) = test_code.get(child.byte_range()) else { continue };
                let lowercase = name.starts_with(|ch: char| ch.is_ascii_lowercase() || ch == '_');
                if child.kind() == "identifier"
                    && lowercase
                    && !qualified
                    && !followed
                    && !RUST_KEYWORDS.contains(&name)
                {
                    callees.push(name);
                }
            }
        }
        stack.extend(children);
    }
    // Identifiers of a line (TypeScript's may hold `$`).
    fn idents(line: &str) -> impl Iterator<Item = &str> {
        line.split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '$')).filter(|token| !token.is_empty())
    }
    // Items anywhere in the file (the Rust tests see them through `use super::*`) and imports; local bindings
    // (`let`, `for`) only in the test code itself: a `let a` in another function of the file is not in scope.
    let binds = |text: &str, name: &str, keywords: &[&str]| {
        text.lines().any(|line| {
            let mut previous = "";
            idents(line).any(|token| {
                let declares = keywords.contains(&previous);
                previous = token;
                declares && token == name
            })
        })
    };
    let declared = |name: &str| {
        let imported = file_text.lines().map(str::trim_start).any(|line| {
            (line.starts_with("use ") || line.starts_with("import ") || line.starts_with("pub use "))
                && idents(line).any(|token| token == name)
        });
        let item_keywords: &[&str] = if lang == Lang::Rust {
            &["fn", "struct", "enum", "const", "static", "type"]
        } else {
            &["function", "const", "let", "var", "class"]
        };
        imported
            || binds(file_text, name, item_keywords)
            || binds(test_code, name, &["let", "mut", "for", "const", "var", "function", "fn"])
    };
    // Parameters of closures and functions inside the test code (`(f) => f(1)`, `|f| f(1)`) are declared there.
    // (In Rust only closures' `|a, b|` and typed `(a: T)`: `f(a, b)` is a call, not a parameter list.)
    let parameter = |name: &str| {
        let (opens, closes): (&[&str], &[&str]) = if lang == Lang::Rust {
            (&["(", ", ", "|"], &[":", "|"])
        } else {
            (&["(", ", ", "|"], &[")", ",", ":", "?", "|"])
        };
        let closure_list = lang == Lang::Rust && test_code.contains(&format!("|{name},"));
        test_code.contains(&format!("{name} =>"))
            || closure_list
            || opens.iter().any(|open| closes.iter().any(|close| test_code.contains(&format!("{open}{name}{close}"))))
    };
    callees.into_iter().find(|name| !globals.contains(name) && !declared(name) && !parameter(name)).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callee(lang: Lang, file_text: &str, test_code: &str) -> Option<String> {
        unknown_callee(lang, file_text, test_code, &crate::parse::text(lang, test_code)?)
    }

    fn macro_errors(test_code: &str) -> usize {
        assertion_syntax_errors(test_code, &crate::parse::text(Lang::Rust, test_code).unwrap())
    }

    #[test]
    fn expected_values_of_the_wrong_kind_are_refused() {
        let ts =
            "export function isValidTimeout(value: unknown): value is number {\n  return typeof value === 'number';\n}";
        let check = |code: &str| check_expected_values(Lang::TypeScript, ts, code, "isValidTimeout");
        assert_eq!(
            check("  assert.equal(isValidTimeout(1), 2);"),
            Err(Rejection::WrongExpectedKind { returns: "a boolean", expected: "2".to_owned() })
        );
        assert_eq!(check("  assert.equal(isValidTimeout(1), true);"), Ok(()));
        assert_eq!(check("  expect(isValidTimeout(Infinity)).toBe(false);"), Ok(()));
        assert!(check("  expect(isValidTimeout(f(1, 2))).toBe('no');").is_err());
        let rust = "pub fn total(xs: &[u32]) -> u32 {\n    xs.iter().sum()\n}";
        let check = |code: &str| check_expected_values(Lang::Rust, rust, code, "total");
        assert_eq!(check("        assert_eq!(total(&[1, 2]), 3);"), Ok(()));
        assert!(check("        assert_eq!(total(&[1, 2]), \"3\");").is_err());
        // Unknown return types, or expected values that are not literals, are left to the other checks.
        let option = "pub fn first(xs: &[u32]) -> Option<u32> {\n    xs.first().copied()\n}";
        assert_eq!(check_expected_values(Lang::Rust, option, "assert_eq!(first(&[1]), 1);", "first"), Ok(()));
        assert_eq!(check("        assert_eq!(total(&[1, 2]), three);"), Ok(()));
    }

    #[test]
    fn tests_that_call_what_the_file_does_not_have_are_refused() {
        let file = "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\nimport compose from \"./compose\";\n";
        let calls = |code: &str| callee(Lang::TypeScript, &format!("{file}{code}"), code);
        assert_eq!(calls("test(\"c\", () => {\n  assert.equal(add(2, 3), 5);\n});"), Some("add".to_owned()));
        assert_eq!(calls("test(\"c\", () => {\n  assert.equal(compose()(1), 1);\n});"), None);
        assert_eq!(calls("test(\"c\", () => {\n  const twice = (x: number) => 2 * x;\n  assert.equal(compose(twice)(1), 2);\n});"), None);
        assert_eq!(
            calls("test(\"c\", () => {\n  const f = (g: any) => g(1);\n  expect(Number(f(compose)));\n});"),
            None
        );
        let unknown_enum = "test(\"c\", () => {\n  assert.equal(compose(NetworkMode.OPEN), false);\n});";
        assert_eq!(calls(unknown_enum), Some("NetworkMode".to_owned()));
        let framework = "test(\"c\", () => {\n  assert.equal(compose(test.networkMode), false);\n});";
        assert_eq!(calls(framework), Some("test.networkMode".to_owned()));
        assert_eq!(calls("test.skip(\"c\", () => {\n  assert.equal(compose(), 1);\n});"), None);
        let locals = "test(\"c\", () => {\n  const xs = [1, 2];\n  for (const x of xs) assert.equal(compose(x, Math.PI), { x });\n});";
        assert_eq!(calls(locals), None);
        let rust_file = "use std::collections::HashMap;\npub fn total(xs: &[u32]) -> u32 { xs.iter().sum() }\nfn helper() -> u32 { 1 }\n";
        let rust = |code: &str| callee(Lang::Rust, &format!("{rust_file}{code}"), code);
        assert_eq!(rust("#[test]\nfn t() {\n    assert_eq!(total(&[1, 2]), 3);\n    assert_eq!(helper(), Some(1).unwrap());\n}\n"), None);
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
        let check = |diagnosed: &str, edit: &str| {
            check_changes_diagnosed_node(&tree, source, at(diagnosed), None, (at(edit), "x"))
        };
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
        assert!(matches!(
            rewrite(broken, "let x = (1 + 2;"),
            Err(Rejection::EscapesNode | Rejection::SyntaxErrors { .. })
        ));
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
}
