//! The document store's unit: a rope and, for languages with a grammar, a syntax tree kept current
//! incrementally (`Tree::edit` plus a reparse that reuses the old tree).

use std::time::Instant;

use ropey::Rope;
use spark_grammars::tree_sitter::{InputEdit, Point, Tree};
use spark_grammars::Lang;

use crate::position::{self, LspPosition, PositionEncoding};

/// Past this size a document is plain text: syntax work must never stall the server.
pub const MAX_SYNTAX_BYTES: usize = 8 * 1024 * 1024;

/// One incremental change: a range in the client's encoding (or none, for a whole-document replace).
#[derive(Debug, Clone)]
pub struct Change {
    pub range: Option<(LspPosition, LspPosition)>,
    pub text: String,
}

/// Cheap to clone: the rope shares its chunks and the tree its nodes.
#[derive(Clone)]
pub struct Document {
    /// The client's version: what edits and diagnostics name.
    pub version: i32,
    /// Bumped by every applied change, whatever versions the client sends: two snapshots with the same
    /// revision have the same text, which the client's version alone does not promise (a client whose
    /// versions go backwards can reuse one).
    pub revision: u64,
    pub language_id: String,
    pub lang: Option<Lang>,
    pub rope: Rope,
    pub tree: Option<Tree>,
    /// Set when a full parse ran out of time or the grammar gave up: the document stays plain text until its
    /// text is replaced wholesale, so that a pathological file costs one abandoned parse, not one per keystroke.
    pub syntax_gave_up: bool,
    /// The user's recent edits, merged keystroke by keystroke (what next-edit suggestions start from).
    pub edits: crate::edit_history::EditHistory,
}

/// What applying changes found worth a log line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChangeReport {
    pub clamped_positions: usize,
    pub inverted_ranges: usize,
}

impl Document {
    pub fn new(text: &str, language_id: &str, lang: Option<Lang>, version: i32) -> Document {
        let mut document = Document {
            version,
            revision: 0,
            language_id: language_id.to_owned(),
            lang,
            rope: Rope::from_str(text),
            tree: None,
            syntax_gave_up: false,
            edits: Default::default(),
        };
        document.reparse(false);
        document
    }

    /// Applies changes in order, then reparses once.
    pub fn apply_changes(&mut self, changes: &[Change], encoding: PositionEncoding, version: i32) -> ChangeReport {
        let mut report = ChangeReport::default();
        let mut incremental = true;
        for change in changes {
            match change.range {
                None => {
                    self.rope = Rope::from_str(&change.text);
                    self.tree = None;
                    self.syntax_gave_up = false;
                    self.edits.clear();
                    incremental = false;
                }
                Some((start, end)) => {
                    let start = position::to_byte(&self.rope, start, encoding);
                    let end = position::to_byte(&self.rope, end, encoding);
                    report.clamped_positions += usize::from(start.clamped) + usize::from(end.clamped);
                    let (start, end) = if end.byte < start.byte {
                        report.inverted_ranges += 1;
                        (end.byte, start.byte)
                    } else {
                        (start.byte, end.byte)
                    };
                    self.replace(start, end, &change.text);
                }
            }
        }
        self.version = version;
        self.revision += 1;
        self.reparse(incremental);
        report
    }

    /// Replaces bytes `start..end` (character boundaries) with `text`, and tells the tree.
    fn replace(&mut self, start: usize, end: usize, text: &str) {
        // The history takes only small changes: a huge one is not copied on the input path, it resets the history.
        let removed = if end - start + text.len() <= crate::edit_history::MAX_EDIT_BYTES {
            Some(self.rope.byte_slice(start..end).to_string())
        } else {
            None
        };
        let start_point = self.point(start);
        let old_end_point = self.point(end);
        let start_char = self.rope.byte_to_char(start);
        let end_char = self.rope.byte_to_char(end);
        self.rope.remove(start_char..end_char);
        self.rope.insert(start_char, text);
        let new_end = start + text.len();
        match &removed {
            Some(removed) => self.edits.record(start, removed, text, &self.rope),
            None => self.edits.clear(),
        }
        let new_end_point = self.point_of(new_end);
        if let Some(tree) = &mut self.tree {
            tree.edit(&InputEdit {
                start_byte: start,
                old_end_byte: end,
                new_end_byte: new_end,
                start_position: start_point,
                old_end_position: old_end_point,
                new_end_position: new_end_point,
            });
        }
    }

    /// Tree-sitter's point (row, byte column) of a byte offset, before an edit.
    fn point(&self, byte: usize) -> Point {
        self.point_of(byte)
    }

    fn point_of(&self, byte: usize) -> Point {
        let line = self.rope.byte_to_line(byte);
        Point { row: line, column: byte - self.rope.line_to_byte(line) }
    }

    fn reparse(&mut self, incremental: bool) {
        let Some(lang) = self.lang else { return };
        if self.rope.len_bytes() > MAX_SYNTAX_BYTES {
            if self.tree.is_some() || !self.syntax_gave_up {
                tracing::warn!(
                    bytes = self.rope.len_bytes(),
                    max = MAX_SYNTAX_BYTES,
                    "document too large for syntax; treated as plain text"
                );
            }
            self.tree = None;
            self.syntax_gave_up = true;
            return;
        }
        let old_tree = if incremental { self.tree.as_ref() } else { None };
        if old_tree.is_none() && self.syntax_gave_up {
            return;
        }
        let started = Instant::now();
        self.tree = crate::parse::rope(lang, &self.rope, old_tree);
        if self.tree.is_none() {
            self.syntax_gave_up = true;
            tracing::warn!(
                bytes = self.rope.len_bytes(),
                ms = started.elapsed().as_millis() as u64,
                "parse abandoned (time limit); the document is plain text until it is replaced"
            );
        }
    }

    pub fn text(&self) -> String {
        self.rope.to_string()
    }

    /// Byte offset of a position (clamped); logs nothing, the caller decides.
    pub fn offset(&self, position: LspPosition, encoding: PositionEncoding) -> position::Resolved {
        position::to_byte(&self.rope, position, encoding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: positions computed by walking the string, independent of the rope code.
    fn reference_position(text: &str, byte: usize, encoding: PositionEncoding) -> LspPosition {
        let before = &text[..byte];
        let line_start = before.rfind('\n').map(|idx| idx + 1).unwrap_or(0);
        let line = before.matches('\n').count() as u32;
        let column = &before[line_start..];
        LspPosition { line, character: position::text_len(column, encoding) as u32 }
    }

    fn char_boundary(text: &str, seed: usize) -> usize {
        let boundaries: Vec<usize> = text.char_indices().map(|(idx, _)| idx).chain([text.len()]).collect();
        boundaries[seed % boundaries.len()]
    }

    const PIECES: &[&str] =
        &["fn", " ", "main", "()", "{", "}", "\n", "😀", "测试", "e\u{301}", "let x = 1;", "\"", "//"];

    fn arb_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(PIECES), 0..30).prop_map(|pieces| pieces.concat())
    }

    fn arb_encoding() -> impl Strategy<Value = PositionEncoding> {
        prop_oneof![Just(PositionEncoding::Utf8), Just(PositionEncoding::Utf16), Just(PositionEncoding::Utf32)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn incremental_edits_match_a_fresh_parse(
            initial in arb_text(),
            edits in proptest::collection::vec((any::<usize>(), any::<usize>(), arb_text()), 1..12),
            encoding in arb_encoding(),
            lang in prop_oneof![Just(Lang::Rust), Just(Lang::TypeScript), Just(Lang::Tsx)],
        ) {
            let mut reference = initial.clone();
            let mut document = Document::new(&initial, lang.name(), Some(lang), 0);
            for (version, (a, b, inserted)) in edits.into_iter().enumerate() {
                let (start, end) = {
                    let (x, y) = (char_boundary(&reference, a), char_boundary(&reference, b));
                    (x.min(y), x.max(y))
                };
                let range = (reference_position(&reference, start, encoding), reference_position(&reference, end, encoding));
                reference.replace_range(start..end, &inserted);
                let report = document.apply_changes(&[Change { range: Some(range), text: inserted }], encoding, version as i32 + 1);
                prop_assert_eq!(report, ChangeReport::default());
                prop_assert_eq!(document.text(), reference.clone());
                let fresh = crate::parse::rope(lang, &Rope::from_str(&reference), None).unwrap();
                let incremental = document.tree.as_ref().unwrap().root_node();
                if fresh.root_node().has_error() {
                    // Error recovery after an edit may place ERROR nodes otherwise than a fresh parse does
                    // (tree-sitter promises the same tree for text it can parse, not the same recovery): both
                    // must still see an error.
                    prop_assert!(incremental.has_error(), "{}", incremental.to_sexp());
                } else {
                    prop_assert_eq!(incremental.to_sexp(), fresh.root_node().to_sexp());
                }
            }
        }
    }

    #[test]
    fn out_of_range_and_inverted_ranges_are_clamped_not_fatal() {
        let mut document = Document::new("abc\ndef", "rust", Some(Lang::Rust), 1);
        let far = LspPosition { line: 99, character: 99 };
        let start = LspPosition { line: 0, character: 1 };
        let report = document.apply_changes(
            &[Change { range: Some((far, start)), text: "X".into() }],
            PositionEncoding::Utf16,
            2,
        );
        assert_eq!(report, ChangeReport { clamped_positions: 1, inverted_ranges: 1 });
        assert_eq!(document.text(), "aX");
    }

    #[test]
    fn plain_text_for_languages_without_a_grammar() {
        let mut document = Document::new("hello", "markdown", None, 1);
        document.apply_changes(&[Change { range: None, text: "bye".into() }], PositionEncoding::Utf16, 2);
        assert!(document.tree.is_none());
        assert_eq!(document.text(), "bye");
    }
}
