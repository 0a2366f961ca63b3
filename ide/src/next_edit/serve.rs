//! The next-edit service the workspace owns: the checked predictions of an open document in the front end's
//! position encoding, computed once per revision of the document (the last computation cached here). The
//! workspace hands it the document, the settings and the model to use; it never reaches back into the workspace.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spark_engine::{CompletionRequest, Engine, RemoteClient, StopMode, StopReason};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::document::Document;
use crate::exec_check::Gate;
use crate::kinds::{FileChange, TaskKind};
use crate::position::{self, LspPosition, PositionEncoding};
use crate::route::{Generator, PromptStyle};

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

/// When the next edits together fail the execution check, this many are checked one by one.
const MAX_CHECKED_ALONE: usize = 8;

/// The next-edit service: the last computation, (uri, revision, result, `complete`: nothing is left to do for
/// that revision — the model was asked if it is to be, the execution check ran if it is on).
#[derive(Default)]
pub struct NextEditService {
    cache: std::sync::Mutex<Option<Computed>>,
}

/// One computation: (uri, revision, result, complete).
type Computed = (String, u64, Arc<Verified>, bool);

/// The model a next-edit request may ask (along the ghost-text route), and where the document lives.
pub struct NextEditModel {
    pub engine: Arc<Engine>,
    pub remote: Option<RemoteClient>,
    pub path: Option<PathBuf>,
}

impl NextEditService {
    /// The next edits predicted for `uri` from its recent edits by the rules (no model), ordered from
    /// `position` (else from the end of the last edit). No edits when the feature is off, the file is excluded,
    /// it has no syntax tree, nothing was predicted and verified, or the execution check is on and has not
    /// passed them yet ([`NextEditService::next_edits_with_model`] runs it).
    pub fn next_edits(
        &self,
        uri: &str,
        document: &Document,
        settings: &Settings,
        encoding: PositionEncoding,
        position: Option<LspPosition>,
    ) -> NextEdits {
        let (verified, complete) = self.predicted(uri, document, settings);
        let shown = if (settings.verify.compile && settings.next_edit.compile) && !complete {
            Arc::new(Verified::default())
        } else {
            verified
        };
        answer(document, &shown, encoding, position)
    }

    /// What was already computed for the document's current revision (by a pause's push, a code action or a
    /// request), else nothing: for the keystroke path, which must not compute it. `settings` is read only when
    /// something was computed (most keystrokes find nothing for their revision).
    pub fn next_edits_cached(
        &self,
        uri: &str,
        document: &Document,
        settings: impl FnOnce() -> Settings,
        encoding: PositionEncoding,
        position: Option<LspPosition>,
    ) -> Option<NextEdits> {
        let (verified, complete) = self.cached(uri, document.revision)?;
        let settings = settings();
        if !settings.next_edit.enabled
            || settings.is_excluded(uri)
            || ((settings.verify.compile && settings.next_edit.compile) && !complete)
        {
            return None;
        }
        Some(answer(document, &verified, encoding, position))
    }

    /// The rules' result for the document's revision: cached, else computed (and cached, complete when neither
    /// the model nor the execution check is left to run).
    fn predicted(&self, uri: &str, document: &Document, settings: &Settings) -> (Arc<Verified>, bool) {
        let (Some(lang), Some(tree)) = (document.lang, document.tree.as_ref()) else {
            return (Arc::default(), true);
        };
        if !settings.next_edit.enabled || settings.is_excluded(uri) || document.edits.last().is_none() {
            return (Arc::default(), true);
        }
        if let Some(cached) = self.cached(uri, document.revision) {
            return cached;
        }
        let verified = Arc::new(super::next_edits(lang, &document.text(), tree, &document.edits));
        let model_left = verified.edits.is_empty() && settings.next_edit.model;
        let check_left = !verified.edits.is_empty() && (settings.verify.compile && settings.next_edit.compile);
        let complete = !model_left && !check_left;
        self.remember(uri, document.revision, verified.clone(), complete);
        (verified, complete)
    }

    /// The last computation's result and whether it is complete, when it was for `uri` at `revision`.
    fn cached(&self, uri: &str, revision: u64) -> Option<(Arc<Verified>, bool)> {
        let cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache
            .as_ref()
            .filter(|(u, at, _, _)| u == uri && *at == revision)
            .map(|(_, _, verified, complete)| (verified.clone(), *complete))
    }

    fn remember(&self, uri: &str, revision: u64, verified: Arc<Verified>, complete: bool) {
        *self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some((uri.to_owned(), revision, verified, complete));
    }

    /// The rules' next edits, and what is left for the document's revision: when the rules predict nothing and
    /// `nextEdit.model` is on, the model's rewrite of the lines after the edit (along the ghost-text route, as
    /// background work, within `nextEdit.deadlineMs`), checked like every prediction; with `verify.compile`, the
    /// edits all together type-checked in a scratch copy (refused together when they add an error). The result
    /// is cached for the revision; a newer edit makes it stale.
    #[allow(clippy::too_many_arguments)]
    pub async fn next_edits_with_model(
        &self,
        uri: &str,
        document: &Document,
        settings: &Settings,
        encoding: PositionEncoding,
        model: NextEditModel,
        revision_now: impl Fn() -> Option<u64>,
        position: Option<LspPosition>,
        cancel: CancellationToken,
    ) -> NextEdits {
        let (verified, complete) = self.predicted(uri, document, settings);
        if complete {
            return answer(document, &verified, encoding, position);
        }
        let (Some(lang), Some(tree), Some(edit)) =
            (document.lang, document.tree.clone(), document.edits.last().cloned())
        else {
            return answer(document, &verified, encoding, position);
        };
        let text = document.text();
        let mut verified = (*verified).clone();
        let mut finished = true;
        if verified.edits.is_empty() && settings.next_edit.model {
            let asked = ask_model(&model, lang, &text, &tree, &edit, settings, cancel.clone()).await;
            finished = asked.is_some();
            verified = asked.unwrap_or_default();
        }
        if (settings.verify.compile && settings.next_edit.compile)
            && !verified.edits.is_empty()
            && !cancel.is_cancelled()
        {
            let gate = Gate::new(settings.verify, TaskKind::Fix, model.path.as_deref(), &text, None);
            if let Err(refusal) = gate.check(&combined_change(&text, &verified.edits), &cancel).await {
                // Together they add an error: each one alone, and only those that pass stay (a few, at most).
                tracing::debug!(%refusal, "next edits refused together by the execution check");
                let mut passed = Vec::new();
                for predicted in verified.edits.iter().take(MAX_CHECKED_ALONE) {
                    let alone = std::slice::from_ref(predicted);
                    if gate.check(&combined_change(&text, alone), &cancel).await.is_ok() {
                        passed.push(predicted.clone());
                    }
                }
                verified = Verified { edits: passed, all_together: false };
            }
            finished &= !cancel.is_cancelled();
        }
        let verified = Arc::new(verified);
        // Stored only when nothing was cut short (a keystroke cancels background work: asked again after the
        // next pause) and the document is still at the revision read.
        if finished && revision_now() == Some(document.revision) {
            self.remember(uri, document.revision, verified.clone(), true);
        }
        answer(document, &verified, encoding, position)
    }
}

/// The model's checked predictions, or `None` when it did not finish (cancelled, the deadline, an error).
async fn ask_model(
    model: &NextEditModel,
    lang: spark_grammars::Lang,
    text: &str,
    tree: &spark_grammars::tree_sitter::Tree,
    edit: &super::Edit,
    settings: &Settings,
    cancel: CancellationToken,
) -> Option<Verified> {
    let window = super::model::window(text, edit);
    let prompt = super::model::prompt(lang, text, edit, window.clone());
    let generator = Generator::new(&model.engine, model.remote.as_ref(), settings.inline.route);
    let request = CompletionRequest {
        lane: crate::tasks::TASK_LANE,
        mode: StopMode::Free,
        // A faithful copy of the window takes at most one token per byte.
        max_tokens: window.len() + 16,
        max_lines: usize::MAX,
        deadline: Instant::now() + Duration::from_millis(settings.next_edit.deadline_ms),
        cancel,
        raw_prompt: true,
        // Background work: it runs only while no keystroke waits, and a keystroke cancels it (ghost text
        // must never wait behind a rewrite of several lines).
        background: true,
        speculate: true,
        ..Default::default()
    };
    let generated = match generator.generate_task(&prompt, request).await {
        Ok(generated) => generated,
        Err(error) => {
            tracing::debug!(%error, "next edit: the model gave nothing");
            return None;
        }
    };
    if matches!(generated.completion.stop, StopReason::Deadline | StopReason::Cancelled | StopReason::Superseded) {
        return None;
    }
    let rewritten = match generated.style {
        PromptStyle::FewShot => generated.completion.text.clone(),
        PromptStyle::ChatPrefilled => crate::tasks::strip_code_fences(&generated.completion.text),
        PromptStyle::Chat => crate::tasks::first_code_block(&generated.completion.text),
    };
    let edits: Vec<_> = super::model::predictions(text, window, &rewritten, edit)
        .into_iter()
        .filter(|predicted| super::check(lang, text, tree, edit, std::slice::from_ref(predicted)).is_ok())
        .collect();
    let all_together = edits.len() > 1 && super::check(lang, text, tree, edit, &edits).is_ok();
    Some(Verified { edits, all_together })
}
/// `verified` in the front end's terms, ordered from `position` (else from the end of the last edit).
fn answer(
    document: &Document,
    verified: &Verified,
    encoding: PositionEncoding,
    position: Option<LspPosition>,
) -> NextEdits {
    let mut answer = NextEdits { version: document.version, revision: document.revision, ..NextEdits::default() };
    let Some(last) = document.edits.last() else { return answer };
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
    answer
}

/// The edits (sorted, apart) as one change of `text`: from the first edit's start to the last one's end.
fn combined_change(text: &str, edits: &[super::Predicted]) -> FileChange {
    let (start, end) = (edits[0].start, edits[edits.len() - 1].end);
    let mut insert = String::new();
    let mut copied = start;
    for edit in edits {
        insert.push_str(&text[copied..edit.start]);
        insert.push_str(&edit.new_text);
        copied = edit.end;
    }
    FileChange { path: None, create: false, old_text: text.to_owned(), replace: start..end, insert }
}
