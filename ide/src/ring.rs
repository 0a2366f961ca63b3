//! Extra context from other files (the llama.vscode idea): a small ring of places in recently opened or edited
//! documents. A ghost-text prompt starts with chunks of those places in the *other* files, oldest first, so the
//! model sees the code the user works with beside the current file.
//!
//! The ring holds places, not text: a chunk is cut from the document store when a prompt is built, on line
//! boundaries snapped to fixed steps. While the user types in one file, the other files do not change, so the
//! chunks (and the KV-cached front of the prompt) stay the same keystroke after keystroke.

use std::collections::VecDeque;

use crate::document::Document;

/// Lines in one chunk.
pub const CHUNK_LINES: usize = 24;
/// Places the ring keeps (the oldest goes first).
const MAX_PLACES: usize = 8;
/// Chunk starts snap to multiples of this, so that nearby edits share one chunk.
const SNAP_LINES: usize = CHUNK_LINES / 2;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Place<K> {
    key: K,
    start_line: usize,
}

/// Recently opened or edited places of documents named by `K`, oldest first.
#[derive(Debug)]
pub struct Ring<K> {
    places: VecDeque<Place<K>>,
}

impl<K> Default for Ring<K> {
    fn default() -> Self {
        Ring { places: VecDeque::new() }
    }
}

/// Where a chunk for a prompt comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<K> {
    pub key: K,
    pub start_line: usize,
}

impl<K: Clone + PartialEq> Ring<K> {
    /// Records that `line` of the document `key` was opened or edited; a place already in the ring moves to the
    /// newest end, so that the ring's order (and the prompts of other files) changes only when the user moves.
    pub fn touch(&mut self, key: &K, line: usize) {
        let start_line = line.saturating_sub(SNAP_LINES / 2) / SNAP_LINES * SNAP_LINES;
        let place = Place { key: key.clone(), start_line };
        if self.places.back() == Some(&place) {
            return;
        }
        // One place per document region: an overlapping chunk of the same document is replaced.
        self.places.retain(|old| old.key != place.key || old.start_line.abs_diff(place.start_line) >= CHUNK_LINES);
        self.places.push_back(place);
        while self.places.len() > MAX_PLACES {
            self.places.pop_front();
        }
    }

    /// Forgets a closed document.
    pub fn forget(&mut self, key: &K) {
        self.places.retain(|place| place.key != *key);
    }

    /// The places to cut chunks from for a prompt in `current`, newest first (the caller stops at its budget).
    pub fn chunks_for(&self, current: &K) -> Vec<Chunk<K>> {
        self.places
            .iter()
            .rev()
            .filter(|place| place.key != *current)
            .map(|place| Chunk { key: place.key.clone(), start_line: place.start_line })
            .collect()
    }
}

/// The text of a chunk: `CHUNK_LINES` lines from `start_line` (fewer at the end of the document), at most
/// `max_bytes` (whole lines), or nothing when the document is shorter or the first line alone is too long.
pub fn cut(document: &Document, start_line: usize, max_bytes: usize) -> String {
    let rope = &document.rope;
    let n_lines = rope.len_lines();
    if start_line >= n_lines {
        return String::new();
    }
    let mut text = String::new();
    for line in start_line..(start_line + CHUNK_LINES).min(n_lines) {
        let line = rope.line(line);
        if text.len() + line.len_bytes() > max_bytes {
            break;
        }
        text.extend(line.chunks());
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Renders chunks (each `(display path, text)`, newest first) into the prompt's front: oldest first, each under
/// a comment naming its file, within `max_bytes` in all (newer chunks win the budget).
pub fn render(chunks: &[(String, String)], comment: &str, max_bytes: usize) -> String {
    let mut kept = Vec::new();
    let mut used = 0;
    for (path, text) in chunks {
        if text.trim().is_empty() {
            continue;
        }
        let size = comment.len() + path.len() + 2 + text.len();
        if used + size > max_bytes {
            continue;
        }
        used += size;
        kept.push((path, text));
    }
    let mut rendered = String::with_capacity(used);
    for (path, text) in kept.into_iter().rev() {
        rendered.push_str(comment);
        rendered.push(' ');
        rendered.push_str(path);
        rendered.push('\n');
        rendered.push_str(text);
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_snap_replace_overlaps_and_keep_order() {
        let mut ring = Ring::<String>::default();
        ring.touch(&"a".to_owned(), 0);
        ring.touch(&"b".to_owned(), 40);
        ring.touch(&"b".to_owned(), 41);
        ring.touch(&"c".to_owned(), 3);
        let keys = |ring: &Ring<String>| ring.places.iter().map(|p| (p.key.clone(), p.start_line)).collect::<Vec<_>>();
        assert_eq!(keys(&ring), [("a".into(), 0), ("b".into(), 24), ("c".into(), 0)]);
        // Typing on in "c" moves nothing: the prompts of "a" and "b" keep their front.
        ring.touch(&"c".to_owned(), 4);
        assert_eq!(keys(&ring), [("a".into(), 0), ("b".into(), 24), ("c".into(), 0)]);
        // An edit far away in "a" is a new place; "a"'s first place stays.
        ring.touch(&"a".to_owned(), 200);
        assert_eq!(
            ring.chunks_for(&"c".to_owned()).iter().map(|c| (c.key.as_str(), c.start_line)).collect::<Vec<_>>(),
            [("a", 192), ("b", 24), ("a", 0)]
        );
        ring.forget(&"a".to_owned());
        assert_eq!(keys(&ring), [("b".into(), 24), ("c".into(), 0)]);
        for idx in 0..20 {
            ring.touch(&format!("f{idx}"), 0);
        }
        assert_eq!(ring.places.len(), MAX_PLACES);
    }

    #[test]
    fn cut_takes_whole_lines_within_the_budget() {
        let text: String = (0..100).map(|idx| format!("line {idx}\n")).collect();
        let document = Document::new(&text, "rust", None, 1);
        let chunk = cut(&document, 12, 10_000);
        assert!(chunk.starts_with("line 12\n") && chunk.ends_with("line 35\n"), "{chunk}");
        assert_eq!(cut(&document, 12, 17), "line 12\nline 13\n");
        assert_eq!(cut(&document, 500, 10_000), "");
    }

    #[test]
    fn render_keeps_newest_within_budget_and_prints_oldest_first() {
        let chunks = vec![
            ("new.rs".to_owned(), "fn new() {}\n".to_owned()),
            ("mid.rs".to_owned(), "x".repeat(500) + "\n"),
            ("old.rs".to_owned(), "fn old() {}\n".to_owned()),
        ];
        assert_eq!(render(&chunks, "//", 100), "// old.rs\nfn old() {}\n// new.rs\nfn new() {}\n");
        assert_eq!(render(&chunks, "//", 0), "");
    }
}
