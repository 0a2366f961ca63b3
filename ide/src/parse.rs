//! Every parse Spark makes goes through here, with one time limit: the document's incremental reparse, the
//! check of a ghost-text insertion and the whole-file parse of a task candidate. A grammar that gives up or a
//! parse that runs out of time gives `None`; callers treat the text as unparsed (a document becomes plain text,
//! a candidate is refused).

use std::time::{Duration, Instant};

use ropey::Rope;
use spark_grammars::tree_sitter::{ParseOptions, ParseState, Point, Tree};
use spark_grammars::Lang;

/// A parse that takes longer than this is abandoned.
pub const PARSE_TIME_LIMIT: Duration = Duration::from_millis(500);

/// Parses a rope chunk by chunk, reusing `old_tree` (already told about the edit) when given.
pub fn rope(lang: Lang, rope: &Rope, old_tree: Option<&Tree>) -> Option<Tree> {
    let len = rope.len_bytes();
    let mut read = |byte: usize, _: Point| -> &[u8] {
        if byte >= len {
            return &[];
        }
        let (chunk, chunk_byte, _, _) = rope.chunk_at_byte(byte);
        &chunk.as_bytes()[byte - chunk_byte..]
    };
    limited(lang, &mut read, old_tree)
}

/// Parses a whole text from scratch (a task candidate); logs when it is abandoned.
pub fn text(lang: Lang, source: &str) -> Option<Tree> {
    text_from(lang, source, None)
}

/// Parses a text, reusing `old_tree` (already told about the edits) when given; logs when it is abandoned.
pub fn text_from(lang: Lang, source: &str, old_tree: Option<&Tree>) -> Option<Tree> {
    let bytes = source.as_bytes();
    let mut read = |byte: usize, _: Point| -> &[u8] { bytes.get(byte..).unwrap_or(&[]) };
    let tree = limited(lang, &mut read, old_tree);
    if tree.is_none() {
        tracing::warn!(bytes = source.len(), "candidate parse abandoned (time limit or grammar)");
    }
    tree
}

fn limited<'a>(lang: Lang, read: &mut impl FnMut(usize, Point) -> &'a [u8], old_tree: Option<&Tree>) -> Option<Tree> {
    let started = Instant::now();
    let mut too_slow = |_: &ParseState| started.elapsed() > PARSE_TIME_LIMIT;
    let options = ParseOptions::new().progress_callback(&mut too_slow);
    lang.parser().parse_with_options(read, old_tree, Some(options))
}
