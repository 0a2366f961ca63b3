//! The workspace's side of next-edit suggestions: the checked predictions of an open document in the front end's
//! position encoding, computed once per revision of the document.

use std::sync::Arc;
use std::time::{Duration, Instant};

use spark_engine::{CompletionRequest, Sampling, StopMode, StopReason};
use tokio_util::sync::CancellationToken;

use crate::position::{self, LspPosition};
use crate::route::{Generator, PromptStyle};
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

/// The last computation: (uri, revision, result, whether the model was asked).
pub(crate) type NextEditCache = std::sync::Mutex<Option<(String, u64, Arc<Verified>, bool)>>;

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
                .filter(|(u, revision, _, _)| u == uri && *revision == document.revision)
                .map(|(_, _, verified, _)| verified.clone())
        };
        let verified = match cached {
            Some(verified) => verified,
            None => {
                let text = document.text();
                let verified = Arc::new(super::next_edits(lang, &text, tree, &document.edits));
                *self.next_edit_cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                    Some((uri.to_owned(), document.revision, verified.clone(), false));
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

    /// [`Workspace::next_edits`], and when the rules predict nothing and `nextEdit.model` is on, the model's
    /// rewrite of the lines after the edit (along the ghost-text route, within `nextEdit.deadlineMs`), checked
    /// like every prediction. A newer edit makes the answer stale: it is dropped.
    pub async fn next_edits_with_model(
        &self,
        uri: &str,
        position: Option<LspPosition>,
        cancel: CancellationToken,
    ) -> Option<NextEdits> {
        let found = self.next_edits(uri, position)?;
        let settings = self.settings();
        if !found.edits.is_empty() || !settings.next_edit.model || found.last_edit.is_none() {
            return Some(found);
        }
        let asked = {
            let cache = self.next_edit_cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            cache.as_ref().is_some_and(|(u, revision, _, asked)| u == uri && *revision == found.revision && *asked)
        };
        if asked {
            return Some(found);
        }
        let document = self.document(uri)?;
        let (Some(lang), Some(tree), Some(edit)) =
            (document.lang, document.tree.clone(), document.edits.last().cloned())
        else {
            return Some(found);
        };
        let text = document.text();
        let window = super::model::window(&text, &edit);
        let prompt = super::model::prompt(lang, &text, &edit, window.clone());
        let engine = self.engine().clone();
        let remote = self.remote();
        let generator = Generator::new(&engine, remote.as_ref(), settings.inline.route);
        let request = CompletionRequest {
            lane: crate::tasks::TASK_LANE,
            header: String::new(),
            prefix: String::new(),
            suffix: String::new(),
            mode: StopMode::Free,
            indent: String::new(),
            // A faithful copy of the window takes at most one token per byte.
            max_tokens: window.len() + 16,
            max_lines: usize::MAX,
            deadline: Instant::now() + Duration::from_millis(settings.next_edit.deadline_ms),
            cancel,
            raw_prompt: true,
            stop_strings: Vec::new(),
            sampling: Sampling::default(),
            // Background work: it runs only while no keystroke waits, and a keystroke cancels it (ghost text
            // must never wait behind a rewrite of several lines).
            background: true,
            min_confidence: 0.0,
            speculate: true,
        };
        let generated = match generator.generate_task(&prompt, request).await {
            Ok(generated) => generated,
            Err(error) => {
                tracing::debug!(%error, "next edit: the model gave nothing");
                return Some(found);
            }
        };
        let finished = !matches!(generated.completion.stop, StopReason::Deadline | StopReason::Cancelled);
        let rewritten = match generated.style {
            PromptStyle::FewShot => generated.completion.text.clone(),
            PromptStyle::ChatPrefilled => crate::tasks::strip_code_fences(&generated.completion.text),
            PromptStyle::Chat => crate::tasks::first_code_block(&generated.completion.text),
        };
        let predicted = if finished { super::model::predictions(&text, window, &rewritten, &edit) } else { Vec::new() };
        let edits: Vec<_> = predicted
            .into_iter()
            .filter(|predicted| super::check(lang, &text, &tree, &edit, std::slice::from_ref(predicted)).is_ok())
            .collect();
        let all_together = edits.len() > 1 && super::check(lang, &text, &tree, &edit, &edits).is_ok();
        // Stored only when the model finished (a keystroke cancels background work: asked again after the next
        // pause) and the document is still at the revision the model read.
        if finished && self.document(uri).is_some_and(|now| now.revision == document.revision) {
            let verified = Arc::new(Verified { edits, all_together });
            *self.next_edit_cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                Some((uri.to_owned(), document.revision, verified, true));
        }
        self.next_edits(uri, position)
    }
}
