//! Next-edit suggestions: from the user's recent edits of a document, the edits they are about to make elsewhere
//! in it (other uses of a renamed name, other calls of a function whose arguments changed), each checked before
//! it is offered: it applies to the revision it was computed for, is not inside or a reversal of the user's own
//! edit, changes something, and adds no syntax error (alone, and all of them together for "apply all").

pub mod model;
pub mod predict;
pub mod serve;

use spark_grammars::tree_sitter::{InputEdit, Point, Tree};
use spark_grammars::{count_errors_in, Lang};

pub use crate::edit_history::{Edit, EditHistory};
pub use predict::{Predicted, Source};
pub use serve::{NextEdit, NextEditModel, NextEditService, NextEdits};

/// The predictions that passed the checks, in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub edits: Vec<Predicted>,
    /// Applying every edit at once adds no syntax error either (what "apply all" offers).
    pub all_together: bool,
}

/// Why a prediction is not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It overlaps what the user just typed.
    TouchesTheUsersEdit,
    /// It replaces text with the same text.
    NoChange,
    /// It puts back what the user just replaced.
    Reversal,
    /// The document would have more syntax errors with it.
    AddsSyntaxError,
    /// The range is not inside the text or not on character boundaries.
    OutOfRange,
}

/// Past this size a document gets no next edits: the rules read the whole text and every check reparses it.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The checked predictions for the document `text` (parsed as `tree`) after the edits in `history`.
pub fn next_edits(lang: Lang, text: &str, tree: &Tree, history: &EditHistory) -> Verified {
    let Some(edit) = history.last() else { return Verified::default() };
    if text.len() > MAX_DOCUMENT_BYTES {
        return Verified::default();
    }
    let mut edits: Vec<Predicted> = predict::predict(lang, text, tree, history.edits())
        .into_iter()
        .filter(|predicted| match check(lang, text, tree, edit, std::slice::from_ref(predicted)) {
            Ok(()) => true,
            Err(refusal) => {
                tracing::debug!(?refusal, label = predicted.label, "next edit refused");
                false
            }
        })
        .collect();
    edits.sort_by_key(|predicted| predicted.start);
    let all_together = edits.len() > 1 && check(lang, text, tree, edit, &edits).is_ok();
    Verified { edits, all_together }
}

/// Checks replacements (sorted, not overlapping) against the user's edit and the syntax tree.
pub fn check(lang: Lang, text: &str, tree: &Tree, edit: &Edit, replacements: &[Predicted]) -> Result<(), Refusal> {
    for predicted in replacements {
        let Some(current) = text.get(predicted.start..predicted.end) else { return Err(Refusal::OutOfRange) };
        if current == predicted.new_text {
            return Err(Refusal::NoChange);
        }
        let touches = if predicted.start == predicted.end {
            edit.start < predicted.start && predicted.start < edit.end()
        } else {
            predicted.start < edit.end() && edit.start < predicted.end
        };
        if touches {
            return Err(Refusal::TouchesTheUsersEdit);
        }
        if !edit.new.is_empty() && current == edit.new && predicted.new_text == edit.old {
            return Err(Refusal::Reversal);
        }
    }
    if replacements.windows(2).any(|pair| pair[0].end > pair[1].start) {
        return Err(Refusal::OutOfRange);
    }
    let (new_text, new_tree) = apply(lang, text, tree, replacements).ok_or(Refusal::AddsSyntaxError)?;
    let errors_before = count_errors_in(tree.root_node(), 0, text.len());
    let errors_after = count_errors_in(new_tree.root_node(), 0, new_text.len());
    if errors_after > errors_before {
        return Err(Refusal::AddsSyntaxError);
    }
    Ok(())
}

/// The text with the replacements made, and its tree (reparsed incrementally from `tree`).
fn apply(lang: Lang, text: &str, tree: &Tree, replacements: &[Predicted]) -> Option<(String, Tree)> {
    let mut new_text = String::with_capacity(text.len());
    let mut tree = tree.clone();
    let mut copied = 0;
    // Edits are told to the tree back to front so that earlier offsets stay valid.
    for predicted in replacements {
        new_text.push_str(&text[copied..predicted.start]);
        new_text.push_str(&predicted.new_text);
        copied = predicted.end;
    }
    new_text.push_str(&text[copied..]);
    for predicted in replacements.iter().rev() {
        let new_end = predicted.start + predicted.new_text.len();
        let mut after_edit = String::with_capacity(new_end);
        after_edit.push_str(&text[..predicted.start]);
        after_edit.push_str(&predicted.new_text);
        tree.edit(&InputEdit {
            start_byte: predicted.start,
            old_end_byte: predicted.end,
            new_end_byte: new_end,
            start_position: point(text, predicted.start),
            old_end_position: point(text, predicted.end),
            new_end_position: point(&after_edit, new_end),
        });
    }
    let tree = crate::parse::text_from(lang, &new_text, Some(&tree))?;
    Some((new_text, tree))
}

/// Tree-sitter's point (row, byte column) of `byte` in `text`.
fn point(text: &str, byte: usize) -> Point {
    let before = &text.as_bytes()[..byte];
    let row = before.iter().filter(|&&b| b == b'\n').count();
    let column = before.iter().rev().position(|&b| b == b'\n').unwrap_or(before.len());
    Point { row, column }
}

#[cfg(test)]
mod tests;
