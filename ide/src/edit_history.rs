//! The recent edits of one document, as compact replacements: keystrokes that touch the previous edit are merged
//! into it, so that selecting `count` and typing `total` is one edit `count` → `total`, not six.

use std::time::Instant;

use ropey::Rope;

/// How many separate edits a document remembers.
pub const HISTORY_LEN: usize = 8;

/// A bigger change (a paste, a formatter's rewrite) is no seed for a prediction: the history starts again.
pub const MAX_EDIT_BYTES: usize = 64 * 1024;

/// One edit: `old` was replaced by `new`, which now starts at byte `start` of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub old: String,
    pub new: String,
    pub at: Instant,
}

impl Edit {
    /// The end of `new` in the current text.
    pub fn end(&self) -> usize {
        self.start + self.new.len()
    }
}

/// Oldest first; offsets are kept current as later edits move the text.
#[derive(Debug, Clone, Default)]
pub struct EditHistory {
    edits: Vec<Edit>,
}

impl EditHistory {
    pub fn last(&self) -> Option<&Edit> {
        self.edits.last()
    }

    pub fn edits(&self) -> &[Edit] {
        &self.edits
    }

    /// Forgets everything (the whole text was replaced).
    pub fn clear(&mut self) {
        self.edits.clear();
    }

    /// Records that bytes `start..start + removed.len()` of the previous text were replaced by `inserted`;
    /// `after` is the text once replaced. A change touching the last edit is merged into it.
    pub fn record(&mut self, start: usize, removed: &str, inserted: &str, after: &Rope) {
        if removed.len() + inserted.len() > MAX_EDIT_BYTES {
            self.edits.clear();
            return;
        }
        let (a, b) = (start, start + removed.len());
        let growth = inserted.len() as isize - removed.len() as isize;
        let merged = match self.edits.pop() {
            Some(last) if a <= last.end() && b >= last.start => Some(merge(last, a, b, removed, inserted, after)),
            Some(last) => {
                self.edits.push(last);
                None
            }
            None => None,
        };
        // The others: before the change they stay, after it they move, overlapping it they no longer describe
        // the text and go.
        self.edits.retain_mut(|edit| {
            if edit.end() <= a {
                true
            } else if edit.start >= b {
                edit.start = (edit.start as isize + growth) as usize;
                true
            } else {
                false
            }
        });
        let edit = merged.unwrap_or_else(|| Edit {
            start,
            old: removed.to_owned(),
            new: inserted.to_owned(),
            at: Instant::now(),
        });
        if edit.old != edit.new {
            self.edits.push(edit);
        }
        if self.edits.len() > HISTORY_LEN {
            self.edits.remove(0);
        }
    }
}

/// `last` with a change of bytes `a..b` of the previous text that touches it.
fn merge(last: Edit, a: usize, b: usize, removed: &str, inserted: &str, after: &Rope) -> Edit {
    let (s, e) = (last.start, last.end());
    let (u0, u1) = (a.min(s), b.max(e));
    // What the union held before `last`: the text it kept around `last`'s own replacement, from `removed`.
    let mut old = String::new();
    if a < s {
        old.push_str(&removed[..s - a]);
    }
    old.push_str(&last.old);
    if b > e {
        old.push_str(&removed[e - a..]);
    }
    let new_len = (u1 - u0) - (b - a) + inserted.len();
    let new = after.byte_slice(u0..u0 + new_len).to_string();
    Edit { start: u0, old, new, at: Instant::now() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies replacements to `text` and records each, as the document does.
    fn replay(text: &str, changes: &[(usize, usize, &str)]) -> (String, EditHistory) {
        let mut rope = Rope::from_str(text);
        let mut history = EditHistory::default();
        for &(start, end, inserted) in changes {
            let removed = rope.byte_slice(start..end).to_string();
            let (from, to) = (rope.byte_to_char(start), rope.byte_to_char(end));
            rope.remove(from..to);
            rope.insert(from, inserted);
            history.record(start, &removed, inserted, &rope);
        }
        (rope.to_string(), history)
    }

    fn pairs(history: &EditHistory) -> Vec<(usize, &str, &str)> {
        history.edits().iter().map(|edit| (edit.start, edit.old.as_str(), edit.new.as_str())).collect()
    }

    #[test]
    fn typing_over_a_selected_word_is_one_edit() {
        // Select `count`, type `t`, then `otal`, one key at a time.
        let (text, history) =
            replay("let count = 1;", &[(4, 9, "t"), (5, 5, "o"), (6, 6, "t"), (7, 7, "a"), (8, 8, "l")]);
        assert_eq!(text, "let total = 1;");
        assert_eq!(pairs(&history), vec![(4, "count", "total")]);
    }

    #[test]
    fn backspacing_a_word_and_typing_another_is_one_edit() {
        let mut changes = Vec::new();
        for end in (5..=9).rev() {
            changes.push((end - 1, end, ""));
        }
        changes.extend([(4, 4, "s"), (5, 5, "u"), (6, 6, "m")]);
        let (text, history) = replay("let count = 1;", &changes);
        assert_eq!(text, "let sum = 1;");
        assert_eq!(pairs(&history), vec![(4, "count", "sum")]);
    }

    #[test]
    fn a_later_edit_elsewhere_keeps_the_earlier_one_at_its_moved_place() {
        let (text, history) = replay("a b c", &[(4, 5, "cc"), (0, 1, "xyz")]);
        assert_eq!(text, "xyz b cc");
        assert_eq!(pairs(&history), vec![(6, "c", "cc"), (0, "a", "xyz")]);
    }

    #[test]
    fn typing_then_deleting_the_same_text_leaves_no_edit() {
        let (text, history) = replay("ab", &[(1, 1, "x"), (1, 2, "")]);
        assert_eq!(text, "ab");
        assert!(history.edits().is_empty());
    }

    #[test]
    fn an_edit_overlapping_an_older_one_replaces_its_record() {
        let (text, history) = replay("one two three", &[(0, 3, "1"), (2, 5, "x"), (0, 1, "ONE")]);
        assert_eq!(text, "ONE x three");
        // The third change touches the first edit, which is not the last: the first goes, the third stands.
        assert_eq!(pairs(&history), vec![(4, "two", "x"), (0, "1", "ONE")]);
    }

    #[test]
    fn the_history_keeps_the_most_recent_edits() {
        let changes: Vec<(usize, usize, &str)> = (0..HISTORY_LEN + 3).map(|i| (i * 2, i * 2 + 1, "y")).collect();
        let (_, history) = replay(&"x ".repeat(HISTORY_LEN + 3), &changes);
        assert_eq!(history.edits().len(), HISTORY_LEN);
        assert_eq!(history.last().map(|edit| edit.start), Some((HISTORY_LEN + 2) * 2));
    }
}
