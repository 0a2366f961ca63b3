//! The workspace's side of next-edit suggestions: the checked predictions of an open document in the front end's
//! position encoding, computed once per revision of the document.

use std::sync::Arc;

use crate::position::{self, LspPosition};
use crate::workspace::Workspace;

use super::Verified;

/// The next edits of one document at one version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NextEdits {
    /// The version the edits apply to (the front end sends it to the editor).
    pub version: i32,
    pub revision: u64,
    /// Ordered from the first one after the position asked about, wrapping around.
    pub edits: Vec<NextEdit>,
    /// All the edits together add no syntax error ("apply all").
    pub all_together: bool,
    /// Where the user's last edit is (its new text), when there is one.
    pub last_edit: Option<(LspPosition, LspPosition)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextEdit {
    pub start: LspPosition,
    pub end: LspPosition,
    pub new_text: String,
    pub label: String,
    pub source: &'static str,
}

/// The last computation: (uri, revision, result).
pub(crate) type NextEditCache = std::sync::Mutex<Option<(String, u64, Arc<Verified>)>>;

impl Workspace {
    /// The next edits predicted for `uri` from its recent edits, ordered from `position` (else from the end of
    /// the last edit). `None` when the document is not open; no edits when the feature is off, the file is
    /// excluded, it has no syntax tree or nothing was predicted and verified.
    pub fn next_edits(&self, uri: &str, position: Option<LspPosition>) -> Option<NextEdits> {
        let document = self.document(uri)?;
        let mut answer = NextEdits { version: document.version, revision: document.revision, ..NextEdits::default() };
        let settings = self.settings();
        let (Some(lang), Some(tree)) = (document.lang, document.tree.as_ref()) else { return Some(answer) };
        if !settings.next_edit.enabled || settings.is_excluded(uri) {
            return Some(answer);
        }
        let Some(last) = document.edits.last() else { return Some(answer) };
        let cached = {
            let cache = self.next_edit_cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            cache
                .as_ref()
                .filter(|(u, revision, _)| u == uri && *revision == document.revision)
                .map(|(_, _, v)| v.clone())
        };
        let verified = match cached {
            Some(verified) => verified,
            None => {
                let text = document.text();
                let verified = Arc::new(super::next_edits(lang, &text, tree, &document.edits));
                *self.next_edit_cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                    Some((uri.to_owned(), document.revision, verified.clone()));
                verified
            }
        };
        let encoding = self.encoding();
        answer.last_edit = Some((
            position::to_position(&document.rope, last.start, encoding),
            position::to_position(&document.rope, last.end(), encoding),
        ));
        let from = match position {
            Some(position) => document.offset(position, encoding).byte,
            None => last.end(),
        };
        let first = verified.edits.iter().position(|edit| edit.start >= from).unwrap_or(0);
        answer.edits = verified.edits[first..]
            .iter()
            .chain(&verified.edits[..first])
            .map(|edit| NextEdit {
                start: position::to_position(&document.rope, edit.start, encoding),
                end: position::to_position(&document.rope, edit.end, encoding),
                new_text: edit.new_text.clone(),
                label: edit.label.clone(),
                source: edit.source.as_str(),
            })
            .collect();
        answer.all_together = verified.all_together;
        Some(answer)
    }
}
