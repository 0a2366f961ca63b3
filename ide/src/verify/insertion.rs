//! Checks on a suggestion before anyone sees it: inserted at the cursor, it must not add a syntax error to
//! the lines it touches. A block suggestion that fails is cut to its longest clean prefix of lines.

use ropey::Rope;
use spark_grammars::syntax_errors;
use spark_grammars::tree_sitter::{InputEdit, Node, Point};

use crate::document::Document;

/// The suggestion as it may be shown, or `None`. Documents without a grammar or a tree are not checked.
pub fn check_insertion(document: &Document, byte: usize, suggestion: &str) -> Option<String> {
    let (Some(lang), Some(tree)) = (document.lang, document.tree.as_ref()) else {
        return Some(suggestion.to_owned());
    };
    // A one-line suggestion that opens more brackets than it closes (a block header) cannot parse until the
    // user writes the body; it is judged by the stop rules alone.
    if !suggestion.contains('\n') && spark_grammars::brackets::bracket_depth(suggestion) > 0 {
        return Some(suggestion.to_owned());
    }
    let rope = &document.rope;
    let line_start = rope.line_to_byte(rope.byte_to_line(byte));
    let old_line_end = line_end(rope, byte);
    let before = errors_in(tree.root_node(), line_start, old_line_end);
    let mut candidate = suggestion.to_owned();
    loop {
        let mut new_rope = rope.clone();
        let char_idx = new_rope.byte_to_char(byte);
        new_rope.insert(char_idx, &candidate);
        // Incremental: the document's tree, told about the insertion, so that a check costs what the edit
        // touches and not a parse of the whole file (a large file would hold a handler for the parse limit).
        let mut old_tree = tree.clone();
        old_tree.edit(&insertion_edit(rope, &new_rope, byte, candidate.len()));
        let new_tree = crate::parse::rope(lang, &new_rope, Some(&old_tree))?;
        let new_line_end = line_end(&new_rope, byte + candidate.len());
        let after = errors_in(new_tree.root_node(), line_start, new_line_end);
        // Clean, or no worse than before in both the number and the extent of errors (the user may be in
        // the middle of a statement the suggestion does not finish).
        if after.count == 0 || (after.count <= before.count && after.bytes <= before.bytes) {
            return Some(candidate);
        }
        // Drop the last line and try again; nothing is left once the first line fails.
        let last_newline = candidate.trim_end().rfind('\n')?;
        candidate.truncate(last_newline);
        if candidate.trim().is_empty() {
            return None;
        }
    }
}

/// The tree edit for `inserted` bytes at `byte` of `old`, giving `new`.
fn insertion_edit(old: &Rope, new: &Rope, byte: usize, inserted: usize) -> InputEdit {
    let point = |rope: &Rope, byte: usize| {
        let row = rope.byte_to_line(byte);
        Point { row, column: byte - rope.line_to_byte(row) }
    };
    InputEdit {
        start_byte: byte,
        old_end_byte: byte,
        new_end_byte: byte + inserted,
        start_position: point(old, byte),
        old_end_position: point(old, byte),
        new_end_position: point(new, byte + inserted),
    }
}

/// Errors overlapping a byte range: how many, and how many bytes they cover.
#[derive(Debug, Clone, Copy)]
struct Errors {
    count: usize,
    bytes: usize,
}

fn errors_in(root: Node<'_>, start: usize, end: usize) -> Errors {
    let mut errors = Errors { count: 0, bytes: 0 };
    for node in syntax_errors(root, 256) {
        let range = node.byte_range();
        if range.start <= end && range.end >= start {
            errors.count += 1;
            errors.bytes += range.end.min(end).saturating_sub(range.start.max(start));
        }
    }
    errors
}

fn line_end(rope: &Rope, byte: usize) -> usize {
    let line = rope.byte_to_line(byte.min(rope.len_bytes()));
    let next = line + 1;
    if next >= rope.len_lines() {
        rope.len_bytes()
    } else {
        rope.line_to_byte(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spark_grammars::Lang;

    fn check(fixture: &str, suggestion: &str) -> Option<String> {
        let byte = fixture.find("$0").unwrap();
        let document = Document::new(&fixture.replace("$0", ""), "rust", Some(Lang::Rust), 1);
        check_insertion(&document, byte, suggestion)
    }

    #[test]
    fn table() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("fn f() {\n    let x = $0;\n}\n", "1 + 2", Some("1 + 2")),
            ("fn f() {\n    let x = $0;\n}\n", "1 + + ) 2", None),
            ("fn f() {\n    $0\n}\n", "let a = 1;\n    let b = 2;\n    ) oops (", Some("let a = 1;\n    let b = 2;")),
            ("fn f() {\n    $0\n}\n", "if a {", Some("if a {")),
            ("fn f() {\n    let x = $0\n}\n", "3;", Some("3;")),
        ];
        for (fixture, suggestion, expected) in cases {
            assert_eq!(check(fixture, suggestion).as_deref(), *expected, "{fixture:?} + {suggestion:?}");
        }
        let plain = Document::new("anything (", "markdown", None, 1);
        assert_eq!(check_insertion(&plain, 3, ")))").as_deref(), Some(")))"));
    }
}
