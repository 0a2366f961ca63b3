//! The workspace's background work on ghost text: one scheduler that keeps every spawned task (aborted at
//! shutdown), and the finishing of a keystroke's suggestion that the deadline cut — computed while the user
//! pauses, cached, checked, and announced (`SuggestionReady`) so that the client asks again and is served at once.
//!
//! Editors ask for inline completions only when the user types: a request answered empty at its deadline (a cold
//! prompt after opening or switching files, a slow machine) would otherwise leave a user who paused looking at
//! nothing until the next keystroke.

use std::sync::{Arc, Mutex, OnceLock};

use dashmap::DashMap;
use spark_engine::{CompletionRequest, Engine, StopReason};

use crate::document::Document;
use crate::position::LspPosition;
use crate::runner::off_the_async_workers;
use crate::verify;

/// A suggestion the deadline cut, finished in the background and checked: asking again at `position` of `uri`
/// while the document is at `version` is answered from the suggestion cache, without the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuggestionReady {
    pub uri: String,
    pub version: i32,
    pub position: LspPosition,
}

/// Who is told that a suggestion is ready (the LSP server sends `spark/inlineCompletionReady`).
pub type ReadyHook = Box<dyn Fn(SuggestionReady) + Send + Sync>;

/// The one scheduler of background work: spawned tasks are kept (and aborted at shutdown), and a document has
/// at most one piece of work registered — background work only starts when nothing runs for the document.
#[derive(Default)]
pub(crate) struct Background {
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Background {
    pub(crate) fn keep(&self, handle: tokio::task::JoinHandle<()>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle);
    }

    pub(crate) fn abort_all(&self) {
        let tasks: Vec<_> = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).drain(..).collect();
        for task in tasks {
            task.abort();
        }
    }
}

/// The keystroke whose suggestion is being finished: where it was asked, for which text, and what was shown.
pub(crate) struct CutRequest {
    pub uri: String,
    pub request: CompletionRequest,
    pub version: i32,
    pub revision: u64,
    pub byte: usize,
    pub position: LspPosition,
    /// What the client was shown for it (empty, or a fragment the deadline cut).
    pub shown: String,
}

/// Finishes `cut` with the model (prompt and generation; any keystroke cancels it through `cut.request.cancel`),
/// caches the answer as the keystroke's own, and tells `ready` when it is news to the client: the document is
/// unchanged, the answer passes the insertion check, and it is more than what was shown.
pub(crate) async fn finish_cut(
    engine: Arc<Engine>,
    documents: Arc<DashMap<String, Document>>,
    ready: Arc<OnceLock<ReadyHook>>,
    notify: bool,
    mut cut: CutRequest,
) {
    let completion = match engine.complete(cut.request.clone()).await {
        Ok(completion) => completion,
        Err(error) => {
            tracing::debug!(uri = %cut.uri, %error, "finishing a cut suggestion failed");
            return;
        }
    };
    if matches!(completion.stop, StopReason::Cancelled | StopReason::Superseded) {
        tracing::debug!(uri = %cut.uri, stop = ?completion.stop, "finishing a cut suggestion was cancelled");
        return;
    }
    // Cached as the keystroke's own answer: the same request again (the client asking after the notification,
    // Helix's completion menu) or typing along it is served without the model.
    cut.request.background = false;
    cut.request.resume = false;
    engine.remember(&cut.request, &completion);
    tracing::debug!(
        uri = %cut.uri,
        stop = ?completion.stop,
        bytes = completion.text.len(),
        n_decoded = completion.stats.n_decoded,
        n_generated = completion.stats.n_generated,
        total_ms = completion.stats.total_ms,
        "finished a suggestion the deadline cut"
    );
    if !notify || completion.text.is_empty() {
        return;
    }
    let Some(document) = documents.get(&cut.uri).map(|document| document.clone()) else {
        return;
    };
    if document.revision != cut.revision {
        return;
    }
    let (byte, text) = (cut.byte, completion.text);
    let Some(checked) = off_the_async_workers(move || verify::check_insertion(&document, byte, &text)).await else {
        return;
    };
    let current = documents.get(&cut.uri).is_some_and(|document| document.revision == cut.revision);
    if !current || checked == cut.shown {
        return;
    }
    if let Some(hook) = ready.get() {
        hook(SuggestionReady { uri: cut.uri, version: cut.version, position: cut.position });
    }
}
