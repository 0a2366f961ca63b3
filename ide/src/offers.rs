//! What a place in a document offers before any model runs: its syntax errors (Spark's own diagnostics and the
//! targets of a fix) and the function a test could be written for. The front ends list actions from these; the
//! grammars' queries stay behind this module.

use ropey::Rope;
use spark_grammars::{smallest_capture, syntax_errors as error_nodes};

use crate::document::Document;
use crate::tasks::{self, TaskDocument};

/// One ERROR or MISSING node of a document's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The span to show (a zero-width MISSING node widened to the character before it).
    pub start: usize,
    pub end: usize,
    /// The node's own bytes.
    pub node_start: usize,
    pub node_end: usize,
    pub message: String,
}

/// The first `limit` syntax errors of `document` (none without a tree).
pub fn syntax_errors(document: &Document, limit: usize) -> Vec<SyntaxError> {
    let Some(tree) = document.tree.as_ref() else { return Vec::new() };
    error_nodes(tree.root_node(), limit)
        .into_iter()
        .map(|node| {
            let (start, end) = visible_span(&document.rope, node.start_byte(), node.end_byte());
            SyntaxError {
                start,
                end,
                node_start: node.start_byte(),
                node_end: node.end_byte(),
                message: error_message(&node, &document.rope),
            }
        })
        .collect()
}

/// The name of the function around `at` that tests could be generated for, if there is one.
pub fn function_to_test(document: &TaskDocument, at: usize) -> Option<String> {
    let queries = document.lang.queries();
    let function =
        smallest_capture(&queries.functions, "function", document.tree.root_node(), document.text.as_bytes(), at, at)?;
    tasks::function_at(document, function.start_byte().max(at)).map(|(_, name)| name)
}

fn error_message(node: &spark_grammars::tree_sitter::Node<'_>, rope: &Rope) -> String {
    if node.is_missing() {
        let kind = node.kind();
        if kind.chars().all(|ch| ch.is_ascii_punctuation()) {
            return format!("syntax error: missing `{kind}`");
        }
        return format!("syntax error: missing {}", kind.replace('_', " "));
    }
    let start = node.start_byte().min(rope.len_bytes());
    let end = node.end_byte().min(rope.len_bytes()).min(start + 40);
    let end = rope.char_to_byte(rope.byte_to_char(end));
    let text = rope.byte_slice(start..end).to_string();
    let text = text.lines().next().unwrap_or("").trim();
    if text.is_empty() {
        "syntax error".into()
    } else {
        format!("syntax error near `{text}`")
    }
}

/// A zero-width error (a MISSING node) is widened to the character before it, so that editors draw it and a
/// cursor on it finds its diagnostic.
fn visible_span(rope: &Rope, start: usize, end: usize) -> (usize, usize) {
    if start < end || start == 0 {
        return (start, end);
    }
    let char_idx = rope.byte_to_char(start.min(rope.len_bytes()));
    let previous = rope.char_to_byte(char_idx.saturating_sub(1));
    if rope.byte_slice(previous..start).to_string().contains('\n') {
        (start, end)
    } else {
        (previous, end)
    }
}
