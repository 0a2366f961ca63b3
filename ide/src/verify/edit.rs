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

pub(super) fn count_errors(tree: &Tree, range: Option<Range<usize>>) -> usize {
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
pub(super) fn token_changes(old: &str, new: &str) -> (usize, usize, usize) {
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

pub(super) fn tokens(text: &str) -> Vec<&str> {
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
pub(super) fn unmatched_brackets(tree: &Tree) -> usize {
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
pub(super) fn dropped_name(tree: &Tree, source: &str, node: Range<usize>, candidate: &str) -> Option<String> {
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
pub(super) fn escapes(source: &str, node_end: usize, candidate: &str, old: &str) -> bool {
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
pub fn squash(text: &str) -> String {
    text.chars().filter(|ch| !ch.is_whitespace()).collect()
}

/// A left-to-right scan's string literal: [`Literal::skips`] says whether a character belongs to one opened
/// earlier (its closing quote included, escapes honoured); the scan opens one with [`Literal::open`].
#[derive(Default)]
pub(crate) struct Literal {
    quote: Option<char>,
    escaped: bool,
}

impl Literal {
    pub(crate) fn open(&mut self, quote: char) {
        self.quote = Some(quote);
    }

    /// Whether `ch` is inside a literal (to be skipped by the scan); the literal ends at its quote.
    pub(crate) fn skips(&mut self, ch: char) -> bool {
        let Some(open) = self.quote else { return false };
        if self.escaped {
            self.escaped = false;
        } else if ch == '\\' {
            self.escaped = true;
        } else if ch == open {
            self.quote = None;
        }
        true
    }
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
        let mut literal = Literal::default();
        for ch in code[from..].chars() {
            if literal.skips(ch) {
                continue;
            }
            match ch {
                '"' | '`' => {
                    literal.open(ch);
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

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
