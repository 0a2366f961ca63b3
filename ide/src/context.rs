//! Context gathering: from a document and a cursor, the text windows, header and stop mode of a fill-in
//! request. The windows start on line boundaries snapped to fixed steps, so the prompt's start stays put while
//! the user types and the model's KV cache keeps matching.
//! Also the chunks of other recently used files that go before a prompt ([`other_files`]).

use dashmap::DashMap;
use spark_engine::StopMode;
use spark_grammars::tree_sitter::StreamingIterator;
use spark_grammars::{smallest_capture_near, tree_sitter, Lang};

use crate::config::{PromptWindow, Settings};
use crate::document::Document;
use crate::ring::{self, Ring};

/// Window sizes for one request.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub prefix_lines: usize,
    pub prefix_bytes: usize,
    pub suffix_lines: usize,
    pub suffix_bytes: usize,
    pub header_bytes: usize,
    pub max_lines: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            // Chosen by the evaluation (docs/eval.md): 32 and 8 lines made more lines right than 96 and 24, because
            // a cold prompt (a file just opened, a jump) is ready sooner.
            prefix_lines: 32,
            prefix_bytes: 32 * BYTES_PER_LINE,
            suffix_lines: 8,
            suffix_bytes: 8 * BYTES_PER_LINE,
            header_bytes: 1500,
            max_lines: 8,
        }
    }
}

impl Budget {
    /// A budget of `prefix_lines` before the cursor's line and `suffix_lines` after it, at most 64 bytes a line.
    pub fn lines(prefix_lines: usize, suffix_lines: usize) -> Budget {
        Budget {
            prefix_lines,
            prefix_bytes: prefix_lines.saturating_mul(BYTES_PER_LINE),
            suffix_lines,
            suffix_bytes: suffix_lines.saturating_mul(BYTES_PER_LINE),
            ..Budget::default()
        }
    }
}

/// The byte cap per budgeted line: long lines (minified code, data) do not blow up a prompt.
const BYTES_PER_LINE: usize = 64;

/// The most lines the window start moves by: typing within a step keeps the prompt's start fixed. A window of
/// fewer lines moves by its own length, so that it holds between one and two windows' worth of lines (a step
/// longer than the window made an 8-line window 8 to 39 lines long, and over its byte cap it fell to the
/// cursor's line alone).
const WINDOW_STEP_LINES: usize = 32;

/// What a fill-in request is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillContext {
    pub header: String,
    pub prefix: String,
    pub suffix: String,
    pub mode: StopMode,
    pub indent: String,
    pub max_lines: usize,
}

/// Gathers the context at `byte` (a character boundary). `path` names the file in the header, when known.
pub fn gather(document: &Document, byte: usize, path: Option<&str>, budget: &Budget) -> FillContext {
    let rope = &document.rope;
    let byte = byte.min(rope.len_bytes());
    let cursor_line = rope.byte_to_line(byte);
    let line_start = rope.line_to_byte(cursor_line);
    let line_end = line_end_byte(document, cursor_line);
    let line_prefix = rope.byte_slice(line_start..byte).to_string();
    let line_suffix = rope.byte_slice(byte..line_end).to_string();

    let step = budget.prefix_lines.clamp(1, WINDOW_STEP_LINES);
    let mut start_line = cursor_line.saturating_sub(budget.prefix_lines) / step * step;
    while start_line < cursor_line && byte - rope.line_to_byte(start_line) > budget.prefix_bytes {
        start_line = (start_line + step).min(cursor_line);
    }
    let window_start = rope.line_to_byte(start_line);
    let prefix = rope.byte_slice(window_start..byte).to_string();

    let suffix_end_line = (cursor_line + budget.suffix_lines).min(rope.len_lines().saturating_sub(1));
    let mut suffix_end = line_end_byte(document, suffix_end_line).max(byte);
    if suffix_end - byte > budget.suffix_bytes {
        suffix_end = rope.char_to_byte(rope.byte_to_char(byte + budget.suffix_bytes));
    }
    let suffix = rope.byte_slice(byte..suffix_end).to_string();

    let header = header(document, path, window_start, budget.header_bytes);
    let indent: String = line_prefix.chars().take_while(|ch| *ch == ' ' || *ch == '\t').collect();
    let (mode, max_lines) = if !line_suffix.trim().is_empty() {
        (StopMode::Line, 1)
    } else if line_prefix.trim().is_empty() {
        let after_opener = after_block_opener(document, byte, cursor_line);
        (StopMode::Block, if after_opener { budget.max_lines } else { budget.max_lines.min(4) })
    } else if ends_with_opener(&line_prefix) {
        (StopMode::Block, budget.max_lines)
    } else {
        // At the end of a non-empty line the user is writing a statement: the suggestion is the rest of it, one
        // line (or, when the line is done, the next one). Later lines would be generated until the deadline while
        // the line the user types waits for them: on 2 cores a code model writes ~6 tokens in a keystroke's
        // 225 ms, so a shown line came at the deadline instead of when it ended.
        (StopMode::Block, 1)
    };
    FillContext { header, prefix, suffix, mode, indent, max_lines }
}

/// Byte offset of the end of a line, before its line break.
fn line_end_byte(document: &Document, line: usize) -> usize {
    let rope = &document.rope;
    if line >= rope.len_lines() {
        return rope.len_bytes();
    }
    let slice = rope.line(line);
    let text_len = slice.len_bytes();
    let mut end = rope.line_to_byte(line) + text_len;
    let ends = slice.to_string();
    if ends.ends_with("\r\n") {
        end -= 2;
    } else if ends.ends_with('\n') || ends.ends_with('\r') {
        end -= 1;
    }
    end
}

fn ends_with_opener(line_prefix: &str) -> bool {
    let trimmed = line_prefix.trim_end();
    ["{", "(", "[", "=>"].iter().any(|opener| trimmed.ends_with(opener))
}

/// Whether the cursor sits on a blank line just inside a block that opens on the previous non-blank line.
/// With a syntax tree the block comes from the grammar's `blocks` query; without one, from the text.
fn after_block_opener(document: &Document, byte: usize, cursor_line: usize) -> bool {
    let rope = &document.rope;
    let previous_line = (0..cursor_line).rev().find(|line| !rope.line(*line).chars().all(char::is_whitespace));
    let Some(previous_line) = previous_line else {
        return false;
    };
    if let (Some(lang), Some(tree)) = (document.lang, document.tree.as_ref()) {
        let blocks = &lang.queries().blocks;
        if let Some(block) = smallest_capture_near(blocks, "block", tree.root_node(), rope_text(rope), byte, byte) {
            return block.start_position().row == previous_line;
        }
    }
    ends_with_opener(&rope.line(previous_line).to_string())
}

/// The stable front of the prompt: the file's path as a comment, then the imports that the window left out.
fn header(document: &Document, path: Option<&str>, window_start: usize, max_bytes: usize) -> String {
    let comment = document.lang.map(Lang::line_comment).unwrap_or("//");
    let mut header = String::new();
    if let Some(path) = path {
        header.push_str(&format!("{comment} {path}\n"));
    }
    if window_start == 0 {
        return header;
    }
    let (Some(lang), Some(tree)) = (document.lang, document.tree.as_ref()) else {
        return header;
    };
    // Only the imports are copied out of the rope, never the text before the window.
    let rope = &document.rope;
    let mut cursor = tree_sitter::QueryCursor::new();
    cursor.set_byte_range(0..window_start);
    let query = &lang.queries().imports;
    let mut matches = cursor.matches(query, tree.root_node(), rope_text(rope));
    while let Some(found) = matches.next() {
        for capture in found.captures {
            let range = capture.node.byte_range();
            if range.end > window_start {
                continue;
            }
            if header.len() + range.len() + 1 > max_bytes {
                return header;
            }
            header.extend(rope.byte_slice(range).chunks());
            header.push('\n');
        }
    }
    header
}

/// The text of a node, read from the rope's chunks (for query predicates), without copying the document.
fn rope_text<'r>(rope: &'r ropey::Rope) -> impl FnMut(tree_sitter::Node) -> std::vec::IntoIter<&'r [u8]> + 'r {
    move |node| {
        let chunks: Vec<&[u8]> = rope.byte_slice(node.byte_range()).chunks().map(str::as_bytes).collect();
        chunks.into_iter()
    }
}

/// The last two segments of a URI or path, for the prompt header ("src/lib.rs").
pub fn display_path(uri_or_path: &str) -> String {
    let path = uri_or_path.split(['?', '#']).next().unwrap_or(uri_or_path);
    let segments: Vec<&str> = path.rsplit('/').filter(|segment| !segment.is_empty()).take(2).collect();
    segments.into_iter().rev().collect::<Vec<_>>().join("/")
}

/// Chunks of other recently opened or edited documents (the ring's places, read from `documents`) for the front
/// of a prompt in `uri`, never from excluded files, within `context.otherFilesBytes`.
pub fn other_files(
    ring: &Ring<String>,
    documents: &DashMap<String, Document>,
    uri: &str,
    settings: &Settings,
) -> String {
    let budget = settings.context.other_files_bytes.unwrap_or(PromptWindow::WIDE.other_files_bytes);
    if budget == 0 {
        return String::new();
    }
    let comment = documents.get(uri).and_then(|document| document.lang).map_or("//", |lang| lang.line_comment());
    let mut chunks = Vec::new();
    let mut used = 0;
    for place in ring.chunks_for(&uri.to_owned()) {
        if used >= budget || settings.is_excluded(&place.key) {
            continue;
        }
        let Some(document) = documents.get(&place.key) else {
            continue;
        };
        let text = ring::cut(&document, place.start_line, budget - used);
        used += text.len();
        chunks.push((display_path(&place.key), text));
    }
    ring::render(&chunks, comment, budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(fixture: &str) -> FillContext {
        let byte = fixture.find("$0").expect("fixture has a $0 cursor");
        let text = fixture.replace("$0", "");
        let document = Document::new(&text, "rust", Some(Lang::Rust), 1);
        gather(&document, byte, Some("src/lib.rs"), &Budget::default())
    }

    #[test]
    fn mode_table() {
        let cases = [
            ("fn f() {\n    let x = $0\n}\n", StopMode::Block, 1),
            ("fn f() {\n    foo($0);\n}\n", StopMode::Line, 1),
            ("fn f() {\n    $0\n}\n", StopMode::Block, 8),
            ("fn f() {\n    a();\n\n    $0\n}\n", StopMode::Block, 4),
            ("fn f() {$0\n}\n", StopMode::Block, 8),
        ];
        for (fixture, mode, max_lines) in cases {
            let got = context(fixture);
            assert_eq!((got.mode, got.max_lines), (mode, max_lines), "{fixture:?}");
        }
    }

    #[test]
    fn windows_and_header() {
        let got = context("use std::io;\nfn f() {\n    let x = $0;\n}\n");
        assert_eq!(got.header, "// src/lib.rs\n");
        assert_eq!(got.prefix, "use std::io;\nfn f() {\n    let x = ");
        assert_eq!(got.suffix, ";\n}\n");
        assert_eq!(got.indent, "    ");
    }

    #[test]
    fn imports_left_out_of_the_window_go_to_the_header_and_the_start_is_stable() {
        let mut text = String::from("use std::collections::HashMap;\n");
        for idx in 0..200 {
            text.push_str(&format!("fn f{idx}() {{}}\n"));
        }
        let document = Document::new(&text, "rust", Some(Lang::Rust), 1);
        let at = |line: usize| document.rope.line_to_byte(line) + 3;
        let first = gather(&document, at(150), None, &Budget::default());
        assert!(first.header.contains("use std::collections::HashMap;"), "{}", first.header);
        let second = gather(&document, at(151), None, &Budget::default());
        let start_of = |ctx: &FillContext| ctx.prefix.lines().next().unwrap().to_owned();
        assert_eq!(start_of(&first), start_of(&second));
    }

    #[test]
    fn a_narrow_window_holds_one_to_two_of_its_lengths_of_lines_above_the_cursor() {
        let text: String = (0..200).map(|idx| format!("fn f{idx}() {{}}\n")).collect();
        let document = Document::new(&text, "rust", Some(Lang::Rust), 1);
        let budget = Budget::lines(8, 2);
        for line in 40..80 {
            let got = gather(&document, document.rope.line_to_byte(line), None, &budget);
            let lines_above = got.prefix.matches('\n').count();
            assert!((8..16).contains(&lines_above), "line {line}: {lines_above} lines above");
        }
    }
}
