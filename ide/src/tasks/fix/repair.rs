//! One-token repairs of a syntax error, found by parsing instead of by the model: a block whose closing `}` the
//! layout says is missing, a `)` or `]` missing on the error's line, a `;` or `,` missing there, a stray
//! punctuation token there. Each candidate is the file with one token put in or taken out; it is kept only when
//! the file then parses with fewer errors and none at the edit (the compiler then checks it like any other fix).
//! A missing `}` cannot be placed by counting brackets (the next `}` of an outer block pairs with the open one):
//! the indentation says where the block ends, as it does for a reader.

use std::cell::Cell;
use std::ops::Range;
use std::time::{Duration, Instant};

use spark_grammars::syntax_errors;
use spark_grammars::tree_sitter::Node;

use super::super::TaskDocument;
use crate::verify::{check_clears_syntax_error, check_parses_no_worse, squash};

/// The most repairs handed to the compiler.
const MAX_REPAIRS: usize = 3;
/// The most blocks whose `}` is looked for (the nearest the parser's first error).
const MAX_BLOCKS: usize = 8;
/// The most candidate files parsed for one fix, and the time they may take: a parse of a long file costs tens
/// of milliseconds, and a line offers dozens of places.
const MAX_PARSES: usize = 240;
const PARSE_TIME: Duration = Duration::from_millis(1500);
/// Words that continue a statement after a block's `}` on the same line.
const CONTINUATIONS: [&str; 3] = ["else", "catch", "finally"];

/// One repair: the bytes it replaces and the text put there.
pub(super) type Repair = (Range<usize>, String);

/// Repairs of the document's syntax errors by one token, most likely first (see the module's comment), near
/// the parser's first error and the compiler's diagnostic at `diagnosed` (tree-sitter's error may cover the
/// whole file where the compiler points at the line).
pub(super) fn token_repairs(document: &TaskDocument, diagnosed: usize) -> Vec<Repair> {
    let root = document.tree.root_node();
    let Some(first_error) = syntax_errors(root, 256).iter().map(|error| error.start_byte()).min() else {
        return Vec::new();
    };
    let trial = Trial { document, left: Cell::new(MAX_PARSES), until: Instant::now() + PARSE_TIME };
    let mut blocks = block_closers(document);
    blocks.sort_by_key(|(range, _)| range.start.abs_diff(first_error));
    blocks.truncate(MAX_BLOCKS);
    // Every candidate below has parsed.
    let mut candidates: Vec<Repair> = blocks.into_iter().filter(|repair| trial.parses(repair)).collect();
    let mut anchors = vec![diagnosed.min(document.text.len()), first_error];
    anchors.dedup();
    for &anchor in &anchors {
        candidates.extend(line_tokens(&trial, anchor, &[")", "]"], MAX_REPAIRS));
    }
    // A separator is guessed only when one place alone parses: `a b` may be `a; b` or `a, b` or a lost `+`.
    for &anchor in &anchors {
        let separators = line_tokens(&trial, anchor, &[";", ","], 2);
        if separators.len() == 1 {
            candidates.extend(separators);
        }
    }
    // A stray token: one punctuation token of those lines taken out.
    for &anchor in &anchors {
        candidates.extend(stray_tokens(&trial, anchor));
    }
    let mut repairs: Vec<Repair> = Vec::new();
    for candidate in candidates {
        if repairs.len() == MAX_REPAIRS {
            break;
        }
        if !repairs.iter().any(|seen| seen == &candidate) {
            repairs.push(candidate);
        }
    }
    repairs
}

/// Candidates parsed for one fix, within [`MAX_PARSES`] and [`PARSE_TIME`].
struct Trial<'a> {
    document: &'a TaskDocument,
    left: Cell<usize>,
    until: Instant,
}

impl Trial<'_> {
    /// Whether the document with `repair` applied parses with fewer errors than before and none at the repair
    /// (false once the parses are spent).
    fn parses(&self, repair: &Repair) -> bool {
        if self.left.get() == 0 || Instant::now() >= self.until {
            return false;
        }
        self.left.set(self.left.get() - 1);
        parses(self.document, repair)
    }
}

/// `text` with `repair` applied.
fn applied(text: &str, (range, insert): &Repair) -> String {
    format!("{}{insert}{}", &text[..range.start], &text[range.end..])
}

/// Whether every repair gives the same code, layout aside.
pub(super) fn agree(text: &str, repairs: &[Repair]) -> bool {
    let mut codes = repairs.iter().map(|repair| squash(&applied(text, repair)));
    let first = codes.next();
    codes.all(|code| Some(code) == first)
}

fn parses(document: &TaskDocument, repair: &Repair) -> bool {
    let new_text = applied(&document.text, repair);
    let (range, insert) = repair;
    let edited = range.start..range.start + insert.len();
    check_parses_no_worse(document.lang, &document.tree, &new_text, edited).is_ok()
        && check_clears_syntax_error(document.lang, &document.tree, &new_text).is_ok()
}

/// A line of the document: its bytes (without the line break), its indentation in columns (a tab is 4), and
/// whether it holds code (not blank, not inside a comment or a string).
struct Line {
    range: Range<usize>,
    indent: usize,
    code: bool,
}

fn lines(document: &TaskDocument) -> Vec<Line> {
    let root = document.tree.root_node();
    let text = &document.text;
    let mut lines = Vec::new();
    let mut start = 0;
    for piece in text.split_inclusive('\n') {
        let content = piece.trim_end_matches(['\n', '\r']);
        let range = start..start + content.len();
        let blank = content.trim().is_empty();
        let leading = content.len() - content.trim_start().len();
        let indent = content[..leading].chars().map(|ch| if ch == '\t' { 4 } else { 1 }).sum();
        let code = !blank && !in_comment_or_string(root, start + leading);
        lines.push(Line { range, indent, code });
        start += piece.len();
    }
    lines
}

fn in_comment_or_string(root: Node<'_>, byte: usize) -> bool {
    let mut node = root.descendant_for_byte_range(byte, byte + 1);
    while let Some(current) = node {
        let kind = current.kind();
        if kind.contains("comment") || kind.contains("string") || kind.contains("template") {
            return true;
        }
        node = current.parent();
    }
    false
}

/// Blocks opened at the end of a line whose closing `}` is not where the indentation says the block ends: the
/// first code line indented less than the block's body must be that `}`, at the opening line's indentation.
/// Where it is not, the `}` goes on a blank line there at that indentation, or on a line of its own before that
/// line (before an `else`, `catch` or `finally` on the same line).
fn block_closers(document: &TaskDocument) -> Vec<Repair> {
    let root = document.tree.root_node();
    let text = &document.text;
    let lines = lines(document);
    let mut repairs = Vec::new();
    for (idx, line) in lines.iter().enumerate() {
        let content = &text[line.range.clone()];
        let trimmed = content.trim_end();
        if !line.code || !trimmed.ends_with('{') {
            continue;
        }
        let brace = line.range.start + trimmed.len() - 1;
        let is_token = root.descendant_for_byte_range(brace, brace + 1).is_some_and(|node| node.kind() == "{");
        if !is_token {
            continue;
        }
        let Some(body) = lines[idx + 1..].iter().position(|next| next.code).map(|at| idx + 1 + at) else { continue };
        if lines[body].indent <= line.indent {
            continue;
        }
        let body_indent = lines[body].indent;
        let end = lines[body..].iter().position(|next| next.code && next.indent < body_indent).map(|at| body + at);
        let indent = &content[..content.len() - content.trim_start().len()];
        let Some(end) = end else {
            repairs.push((text.len()..text.len(), format!("\n{indent}}}\n")));
            continue;
        };
        let end_line = &lines[end];
        let end_content = text[end_line.range.clone()].trim_start();
        if end_content.starts_with(['}', ')', ']']) && end_line.indent == line.indent {
            continue;
        }
        // The last blank line of the body, when it is where the `}` was.
        if let Some(blank) = lines[body..end].iter().rev().find(|blank| text[blank.range.clone()].trim().is_empty()) {
            if blank.range.end == lines[end - 1].range.end {
                repairs.push((blank.range.clone(), format!("{indent}}}")));
            }
        }
        let first_word = end_content.split(|ch: char| !ch.is_alphanumeric()).next().unwrap_or("");
        if CONTINUATIONS.contains(&first_word) {
            let content_start = end_line.range.end - end_content.len();
            repairs.push((end_line.range.start..content_start, format!("{indent}}} ")));
        } else {
            repairs.push((end_line.range.start..end_line.range.start, format!("{indent}}}\n")));
        }
    }
    repairs
}

/// Each of `tokens` put in between two tokens of the line of `first_error` and of the line before it, the places
/// nearest the line's end first, at most `most` places per token; a place right after a `,` comes last (`f(,)`
/// parses, and is no call).
fn line_tokens(trial: &Trial<'_>, first_error: usize, tokens: &[&str], most: usize) -> Vec<Repair> {
    let document = trial.document;
    let text = &document.text;
    let mut leaves = Vec::new();
    leaves_in(document.tree.root_node(), window(text, first_error), &mut leaves);
    let mut places: Vec<usize> = leaves.into_iter().map(|leaf| leaf.end).collect();
    places.sort_unstable();
    places.dedup();
    let after_separator = |at: usize| text[..at].trim_end().ends_with(',');
    places.reverse();
    places.sort_by_key(|&at| after_separator(at));
    let mut repairs = Vec::new();
    for token in tokens {
        let fitting = places.iter().map(|&at| (at..at, (*token).to_owned())).filter(|repair| trial.parses(repair));
        repairs.extend(fitting.take(most));
    }
    repairs
}

/// The line of `at` and the line before it, to the end of the line of `at` (its line break included).
fn window(text: &str, at: usize) -> Range<usize> {
    let line_start = text[..at].rfind('\n').map_or(0, |found| found + 1);
    let start = text[..line_start.saturating_sub(1)].rfind('\n').map_or(0, |found| found + 1);
    let end = text[at..].find('\n').map_or(text.len(), |found| at + found + 1);
    start..end
}

/// Stray tokens of the lines around `anchor` (see [`window`]) taken out one at a time, the nearest `anchor`
/// first, where the file then parses (at most [`MAX_REPAIRS`]).
fn stray_tokens(trial: &Trial<'_>, anchor: usize) -> Vec<Repair> {
    let document = trial.document;
    let text = &document.text;
    let mut leaves = Vec::new();
    leaves_in(document.tree.root_node(), window(text, anchor), &mut leaves);
    // A closer, or a separator or `=` where nothing can precede it (after another separator or an opening
    // bracket); never an operator: `a +;` is an expression not yet written, not a stray `+`.
    leaves.retain(|leaf| match &text[leaf.clone()] {
        ")" | "]" | "}" => true,
        "," | ";" | "=" => text[..leaf.start].trim_end().ends_with([';', ',', '(', '[', '{', '=']),
        _ => false,
    });
    leaves.sort_by_key(|leaf| leaf.start.abs_diff(anchor));
    leaves
        .into_iter()
        .map(|leaf| (leaf, String::new()))
        .filter(|repair| trial.parses(repair))
        .take(MAX_REPAIRS)
        .collect()
}

/// The leaves (tokens the parser read, not assumed) under `node` that end in `window`.
fn leaves_in(node: Node<'_>, window: Range<usize>, out: &mut Vec<Range<usize>>) {
    if node.end_byte() < window.start || node.start_byte() > window.end {
        return;
    }
    if node.child_count() == 0 {
        if !node.is_missing() && window.contains(&node.end_byte()) {
            out.push(node.byte_range());
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        leaves_in(child, window.clone(), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spark_grammars::Lang;

    fn repaired(lang: Lang, text: &str) -> Vec<String> {
        let document = TaskDocument::parsed(lang, text);
        token_repairs(&document, 0).into_iter().map(|repair| applied(text, &repair)).collect()
    }

    #[test]
    fn a_blocks_lost_brace_goes_where_the_indentation_ends_the_block() {
        let broken = "fn f(x: u8) -> u8 {\n    if x > 1 {\n        x\n    } else {\n        0\n    \n}\n\nfn g() {}\n";
        let fixed = "fn f(x: u8) -> u8 {\n    if x > 1 {\n        x\n    } else {\n        0\n    }\n}\n\nfn g() {}\n";
        assert_eq!(repaired(Lang::Rust, broken).first().map(String::as_str), Some(fixed));
        let broken = "function f(x: number) {\n  if (x) {\n    return 1\n   else return 2\n}\n";
        let fixed = "function f(x: number) {\n  if (x) {\n    return 1\n  } else return 2\n}\n";
        assert_eq!(repaired(Lang::TypeScript, broken).first().map(String::as_str), Some(fixed));
    }

    #[test]
    fn a_lost_paren_or_semicolon_goes_where_the_line_parses() {
        let broken = "fn f(v: &[u8]) {\n    let n = v.iter(.count();\n}\n";
        assert_eq!(repaired(Lang::Rust, broken), ["fn f(v: &[u8]) {\n    let n = v.iter().count();\n}\n"]);
        let broken = "class A {\n  protected stop(: void {\n    // nothing\n  }\n}\n";
        assert_eq!(
            repaired(Lang::TypeScript, broken),
            ["class A {\n  protected stop(): void {\n    // nothing\n  }\n}\n"]
        );
        let broken = "function f(n: number) {\n  for (let i = 0; i < n i++) {\n    g(i)\n  }\n}\n";
        assert_eq!(
            repaired(Lang::TypeScript, broken),
            ["function f(n: number) {\n  for (let i = 0; i < n; i++) {\n    g(i)\n  }\n}\n"]
        );
    }

    #[test]
    fn a_paren_lost_before_a_comma_closes_the_call_not_an_empty_one() {
        let broken = "fn f(v: &[u8]) -> P {\n    P {\n        a: v.len(,\n        b: 2,\n    }\n}\n";
        let fixed = "fn f(v: &[u8]) -> P {\n    P {\n        a: v.len(),\n        b: 2,\n    }\n}\n";
        assert_eq!(repaired(Lang::Rust, broken).first().map(String::as_str), Some(fixed));
    }

    #[test]
    fn a_stray_token_is_taken_out() {
        let broken = "function f(a: number[]) {\n  return g(a[0]]) + 1\n}\n";
        assert_eq!(
            repaired(Lang::TypeScript, broken).first().map(String::as_str),
            Some("function f(a: number[]) {\n  return g(a[0]) + 1\n}\n")
        );
        let broken = "fn f(x: u8) -> u8 {\n    let y = = x + 1;\n    y\n}\n";
        assert_eq!(
            repaired(Lang::Rust, broken).first().map(String::as_str),
            Some("fn f(x: u8) -> u8 {\n    let y =  x + 1;\n    y\n}\n")
        );
    }

    #[test]
    fn nothing_is_guessed_in_a_file_that_parses() {
        assert!(repaired(Lang::Rust, "fn f() {\n    g();\n}\n").is_empty());
    }
}
