//! The workspace: the open documents and their trees, the other-files ring, the settings and privacy rules, an
//! injected engine (the real one, or a scripted one in tests), the remote endpoint and the strong tier — and the
//! ghost-text policy over them: newest wins, an edit cancels what was computed for the old text, a stale answer
//! is dropped, and background work (warm-up, prefetch, finishing cut work) never cancels a request.
//!
//! Front ends (the LSP server, the CLI, the MCP server) convert their own types to these calls; nothing here
//! knows LSP or JSON-RPC. Documents are keyed by the front end's URI string (`file:///…`); the path, when the
//! document has one, is given at open.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use spark_engine::StopReason;
use spark_engine::{Engine, EngineError, EngineState, RecentCall, RemoteClient, RemoteError};
use tokio_util::sync::CancellationToken;

use crate::background::{self, Background, CutRequest, ReadyHook, SuggestionReady};
use crate::config::{Route, Settings};
use crate::context;
use crate::document::{Change, Document};
use crate::position::{self, LspPosition, PositionEncoding};
use crate::ring::Ring;
use crate::route::{Generator, Served};
use crate::suggest;
use crate::tasks::{self, OpenFile, TaskBudget, TaskDocument, TaskKind, TaskTarget};

use crate::verify;

use crate::next_edit::{NextEditModel, NextEditService, NextEdits};
use crate::runner::{off_the_async_workers, TaskError, TaskJob, TaskRun, TaskRunner};
use crate::status::{RemoteStatus, Status, Totals};

pub use crate::runner::{TaskRequest, TaskResult};

/// How a prefetch may use the model thread when nothing else needs it.
const PREFETCH_BUDGET: Duration = Duration::from_millis(1500);
/// How long finishing a suggestion the deadline cut may take: a cold prompt (a file just opened) and the
/// generation after it, on a slow machine. Any keystroke cancels it sooner.
const FINISH_BUDGET: Duration = Duration::from_secs(10);
const NO_LATENCY: u64 = u64::MAX;

/// Something the user should be told (the front end shows it its own way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: NoticeLevel,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Error,
    Warning,
}

/// A verified ghost-text suggestion and where it goes, in the workspace's position encoding.
#[derive(Debug, Clone)]
pub struct Suggestion {
    pub text: String,
    pub byte: usize,
    pub position: LspPosition,
    /// The identifier typed before the cursor, for completion-menu clients that filter by it.
    pub word: String,
    pub word_position: LspPosition,
}

type Notify = Box<dyn Fn(Notice) + Send + Sync>;

/// What runs for a document: a ghost-text request or background work, with the token that stops it.
struct Inflight {
    id: u64,
    cancel: CancellationToken,
    /// A warm-up (of a document's top or of a focused place): a newer focus replaces it.
    warm_up: bool,
}

pub struct Workspace {
    engine: Arc<Engine>,
    encoding: PositionEncoding,
    documents: Arc<DashMap<String, Document>>,
    paths: DashMap<String, PathBuf>,
    settings: RwLock<Settings>,
    /// The running ghost-text request (or background work) of each document: a newer request or an edit
    /// cancels it.
    inflight: DashMap<String, Inflight>,
    next_request_id: AtomicU64,
    last_latency_ms: AtomicU64,
    /// The remote endpoint, when `remote.url` is configured; `None` otherwise (nothing leaves the machine).
    remote: RwLock<Option<RemoteClient>>,
    /// Set after the user was told the remote failed; cleared when it answers again (one notice, not one per
    /// keystroke).
    remote_warned: AtomicBool,
    /// Recently opened or edited places, for the other-files context of ghost-text prompts.
    ring: Mutex<Ring<String>>,
    /// The tasks' runner: the strong tier, loaded on first need and unloaded when idle.
    tasks: TaskRunner,
    background: Background,
    notify: Notify,
    /// Told when a suggestion the deadline cut is ready (`Workspace::on_suggestion_ready`).
    ready: Arc<OnceLock<ReadyHook>>,
    /// Next-edit suggestions, and their last computation (a document asked about again at the same revision is
    /// not recomputed).
    next_edit: NextEditService,
}

impl Workspace {
    /// A workspace over `engine` (already started, loading or not). Must be called inside a tokio runtime:
    /// the remote endpoint's connection is opened in the background.
    pub fn new(
        engine: Arc<Engine>,
        settings: Settings,
        encoding: PositionEncoding,
        notify: impl Fn(Notice) + Send + Sync + 'static,
    ) -> Workspace {
        let workspace = Workspace {
            engine: engine.clone(),
            encoding,
            documents: Arc::new(DashMap::new()),
            paths: DashMap::new(),
            settings: RwLock::new(Settings::default()),
            inflight: DashMap::new(),
            next_request_id: AtomicU64::new(1),
            last_latency_ms: AtomicU64::new(NO_LATENCY),
            remote: RwLock::new(None),
            remote_warned: AtomicBool::new(false),
            ring: Mutex::new(Ring::default()),
            tasks: TaskRunner::new(engine.clone()),
            background: Background::default(),
            notify: Box::new(notify),
            ready: Arc::new(OnceLock::new()),
            next_edit: NextEditService::default(),
        };
        workspace.configure_remote(&settings);
        *workspace.settings.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = settings;
        workspace
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn encoding(&self) -> PositionEncoding {
        self.encoding
    }

    /// The settings in force: as set, with what they leave to the loaded model filled in (its prompt window).
    pub fn settings(&self) -> Settings {
        let settings = self.settings.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let n_params = match self.engine.state() {
            EngineState::Ready(info) => Some(info.n_params),
            _ => None,
        };
        settings.for_model(n_params)
    }

    /// Replaces the settings: the remote client is rebuilt when its settings changed, the model reloaded when
    /// its settings changed (or it failed to load: the new settings may mend it).
    pub fn set_settings(&self, settings: Settings) {
        let old = std::mem::replace(
            &mut *self.settings.write().unwrap_or_else(|poisoned| poisoned.into_inner()),
            settings.clone(),
        );
        if old.remote != settings.remote {
            self.configure_remote(&settings);
        }
        let new_config = settings.engine_config();
        let model_unusable = matches!(self.engine.state(), EngineState::Failed { .. });
        if old.engine_config() != new_config || model_unusable {
            tracing::info!("model settings changed; reloading");
            let _ = self.engine.reload(new_config);
        }
    }

    /// Whether the text of `uri` must never reach a model (a secret-looking file or one `context.ignore` names).
    pub fn is_excluded(&self, uri: &str) -> bool {
        self.settings.read().unwrap_or_else(|poisoned| poisoned.into_inner()).is_excluded(uri)
    }

    /// Where an open document lives on disk, when it does.
    pub fn path_of(&self, uri: &str) -> Option<PathBuf> {
        self.paths.get(uri).map(|path| path.clone())
    }

    /// A snapshot of an open document (cheap: the rope and the tree are shared until changed).
    pub fn document(&self, uri: &str) -> Option<Document> {
        self.documents.get(uri).map(|document| document.clone())
    }

    /// Opens (or replaces) a document; `path` is where it lives on disk, when it does. Warms the model for it.
    pub fn open(&self, uri: &str, path: Option<PathBuf>, language_id: &str, text: &str, version: i32) {
        let lang = spark_grammars::Lang::from_language_id(language_id)
            .or_else(|| spark_grammars::Lang::from_path(Path::new(uri.split(['?', '#']).next().unwrap_or(uri))));
        self.documents.insert(uri.to_owned(), Document::new(text, language_id, lang, version));
        match path {
            Some(path) => self.paths.insert(uri.to_owned(), path),
            None => self.paths.remove(uri).map(|(_, path)| path),
        };
        self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).touch(&uri.to_owned(), 0);
        self.warm_up(uri);
    }

    /// Applies an edit: whatever was computed for the old text is cancelled (writes win). `false` when the
    /// document is not open.
    pub fn edit(&self, uri: &str, changes: &[Change], version: i32) -> bool {
        let edited_line = changes.first().and_then(|change| change.range).map(|(start, _)| start.line as usize);
        {
            let Some(mut document) = self.documents.get_mut(uri) else {
                tracing::warn!(uri, "an edit of a document that is not open; ignored");
                return false;
            };
            if version <= document.version {
                tracing::warn!(uri, old = document.version, new = version, "document version did not increase");
            }
            let report = document.apply_changes(changes, self.encoding, version);
            if report.clamped_positions > 0 || report.inverted_ranges > 0 {
                tracing::warn!(
                    uri,
                    clamped = report.clamped_positions,
                    inverted = report.inverted_ranges,
                    "edit ranges out of bounds; clamped"
                );
            }
        }
        if let Some(line) = edited_line {
            self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).touch(&uri.to_owned(), line);
        }
        // A warm-up goes on: typing on the focused line only appends to its prompt (the typed part of the line
        // goes last), so what it evaluates is what the next request needs. Clients that ask only after a pause
        // (Neovim 0.12 waits 200 ms) would otherwise find the prompt as cold as when the user started typing.
        self.inflight.remove_if(uri, |_, inflight| {
            if !inflight.warm_up {
                inflight.cancel.cancel();
            }
            !inflight.warm_up
        });
        true
    }

    pub fn close(&self, uri: &str) {
        self.cancel_inflight(uri);
        self.documents.remove(uri);
        self.paths.remove(uri);
        self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).forget(&uri.to_owned());
    }

    /// Stops everything running: requests, background work, the model, the resident TypeScript checkers.
    pub fn shutdown(&self) {
        for entry in self.inflight.iter() {
            entry.value().cancel.cancel();
        }
        self.background.abort_all();
        self.engine.shutdown();
        crate::exec_check::ts_service::shutdown_all();
    }

    pub(crate) fn remote(&self) -> Option<RemoteClient> {
        self.remote.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Builds (or drops) the remote client for these settings and opens its connection in the background.
    fn configure_remote(&self, settings: &Settings) {
        let client = if settings.remote.configured() {
            match RemoteClient::new(settings.remote.client_config()) {
                Ok(client) => Some(client),
                Err(error) => {
                    self.tell(NoticeLevel::Error, format!("Spark: remote.url: {error}"));
                    None
                }
            }
        } else {
            None
        };
        if let Some(client) = &client {
            let warm = client.clone();
            self.background.keep(tokio::spawn(async move {
                if let Err(error) = warm.warm().await {
                    tracing::warn!(%error, "remote endpoint not reachable at start-up; will retry");
                }
            }));
        }
        self.remote_warned.store(false, Ordering::Relaxed);
        *self.remote.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = client;
    }

    fn tell(&self, level: NoticeLevel, message: String) {
        (self.notify)(Notice { level, message });
    }

    /// Tells the user once that the remote failed and the local model serves instead.
    fn note_remote(&self, error: Option<RemoteError>, served: Option<Served>) {
        match error {
            Some(RemoteError::Cancelled) => {}
            Some(error) if !self.remote_warned.swap(true, Ordering::Relaxed) => {
                let message =
                    format!("Spark: the remote endpoint failed ({error}); the local model serves until it recovers");
                self.tell(NoticeLevel::Warning, message);
            }
            Some(_) => {}
            None if served == Some(Served::Remote) => self.remote_warned.store(false, Ordering::Relaxed),
            None => {}
        }
    }

    /// Ghost text at `position` of `uri`: a suggestion that passed the checks and is still current, or `None`.
    /// A newer request for the same document or an edit cancels this one (it answers `None` at once), and so
    /// does `cancel` (a front end's own cancellation; dropping the future stops the model too).
    pub async fn suggest(&self, uri: &str, position: LspPosition, cancel: CancellationToken) -> Option<Suggestion> {
        let engine = self.engine.clone();
        let settings = self.settings();
        let encoding = self.encoding;
        let lane = suggest::lane_of(uri);
        if settings.is_excluded(uri) {
            return None;
        }
        // Read before the document is borrowed: it reads other documents of the store.
        let extra = self.other_files_context(uri, &settings);
        // Everything read from the document happens before the first await.
        let prepared = {
            let Some(document) = self.documents.get(uri) else {
                tracing::warn!(uri, "suggestion asked for a document that is not open");
                return None;
            };
            if !settings.inline_enabled_for(&document.language_id) {
                return None;
            }
            let resolved = document.offset(position, encoding);
            if resolved.clamped {
                tracing::warn!(
                    uri,
                    line = position.line,
                    character = position.character,
                    "position out of range; clamped"
                );
            }
            let path = suggest::display_path(uri);
            suggest::prepare(&document, resolved.byte, Some(&path), &extra, lane, &settings.inline, cancel.clone())
        };
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let inflight = Inflight { id: request_id, cancel: cancel.clone(), warm_up: false };
        if let Some(previous) = self.inflight.insert(uri.to_owned(), inflight) {
            previous.cancel.cancel();
        }
        // A front end cancels a request by dropping its future: the guard then stops the model too.
        let _stop_model_on_drop = cancel.clone().drop_guard();
        let started = Instant::now();
        let remote = self.remote();
        let generator = Generator::new(&engine, remote.as_ref(), settings.inline.route);
        // A newer keystroke or an edit cancels this request: answer at once instead of waiting for the model
        // thread to reach it.
        let request = prepared.request.clone();
        let result = tokio::select! {
            result = generator.generate(prepared.request) => result,
            _ = cancel.cancelled() => {
                tracing::debug!(uri, "suggestion cancelled by a newer request or an edit");
                return None;
            }
        };
        let served = result.as_ref().ok().map(|generated| generated.served);
        self.note_remote(generator.take_remote_error(), served);
        self.inflight.remove_if(uri, |_, inflight| inflight.id == request_id);
        let completion = match result.map(|generated| generated.completion) {
            Ok(completion) => completion,
            Err(EngineError::Loading) => return None,
            Err(error) => {
                tracing::debug!(%error, "no suggestion");
                return None;
            }
        };
        let local = settings.inline.route == Route::Local;
        // Cut by the deadline (a cold prompt, or a generation still going): the suggestion is finished in the
        // background, cached for this request, and the client told when it is ready.
        let cut = local && completion.stop == StopReason::Deadline;
        let finish = |shown: &str| CutRequest {
            uri: uri.to_owned(),
            request: request.clone(),
            version: prepared.version,
            revision: prepared.revision,
            byte: prepared.byte,
            position,
            shown: shown.to_owned(),
        };
        if completion.text.is_empty() {
            tracing::debug!(stop = ?completion.stop, "no suggestion");
            if cut {
                self.finish_in_background(finish(""), &settings);
            }
            return None;
        }
        let document = self.document(uri)?;
        if document.version != prepared.version || document.revision != prepared.revision {
            tracing::debug!(uri, "suggestion dropped: the document changed while it was computed");
            return None;
        }
        // The check parses the document with the suggestion in it: CPU work, kept off the async workers.
        let checked = {
            let (document, byte, text) = (document.clone(), prepared.byte, completion.text.clone());
            off_the_async_workers(move || verify::check_insertion(&document, byte, &text)).await
        };
        let Some(text) = checked else {
            tracing::debug!(uri, bytes = completion.text.len(), "suggestion refused: it adds syntax errors");
            if cut {
                self.finish_in_background(finish(""), &settings);
            }
            return None;
        };
        if cut {
            self.finish_in_background(finish(&text), &settings);
        }
        if self.documents.get(uri).is_none_or(|now| now.revision != prepared.revision) {
            tracing::debug!(uri, "suggestion dropped: the document changed while it was checked");
            return None;
        }
        if settings.inline.prefetch && local && !cut {
            self.prefetch_accepted(uri, &document, prepared.byte, &text, &extra, &settings);
        }
        let latency = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_latency_ms.store(latency, Ordering::Relaxed);
        let word_start = suggest::word_start(&document, prepared.byte);
        tracing::info!(
            latency_ms = latency,
            n_reused = completion.stats.n_reused,
            n_decoded = completion.stats.n_decoded,
            n_generated = completion.stats.n_generated,
            "suggestion"
        );
        Some(Suggestion {
            text,
            byte: prepared.byte,
            position: position::to_position(&document.rope, prepared.byte, encoding),
            word: document.rope.byte_slice(word_start..prepared.byte).to_string(),
            word_position: position::to_position(&document.rope, word_start, encoding),
        })
    }

    /// After a suggestion is shown, computes the one for the state where it is accepted, so that accepting it
    /// shows the next one from the cache. Low priority: the engine runs it only when no keystroke waits and
    /// cancels it when one arrives; an edit of the document or a newer request cancels it too.
    fn prefetch_accepted(
        &self,
        uri: &str,
        document: &Document,
        byte: usize,
        shown: &str,
        extra: &str,
        settings: &Settings,
    ) {
        let engine = self.engine.clone();
        let cancel = engine.background_token();
        if !self.register_background(uri, &cancel) {
            return;
        }
        let mut accepted = document.clone();
        let shown = shown.to_owned();
        let extra = extra.to_owned();
        let path = suggest::display_path(uri);
        let lane = suggest::lane_of(uri);
        let inline = settings.inline.clone();
        self.background.keep(tokio::spawn(async move {
            // The same edit the client makes when the suggestion is accepted (reparsed incrementally).
            let encoding = PositionEncoding::Utf8;
            let at = position::to_position(&accepted.rope, byte, encoding);
            let version = accepted.version;
            accepted.apply_changes(&[Change { range: Some((at, at)), text: shown.clone() }], encoding, version);
            let mut request =
                suggest::prepare(&accepted, byte + shown.len(), Some(&path), &extra, lane, &inline, cancel).request;
            request.background = true;
            request.deadline = Instant::now() + PREFETCH_BUDGET;
            let _ = engine.complete(request).await;
        }));
    }

    /// Finishes in the background a suggestion the deadline cut (prompt evaluation and generation), caches it as
    /// the request's answer, and — when the client asked for it (`inline.notifyReady`) — tells it the suggestion is
    /// ready, so that a user who paused sees it without typing again. Any keystroke or edit cancels it.
    fn finish_in_background(&self, mut cut: CutRequest, settings: &Settings) {
        let cancel = self.engine.background_token();
        if !self.register_background(&cut.uri, &cancel) {
            tracing::debug!(uri = %cut.uri, "a cut suggestion is not finished: other work runs for the document");
            return;
        }
        cut.request.background = true;
        cut.request.resume = true;
        cut.request.cancel = cancel;
        cut.request.deadline = Instant::now() + FINISH_BUDGET;
        let task = background::finish_cut(
            self.engine.clone(),
            self.documents.clone(),
            self.ready.clone(),
            settings.inline.notify_ready,
            cut,
        );
        self.background.keep(tokio::spawn(task));
    }

    /// Sets who is told when a suggestion the deadline cut is ready (once; later calls are ignored).
    pub fn on_suggestion_ready(&self, hook: impl Fn(SuggestionReady) + Send + Sync + 'static) {
        let _ = self.ready.set(Box::new(hook));
    }

    /// The editor shows `uri` with the cursor at `position` (opened, switched to, insert mode entered): the prompt
    /// of a suggestion there is brought into the KV cache, so that the first keystroke is warm. A warm-up of the
    /// document's top, or of another place, gives way; a request in flight is left alone.
    pub fn focus(&self, uri: &str, position: LspPosition) {
        let settings = self.settings();
        if settings.is_excluded(uri) || settings.inline.route != Route::Local {
            return;
        }
        let extra = self.other_files_context(uri, &settings);
        let cancel = self.engine.background_token();
        let mut request = {
            let Some(document) = self.documents.get(uri) else {
                return;
            };
            if !settings.inline_enabled_for(&document.language_id) {
                return;
            }
            let byte = document.offset(position, self.encoding).byte;
            let path = suggest::display_path(uri);
            let lane = suggest::lane_of(uri);
            suggest::prepare(&document, byte, Some(&path), &extra, lane, &settings.inline, cancel.clone()).request
        };
        request.max_tokens = 0;
        request.background = true;
        request.deadline = Instant::now() + Duration::from_secs(30);
        self.inflight.remove_if(uri, |_, inflight| {
            if inflight.warm_up {
                inflight.cancel.cancel();
            }
            inflight.warm_up
        });
        if !self.register_warm_up(uri, &cancel) {
            tracing::debug!(uri, "focus: no warm-up, a request runs for the document");
            return;
        }
        tracing::debug!(uri, line = position.line, "focus: warming the prompt at the cursor");
        let engine = self.engine.clone();
        self.background.keep(tokio::spawn(async move {
            if let Ok(done) = engine.complete(request).await {
                tracing::debug!(stop = ?done.stop, n_decoded = done.stats.n_decoded, "focus warm-up");
            }
        }));
    }

    /// Brings a freshly opened document's prompt into the KV cache, so that the first keystroke is warm.
    fn warm_up(&self, uri: &str) {
        let settings = self.settings();
        if settings.is_excluded(uri) {
            return;
        }
        let extra = self.other_files_context(uri, &settings);
        let Some(document) = self.documents.get(uri) else {
            return;
        };
        if !settings.inline_enabled_for(&document.language_id) {
            return;
        }
        let cancel = self.engine.background_token();
        let path = suggest::display_path(uri);
        let request =
            suggest::warm_up(&document, Some(&path), &extra, suggest::lane_of(uri), &settings.inline, cancel.clone());
        drop(document);
        // A warm-up never cancels a real request.
        if !self.register_warm_up(uri, &cancel) {
            return;
        }
        let engine = self.engine.clone();
        self.background.keep(tokio::spawn(async move {
            let _ = engine.complete(request).await;
        }));
    }

    /// Registers background work for `uri` only when nothing runs for it: background work never cancels a
    /// request, and a later request or edit of the document cancels it.
    fn register_background(&self, uri: &str, cancel: &CancellationToken) -> bool {
        self.register(uri, cancel, false)
    }

    /// [`Self::register_background`] for a warm-up, which a later focus may replace.
    fn register_warm_up(&self, uri: &str, cancel: &CancellationToken) -> bool {
        self.register(uri, cancel, true)
    }

    fn register(&self, uri: &str, cancel: &CancellationToken, warm_up: bool) -> bool {
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        match self.inflight.entry(uri.to_owned()) {
            dashmap::Entry::Occupied(_) => false,
            dashmap::Entry::Vacant(vacant) => {
                vacant.insert(Inflight { id: request_id, cancel: cancel.clone(), warm_up });
                true
            }
        }
    }

    fn cancel_inflight(&self, uri: &str) {
        if let Some((_, inflight)) = self.inflight.remove(uri) {
            inflight.cancel.cancel();
        }
    }

    /// Chunks of other recently opened or edited documents for the front of a prompt in `uri`.
    fn other_files_context(&self, uri: &str, settings: &Settings) -> String {
        let ring = self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        context::other_files(&ring, &self.documents, uri, settings)
    }

    /// Runs a task (fix, tests, regex) to a verified edit made for the document as it still is, or a message
    /// saying plainly why there is none. The task runs on a blocking thread with a time limit (it parses every
    /// candidate and matches regexes), so the caller's async workers stay free; `cancel` stops it.
    pub async fn run_task(&self, task: &TaskRequest, cancel: CancellationToken) -> Result<TaskResult, String> {
        let kind = task.kind;
        let settings = self.settings();
        if settings.is_excluded(&task.uri) {
            return Err(
                "Spark: this file is excluded from model context (a secret-looking name or context.ignore)".into()
            );
        }
        let engine = self.engine.clone();
        match engine.state() {
            EngineState::Ready(_) => {}
            EngineState::Loading { .. } => return Err("Spark's model is still loading; try again in a moment".into()),
            EngineState::Failed { error } => return Err(format!("Spark: {error}")),
        }
        let (mut snapshot, target) = {
            let document = self.documents.get(&task.uri).ok_or("Spark: the document is not open")?;
            if let Some(version) = task.version {
                verify::check_version(version, document.version)
                    .map_err(|_| "Spark: the document changed since the action was listed; ask again".to_owned())?;
            }
            let lang = document.lang.ok_or("Spark: no grammar for this language")?;
            let tree = document.tree.clone().ok_or("Spark: the document is too large to parse")?;
            let start = document.offset(task.start, self.encoding).byte;
            let end = document.offset(task.end, self.encoding).byte.max(start);
            let snapshot = TaskDocument {
                text: document.text(),
                lang,
                tree,
                path: self.path_of(&task.uri),
                version: document.version,
                revision: document.revision,
                open_files: Vec::new(),
            };
            (snapshot, TaskTarget { range: start..end, message: task.message.clone() })
        };
        snapshot.open_files = self.open_files_for(kind, &snapshot);
        let route = match kind {
            TaskKind::Fix => settings.remote.fix,
            TaskKind::Tests => settings.remote.tests,
            TaskKind::Regex => settings.remote.regex,
        };
        let remote = self.remote();
        let job = TaskJob {
            kind,
            document: snapshot,
            target,
            budget: TaskBudget {
                verify: settings.verify,
                fix_region: settings.tasks.fix_region,
                ..TaskBudget::default()
            },
            tiers: settings.tasks.clone(),
            fast_config: settings.engine_config(),
            remote: remote.clone(),
            route,
        };
        let TaskRun { outcome, remote_error, document: snapshot } = match self.tasks.run(job, &cancel).await {
            Ok(run) => run,
            // Answered by the front end's panic guard, like a panic in the handler itself.
            Err(TaskError::Panicked(payload)) => std::panic::resume_unwind(payload),
            Err(error) => return Err(format!("Spark: {error}")),
        };
        let served = if remote.is_some() && route != Route::Local { Some(Served::Remote) } else { None };
        self.note_remote(remote_error, served);
        tracing::info!(
            task = kind.command(),
            tier = outcome.tier.name(),
            verified = outcome.verified(),
            samples = outcome.samples_tried,
            ms = outcome.ms,
            rejections = ?outcome.rejections,
            "task"
        );
        if !outcome.verified() {
            let reason =
                outcome.rejections.last().map(|reason| format!(" (last candidate: {reason})")).unwrap_or_default();
            return Err(format!("{}{reason}", kind.nothing_verified()));
        }
        let current = self.documents.get(&task.uri).map(|document| (document.version, document.revision));
        let unchanged = current.is_some_and(|(version, revision)| {
            verify::check_version(snapshot.version, version).is_ok() && revision == snapshot.revision
        });
        let others_unchanged = snapshot.open_files.iter().all(|file| {
            let now = self.uri_of_path(&file.path).and_then(|uri| self.documents.get(&uri).map(|doc| doc.version));
            now.is_none_or(|version| version == file.version)
        });
        if !unchanged || !others_unchanged {
            return Err("Spark: the document changed while the edit was computed; ask again".to_owned());
        }
        Ok(TaskResult { snapshot, outcome })
    }

    /// The next edits predicted for `uri` from its recent edits by the rules (no model), ordered from
    /// `position` (else from the end of the last edit). `None` when the document is not open; see
    /// [`NextEditService::next_edits`].
    pub fn next_edits(&self, uri: &str, position: Option<LspPosition>) -> Option<NextEdits> {
        let document = self.document(uri)?;
        Some(self.next_edit.next_edits(uri, &document, &self.settings(), self.encoding, position))
    }

    /// What was already computed for the document's current revision, else nothing: for the keystroke path,
    /// which must not compute it.
    pub fn next_edits_cached(&self, uri: &str, position: Option<LspPosition>) -> Option<NextEdits> {
        let document = self.document(uri)?;
        self.next_edit.next_edits_cached(uri, &document, || self.settings(), self.encoding, position)
    }

    /// The rules' next edits and what is left for the document's revision (the model, the execution check);
    /// see [`NextEditService::next_edits_with_model`].
    pub async fn next_edits_with_model(
        &self,
        uri: &str,
        position: Option<LspPosition>,
        cancel: CancellationToken,
    ) -> Option<NextEdits> {
        let document = self.document(uri)?;
        let model = NextEditModel { engine: self.engine.clone(), remote: self.remote(), path: self.path_of(uri) };
        let revision_now = || self.documents.get(uri).map(|now| now.revision);
        let settings = self.settings();
        let found = self
            .next_edit
            .next_edits_with_model(uri, &document, &settings, self.encoding, model, revision_now, position, cancel)
            .await;
        Some(found)
    }

    fn uri_of_path(&self, path: &Path) -> Option<String> {
        self.paths.iter().find(|entry| entry.value() == path).map(|entry| entry.key().clone())
    }

    /// The files besides the document that a task reads, from the store when the editor has them open (their
    /// unsaved text, at its version); the task reads the others from disk.
    fn open_files_for(&self, kind: TaskKind, snapshot: &TaskDocument) -> Vec<OpenFile> {
        let Some(path) = snapshot.path.as_deref() else { return Vec::new() };
        tasks::files_read(kind, snapshot.lang, path)
            .into_iter()
            .filter_map(|path| {
                let uri = self.uri_of_path(&path)?;
                let document = self.documents.get(&uri)?;
                Some(OpenFile { path, text: document.text(), version: document.version })
            })
            .collect()
    }

    /// The model's state, the last latency, the remote, the execution tier, the strong tier and the engine's
    /// counters (`spark/status`).
    pub fn status(&self) -> Status {
        let last_latency = self.last_latency_ms.load(Ordering::Relaxed);
        let counters = self.engine.counters();
        let remote = self.remote().map(|remote| RemoteStatus {
            url: remote.config().url.clone(),
            model: remote.config().model.clone(),
            down: remote.last_failure().map(|(_, last_error, retry_at)| {
                (last_error, retry_at.saturating_duration_since(std::time::Instant::now()))
            }),
            counters: remote.counters(),
        });
        Status {
            state: self.engine.state(),
            remote,
            verify: self.settings().verify,
            strong_tier: self.tasks.strong_loaded_path(),
            last_latency_ms: (last_latency != NO_LATENCY).then_some(last_latency),
            totals: Totals::of(counters),
            last: *counters.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
        }
    }

    /// The engine's most recent model calls with their counters and timings, oldest first.
    pub fn recent_calls(&self) -> Vec<RecentCall> {
        self.engine.counters().recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().copied().collect()
    }
}
