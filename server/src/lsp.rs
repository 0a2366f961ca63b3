//! The LSP front: capabilities, document sync, ghost text (`textDocument/inlineCompletion` and the
//! `textDocument/completion` fallback), progress while the model loads, and Spark's own methods
//! (`spark/status`, `spark/statusChanged`; see docs/lsp-extensions.md).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use dashmap::DashMap;
use futures::FutureExt;
use serde_json::{json, Value};
use spark_engine::{Engine, EngineError, EngineState, RemoteClient, RemoteError, RemoteHealth, StopReason};
use tokio_util::sync::CancellationToken;
use tower_lsp_server::jsonrpc::{Error as JsonRpcError, ErrorCode, Id, Request, Response, Result};
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, ExitedError, LanguageServer, LspService};

use crate::actions::{self, ActionData};
use crate::config::Settings;
use crate::document::{Change, Document};
use crate::edit_check;
use crate::position::{self, LspPosition, PositionEncoding};
use crate::ring::{self, Ring};
use crate::route::{Generator, Route, Served};
use crate::suggest;
use crate::tasks::{self, OpenFile, TaskBudget, TaskDocument, TaskKind, TaskTarget};
use crate::tiers::{self, StrongModel, Tier};
use crate::verify;

/// `spark/statusChanged`: the model's state, sent whenever it changes.
pub enum StatusChanged {}

impl Notification for StatusChanged {
    type Params = Value;
    const METHOD: &'static str = "spark/statusChanged";
}

pub struct Spark {
    client: Client,
    documents: Arc<DashMap<Uri, Document>>,
    engine: OnceLock<Arc<Engine>>,
    settings: RwLock<Settings>,
    encoding: OnceLock<PositionEncoding>,
    /// The running ghost-text request of each document: a newer request or an edit cancels it.
    inflight: DashMap<Uri, (u64, CancellationToken)>,
    next_request_id: AtomicU64,
    last_latency_ms: AtomicU64,
    client_has_progress: AtomicBool,
    resolve_supported: AtomicBool,
    /// The debounced syntax-diagnostics task of each document.
    diagnostics_tasks: DashMap<Uri, tokio::task::JoinHandle<()>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The remote endpoint, when `remote.url` is configured; `None` otherwise (nothing leaves the machine).
    remote: RwLock<Option<RemoteClient>>,
    /// Set after the user was told the remote failed; cleared when it answers again (one notice, not one per
    /// keystroke).
    remote_warned: AtomicBool,
    /// Recently opened or edited places, for the other-files context of ghost-text prompts.
    ring: Mutex<Ring<Uri>>,
    /// The tasks' strong tier, loaded on first need and unloaded when idle.
    strong: Arc<StrongModel>,
    /// `SPARK_TEST_PANIC`, read once at start: the LSP method whose handler panics on purpose (tests of the
    /// panic guard; nothing else reads it).
    test_panic: Option<String>,
}

const NO_LATENCY: u64 = u64::MAX;

/// How long a task (fix, tests, regex) may run before it is stopped: its sampling budget and a margin.
const TASK_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);
/// What the strong tier's first load may add to a task's time limit.
const STRONG_LOAD_MARGIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs CPU work (a parse, a verification) on tokio's blocking pool: the future that reads input (tower-lsp
/// polls every handler inside it) only waits. A panic in `work` is resumed here, for the panic guard.
async fn off_the_input_loop<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => match error.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(error) => panic!("blocking work cancelled: {error}"),
        },
    }
}

/// How long a prefetch may use the model thread when nothing else needs it.
const PREFETCH_BUDGET: std::time::Duration = std::time::Duration::from_millis(1500);

/// The service with Spark's custom methods registered, every handler behind [`CatchPanic`].
pub fn service() -> (CatchPanic<LspService<Spark>>, tower_lsp_server::ClientSocket) {
    let (service, socket) = LspService::build(Spark::new)
        .custom_method("textDocument/inlineCompletion", Spark::inline_completion)
        .custom_method("spark/status", Spark::status)
        .custom_method("spark/recentCalls", Spark::recent_calls)
        .finish();
    (CatchPanic(service), socket)
}

/// The one wrapper every request and notification goes through: a panic in a handler is logged and answered
/// with an internal error (a notification's is only logged), and the server reads the next message. Without it
/// the panic unwinds through tower-lsp's loop and the server stops answering.
#[derive(Debug, Clone)]
pub struct CatchPanic<S>(pub S);

impl<S> tower_service::Service<Request> for CatchPanic<S>
where
    S: tower_service::Service<Request, Response = Option<Response>, Error = ExitedError>,
    S::Future: Send + 'static,
{
    type Response = Option<Response>;
    type Error = ExitedError;
    type Future = futures::future::BoxFuture<'static, std::result::Result<Option<Response>, ExitedError>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::result::Result<(), ExitedError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let id = request.id().cloned();
        let method = request.method().to_owned();
        let inner = &mut self.0;
        let future = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.call(request))) {
            Ok(future) => future,
            Err(payload) => return Box::pin(futures::future::ready(Ok(answer_panic(id, &method, payload.as_ref())))),
        };
        Box::pin(async move {
            match AssertUnwindSafe(future).catch_unwind().await {
                Ok(result) => result,
                Err(payload) => Ok(answer_panic(id, &method, payload.as_ref())),
            }
        })
    }
}

/// The error response to a handler's panic (none for a notification), after logging it.
fn answer_panic(id: Option<Id>, method: &str, payload: &(dyn std::any::Any + Send)) -> Option<Response> {
    let reason = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    tracing::error!(method, %reason, "panic in a handler; answered with an internal error");
    let error = JsonRpcError {
        code: ErrorCode::InternalError,
        message: format!("Spark: internal error in {method} (see the server log)").into(),
        data: None,
    };
    id.map(|id| Response::from_error(id, error))
}

impl Spark {
    pub fn new(client: Client) -> Spark {
        Spark {
            client,
            documents: Arc::new(DashMap::new()),
            engine: OnceLock::new(),
            settings: RwLock::new(Settings::default()),
            encoding: OnceLock::new(),
            inflight: DashMap::new(),
            next_request_id: AtomicU64::new(1),
            last_latency_ms: AtomicU64::new(NO_LATENCY),
            client_has_progress: AtomicBool::new(false),
            resolve_supported: AtomicBool::new(false),
            diagnostics_tasks: DashMap::new(),
            tasks: Mutex::new(Vec::new()),
            remote: RwLock::new(None),
            remote_warned: AtomicBool::new(false),
            ring: Mutex::new(Ring::default()),
            strong: Arc::new(StrongModel::default()),
            test_panic: std::env::var("SPARK_TEST_PANIC").ok().filter(|method| !method.is_empty()),
        }
    }

    /// The test-only hook: panics in the handler of `method` when `SPARK_TEST_PANIC` named it at start.
    fn panic_if_asked(&self, method: &str) {
        if self.test_panic.as_deref() == Some(method) {
            panic!("SPARK_TEST_PANIC: a panic on purpose in {method}");
        }
    }

    fn remote(&self) -> Option<RemoteClient> {
        self.remote.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Builds (or drops) the remote client for these settings and opens its connection in the background.
    async fn configure_remote(&self, settings: &Settings) {
        let client = if settings.remote.configured() {
            match RemoteClient::new(settings.remote.client_config()) {
                Ok(client) => Some(client),
                Err(error) => {
                    self.client.show_message(MessageType::ERROR, format!("Spark: remote.url: {error}")).await;
                    None
                }
            }
        } else {
            None
        };
        if let Some(client) = &client {
            let warm = client.clone();
            let handle = tokio::spawn(async move {
                if let Err(error) = warm.warm().await {
                    tracing::warn!(%error, "remote endpoint not reachable at start-up; will retry");
                }
            });
            self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(handle);
        }
        self.remote_warned.store(false, Ordering::Relaxed);
        *self.remote.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = client;
    }

    /// Tells the user once that the remote failed and the local model serves instead.
    async fn note_remote(&self, error: Option<RemoteError>, served: Option<Served>) {
        match error {
            Some(RemoteError::Cancelled) => {}
            Some(error) if !self.remote_warned.swap(true, Ordering::Relaxed) => {
                let message =
                    format!("Spark: the remote endpoint failed ({error}); the local model serves until it recovers");
                self.client.show_message(MessageType::WARNING, message).await;
            }
            Some(_) => {}
            None if served == Some(Served::Remote) => self.remote_warned.store(false, Ordering::Relaxed),
            None => {}
        }
    }

    fn encoding(&self) -> PositionEncoding {
        self.encoding.get().copied().unwrap_or_default()
    }

    fn settings(&self) -> Settings {
        self.settings.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// `textDocument/inlineCompletion` (LSP 3.18).
    pub async fn inline_completion(&self, params: InlineCompletionParams) -> Result<Option<InlineCompletionResponse>> {
        let TextDocumentPositionParams { text_document, position } = params.text_document_position;
        let items = match self.suggest(&text_document.uri, position).await {
            Some(found) => vec![InlineCompletionItem {
                insert_text: found.text,
                filter_text: None,
                range: Some(Range::new(found.position, found.position)),
                command: None,
                insert_text_format: None,
            }],
            None => Vec::new(),
        };
        Ok(Some(InlineCompletionResponse::List(InlineCompletionList { items })))
    }

    /// `spark/status`: the model's state, the last latency and the engine's counters.
    pub async fn status(&self) -> Result<Value> {
        Ok(self.status_json())
    }

    /// `spark/recentCalls`: the engine's most recent model calls with their counters and timings, oldest first
    /// (for benchmarks and for seeing where time goes).
    pub async fn recent_calls(&self) -> Result<Value> {
        let Some(engine) = self.engine.get() else {
            return Ok(json!([]));
        };
        let recent = engine.counters().recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        Ok(Value::Array(
            recent
                .iter()
                .map(|call| {
                    let stats = call.stats;
                    json!({
                        "stop": format!("{:?}", call.stop), "background": call.background, "producedBytes": call.produced,
                        "nPrompt": stats.n_prompt, "nReused": stats.n_reused, "nDecoded": stats.n_decoded,
                        "nGenerated": stats.n_generated, "queueMs": stats.queue_ms, "promptMs": stats.prompt_ms,
                        "firstTokenMs": stats.first_token_ms, "generateUs": stats.generate_us,
                        "totalMs": stats.total_ms, "slot": stats.slot, "nCopied": stats.n_copied,
                        "nDrafted": stats.n_drafted, "nAccepted": stats.n_accepted,
                    })
                })
                .collect(),
        ))
    }

    fn status_json(&self) -> Value {
        let Some(engine) = self.engine.get() else {
            return json!({"state": "starting", "message": "waiting for initialize", "model": null, "lastLatencyMs": null});
        };
        let last_latency = self.last_latency_ms.load(Ordering::Relaxed);
        let counters = engine.counters();
        let last = *counters.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut status = state_json(&engine.state());
        status["remote"] = match self.remote() {
            None => json!({"configured": false}),
            Some(remote) => {
                let counters = remote.counters();
                let (health, last_error) = match remote.health() {
                    RemoteHealth::Up => ("up", Value::Null),
                    RemoteHealth::Down { last_error, .. } => ("down", json!(last_error)),
                };
                json!({
                    "configured": true, "url": remote.config().url, "model": remote.config().model,
                    "health": health, "lastError": last_error,
                    "requests": counters.n_requests, "connections": counters.n_connects, "failures": counters.n_failures,
                })
            }
        };
        let verify = self.settings().verify;
        status["verify"] = json!({
            "compile": verify.compile, "runTests": verify.run_tests, "timeoutMs": verify.timeout_ms,
            "commands": verify.commands(),
        });
        status["strongTier"] = match self.strong.loaded_path() {
            Some(path) => json!({"loaded": true, "path": path}),
            None => json!({"loaded": false}),
        };
        status["lastLatencyMs"] = if last_latency == NO_LATENCY { Value::Null } else { json!(last_latency) };
        status["counters"] = json!({
            "requests": counters.requests.load(Ordering::Relaxed),
            "superseded": counters.superseded.load(Ordering::Relaxed),
            "cancelled": counters.cancelled.load(Ordering::Relaxed),
            "nPrompt": counters.n_prompt.load(Ordering::Relaxed),
            "nReused": counters.n_reused.load(Ordering::Relaxed),
            "nDecoded": counters.n_decoded.load(Ordering::Relaxed),
            "nGenerated": counters.n_generated.load(Ordering::Relaxed),
            "cacheHits": counters.cache_hits.load(Ordering::Relaxed),
            "nCopied": counters.n_copied.load(Ordering::Relaxed),
            "nDrafted": counters.n_drafted.load(Ordering::Relaxed),
            "nAccepted": counters.n_accepted.load(Ordering::Relaxed),
            "last": last.map(|stats| json!({
                "nPrompt": stats.n_prompt, "nReused": stats.n_reused, "nDecoded": stats.n_decoded,
                "nGenerated": stats.n_generated, "queueMs": stats.queue_ms, "promptMs": stats.prompt_ms, "totalMs": stats.total_ms,
                "slot": stats.slot, "nCopied": stats.n_copied, "nDrafted": stats.n_drafted, "nAccepted": stats.n_accepted,
            })),
        });
        status
    }

    async fn suggest(&self, uri: &Uri, position: Position) -> Option<Found> {
        let engine = self.engine.get()?.clone();
        let settings = self.settings();
        let encoding = self.encoding();
        let cancel = CancellationToken::new();
        let lane = suggest::lane_of(uri.as_str());
        if settings.is_excluded(uri.as_str()) {
            return None;
        }
        // Read before the document is borrowed: it reads other documents of the store.
        let extra = self.other_files_context(uri, &settings);
        // Everything read from the document happens before the first await.
        let prepared = {
            let Some(document) = self.documents.get(uri) else {
                tracing::warn!(uri = uri.as_str(), "suggestion asked for a document that is not open");
                return None;
            };
            if !settings.inline_enabled_for(&document.language_id) {
                return None;
            }
            let resolved = document.offset(to_lsp(position), encoding);
            if resolved.clamped {
                tracing::warn!(
                    uri = uri.as_str(),
                    line = position.line,
                    character = position.character,
                    "position out of range; clamped"
                );
            }
            let path = suggest::display_path(uri.as_str());
            suggest::prepare(&document, resolved.byte, Some(&path), &extra, lane, &settings.inline, cancel.clone())
        };
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        if let Some((_, previous)) = self.inflight.insert(uri.clone(), (request_id, cancel.clone())) {
            previous.cancel();
        }
        // tower-lsp cancels a request by dropping its future: the guard then stops the model too.
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
                tracing::debug!(uri = uri.as_str(), "suggestion cancelled by a newer request or an edit");
                return None;
            }
        };
        let served = result.as_ref().ok().map(|generated| generated.served);
        self.note_remote(generator.take_remote_error(), served).await;
        let result = result.map(|generated| generated.completion);
        self.inflight.remove_if(uri, |_, (id, _)| *id == request_id);
        let completion = match result {
            Ok(completion) => completion,
            Err(EngineError::Loading) => return None,
            Err(error) => {
                tracing::debug!(%error, "no suggestion");
                return None;
            }
        };
        let local = settings.inline.route == Route::Local;
        // Cut by the deadline while generating: the whole suggestion is computed in the background and cached, for
        // the next request in this state or typed along it.
        let cut = completion.stop == StopReason::Deadline && completion.stats.n_generated > 0;
        if cut && local {
            self.continue_in_background(uri, &engine, request.clone());
        }
        if completion.text.is_empty() {
            tracing::debug!(stop = ?completion.stop, "no suggestion");
            let cold = completion.stop == StopReason::Deadline && completion.stats.n_generated == 0;
            if cold && local {
                self.finish_prompt_in_background(uri, &engine, request);
            }
            return None;
        }
        let document = self.documents.get(uri)?.clone();
        if document.version != prepared.version || document.revision != prepared.revision {
            tracing::debug!(uri = uri.as_str(), "suggestion dropped: the document changed while it was computed");
            return None;
        }
        // The check parses the document with the suggestion in it: CPU work, kept off the loop that reads input.
        let checked = {
            let (document, byte, text) = (document.clone(), prepared.byte, completion.text);
            off_the_input_loop(move || verify::check_insertion(&document, byte, &text)).await
        };
        let text = checked?;
        if self.documents.get(uri).is_none_or(|now| now.revision != prepared.revision) {
            tracing::debug!(uri = uri.as_str(), "suggestion dropped: the document changed while it was checked");
            return None;
        }
        if settings.inline.prefetch && local && !cut {
            self.prefetch_accepted(uri, &document, prepared.byte, &text, &extra, &settings);
        }
        let latency = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_latency_ms.store(latency, Ordering::Relaxed);
        let position = position::to_position(&document.rope, prepared.byte, encoding);
        let word_start = suggest::word_start(&document, prepared.byte);
        let word = document.rope.byte_slice(word_start..prepared.byte).to_string();
        let word_position = position::to_position(&document.rope, word_start, encoding);
        tracing::info!(
            latency_ms = latency,
            n_reused = completion.stats.n_reused,
            n_decoded = completion.stats.n_decoded,
            n_generated = completion.stats.n_generated,
            "suggestion"
        );
        Some(Found { text, position: from_lsp(position), word, word_position: from_lsp(word_position) })
    }

    /// After a suggestion is shown, computes the one for the state where it is accepted, so that accepting it
    /// shows the next one from the cache. Low priority: the engine runs it only when no keystroke waits and
    /// cancels it when one arrives; an edit of the document or a newer request cancels it too.
    fn prefetch_accepted(
        &self,
        uri: &Uri,
        document: &Document,
        byte: usize,
        shown: &str,
        extra: &str,
        settings: &Settings,
    ) {
        let Some(engine) = self.engine.get().cloned() else {
            return;
        };
        let cancel = engine.background_token();
        if !self.register_background(uri, &cancel) {
            return;
        }
        let mut accepted = document.clone();
        let shown = shown.to_owned();
        let extra = extra.to_owned();
        let path = suggest::display_path(uri.as_str());
        let lane = suggest::lane_of(uri.as_str());
        let inline = settings.inline.clone();
        let handle = tokio::spawn(async move {
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
        });
        self.keep_task(handle);
    }

    /// Computes in the background the whole suggestion that the deadline cut, and caches it as the shown one: a
    /// client that asks again in the same state (Helix's completion menu) or the user typing along it gets all
    /// of it without a model call. Any keystroke cancels it.
    fn continue_in_background(&self, uri: &Uri, engine: &Arc<Engine>, mut request: spark_engine::CompletionRequest) {
        let cancel = engine.background_token();
        if !self.register_background(uri, &cancel) {
            return;
        }
        request.background = true;
        request.cancel = cancel;
        request.deadline = Instant::now() + PREFETCH_BUDGET;
        let engine = engine.clone();
        let handle = tokio::spawn(async move {
            if let Ok(completion) = engine.complete(request.clone()).await {
                request.background = false;
                engine.remember(&request, &completion);
            }
        });
        self.keep_task(handle);
    }

    /// The deadline came while the prompt was still being evaluated (a cold cache: the user switched files, or
    /// jumped far): the rest of it is evaluated in the background, so that after a pause the next keystroke finds
    /// it in the KV cache. Any keystroke cancels it; what was evaluated stays cached.
    fn finish_prompt_in_background(
        &self,
        uri: &Uri,
        engine: &Arc<Engine>,
        mut request: spark_engine::CompletionRequest,
    ) {
        let cancel = engine.background_token();
        if !self.register_background(uri, &cancel) {
            return;
        }
        request.max_tokens = 0;
        request.background = true;
        request.cancel = cancel;
        request.deadline = Instant::now() + std::time::Duration::from_secs(30);
        let engine = engine.clone();
        let handle = tokio::spawn(async move {
            let _ = engine.complete(request).await;
        });
        self.keep_task(handle);
    }

    fn spawn_status_watcher(&self, engine: Arc<Engine>) {
        let client = self.client.clone();
        let has_progress = self.client_has_progress.load(Ordering::Relaxed);
        let handle = tokio::spawn(async move {
            let mut states = engine.subscribe();
            let mut progress = None;
            let mut progress_serial = 0u32;
            loop {
                let state = states.borrow_and_update().clone();
                client.send_notification::<StatusChanged>(state_json(&state)).await;
                match &state {
                    EngineState::Loading { path } => {
                        if has_progress && progress.is_none() {
                            progress_serial += 1;
                            let token = NumberOrString::String(format!("spark/model-load/{progress_serial}"));
                            if client.create_work_done_progress(token.clone()).await.is_ok() {
                                let message = format!("loading {}", path.display());
                                progress = Some(client.progress(token, "Spark").with_message(message).begin().await);
                            }
                        }
                    }
                    EngineState::Ready(info) => {
                        if let Some(ongoing) = progress.take() {
                            ongoing.finish_with_message(format!("model ready ({} ms)", info.load_ms)).await;
                        }
                    }
                    EngineState::Failed { error } => {
                        if let Some(ongoing) = progress.take() {
                            ongoing.finish_with_message("model failed to load").await;
                        }
                        client.show_message(MessageType::ERROR, format!("Spark: {error}")).await;
                    }
                }
                if states.changed().await.is_err() {
                    return;
                }
            }
        });
        self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(handle);
    }

    /// Registers background work for `uri` only when nothing runs for it: background work never cancels a
    /// request, and a later request or edit of the document cancels it.
    fn register_background(&self, uri: &Uri, cancel: &CancellationToken) -> bool {
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        match self.inflight.entry(uri.clone()) {
            dashmap::Entry::Occupied(_) => false,
            dashmap::Entry::Vacant(vacant) => {
                vacant.insert((request_id, cancel.clone()));
                true
            }
        }
    }

    /// Keeps a spawned task's handle (aborted at shutdown), dropping those that finished.
    fn keep_task(&self, handle: tokio::task::JoinHandle<()>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle);
    }

    /// Chunks of other recently opened or edited documents for the front of a prompt in `uri` (never from
    /// excluded files), within `context.otherFilesBytes`.
    fn other_files_context(&self, uri: &Uri, settings: &Settings) -> String {
        let budget = settings.context.other_files_bytes;
        if budget == 0 {
            return String::new();
        }
        let comment =
            self.documents.get(uri).and_then(|document| document.lang).map_or("//", |lang| lang.line_comment());
        let places = self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).chunks_for(uri);
        let mut chunks = Vec::new();
        let mut used = 0;
        for place in places {
            if used >= budget || settings.is_excluded(place.key.as_str()) {
                continue;
            }
            let Some(document) = self.documents.get(&place.key) else {
                continue;
            };
            let text = ring::cut(&document, place.start_line, budget - used);
            used += text.len();
            chunks.push((suggest::display_path(place.key.as_str()), text));
        }
        ring::render(&chunks, comment, budget)
    }

    fn warm_up(&self, uri: &Uri) {
        let Some(engine) = self.engine.get().cloned() else {
            return;
        };
        let settings = self.settings();
        if settings.is_excluded(uri.as_str()) {
            return;
        }
        let extra = self.other_files_context(uri, &settings);
        let Some(document) = self.documents.get(uri) else {
            return;
        };
        if !settings.inline_enabled_for(&document.language_id) {
            return;
        }
        let cancel = engine.background_token();
        let path = suggest::display_path(uri.as_str());
        let request = suggest::warm_up(&document, Some(&path), &extra, suggest::lane_of(uri.as_str()), cancel.clone());
        drop(document);
        // A warm-up never cancels a real request.
        if !self.register_background(uri, &cancel) {
            return;
        }
        let handle = tokio::spawn(async move {
            let _ = engine.complete(request).await;
        });
        self.keep_task(handle);
    }

    /// Publishes Spark's syntax diagnostics for a document once it has been quiet for a moment.
    fn schedule_diagnostics(&self, uri: &Uri) {
        let documents = self.documents.clone();
        let client = self.client.clone();
        let encoding = self.encoding();
        let uri_owned = uri.clone();
        let handle = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            let computed = documents
                .get(&uri_owned)
                .map(|document| (actions::syntax_diagnostics(&document, encoding), document.version));
            if let Some((diagnostics, version)) = computed {
                client.publish_diagnostics(uri_owned, diagnostics, Some(version)).await;
            }
        });
        if let Some(previous) = self.diagnostics_tasks.insert(uri.clone(), handle) {
            previous.abort();
        }
    }

    /// Runs a task for an action or command, to a verified edit or a message saying why there is none.
    async fn run_task(&self, data: &ActionData) -> std::result::Result<(WorkspaceEdit, String), String> {
        let kind = data.kind().ok_or_else(|| format!("unknown Spark command {:?}", data.task))?;
        if self.settings().is_excluded(data.uri.as_str()) {
            return Err(
                "Spark: this file is excluded from model context (a secret-looking name or context.ignore)".into()
            );
        }
        let engine = self.engine.get().cloned().ok_or("Spark is not initialized")?;
        match engine.state() {
            EngineState::Ready(_) => {}
            EngineState::Loading { .. } => return Err("Spark's model is still loading; try again in a moment".into()),
            EngineState::Failed { error } => return Err(format!("Spark: {error}")),
        }
        let encoding = self.encoding();
        let (snapshot, target) = {
            let document = self.documents.get(&data.uri).ok_or("Spark: the document is not open")?;
            if let Some(version) = data.version {
                edit_check::check_version(version, document.version)
                    .map_err(|_| "Spark: the document changed since the action was listed; ask again".to_owned())?;
            }
            let lang = document.lang.ok_or("Spark: no grammar for this language")?;
            let tree = document.tree.clone().ok_or("Spark: the document is too large to parse")?;
            let range = data.position.map(|position| Range::new(position, position)).unwrap_or(data.range);
            let start = document.offset(to_lsp(range.start), encoding).byte;
            let end = document.offset(to_lsp(range.end), encoding).byte.max(start);
            let path = data.uri.to_file_path().map(|path| path.into_owned());
            let snapshot = TaskDocument {
                text: document.text(),
                lang,
                tree,
                path,
                version: document.version,
                revision: document.revision,
                open_files: Vec::new(),
            };
            (snapshot, TaskTarget { range: start..end, message: data.message.clone() })
        };
        let mut snapshot = snapshot;
        snapshot.open_files = self.open_files_for(kind, &snapshot);
        let cancel = CancellationToken::new();
        let _stop_model_on_drop = cancel.clone().drop_guard();
        let settings = self.settings();
        let route = match kind {
            TaskKind::Fix => settings.remote.fix,
            TaskKind::Tests => settings.remote.tests,
            TaskKind::Regex => settings.remote.regex,
        };
        let remote = self.remote();
        let budget = TaskBudget { verify: settings.verify, ..TaskBudget::default() };
        let fast_config = settings.engine_config();
        let fast_path = match &fast_config.model {
            spark_engine::ModelSource::Path(path) => Some(path.clone()),
            spark_engine::ModelSource::None => None,
        };
        let strong_path = settings.tasks.strong_model_path(fast_path.as_deref());
        // The task parses every candidate and matches regexes: all of it runs on a blocking thread (driving the
        // model calls from there), so the loop that reads input keeps answering and `$/cancelRequest` gets in.
        let job = {
            let (engine, remote, cancel) = (engine.clone(), remote.clone(), cancel.clone());
            let (strong_model, task_settings, strong_path) =
                (self.strong.clone(), settings.tasks.clone(), strong_path.clone());
            let runtime = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                runtime.block_on(async move {
                    let generator = Generator::new(&engine, remote.as_ref(), route);
                    let strong = strong_path.map(|path| (strong_model.as_ref(), path, fast_config));
                    let outcome =
                        tiers::run(&generator, strong, &task_settings, kind, &snapshot, &target, budget, &cancel).await;
                    (outcome, generator.take_remote_error(), snapshot)
                })
            })
        };
        // With a strong tier the task may take its budget twice over, and the strong model's first load.
        // Execution checks (verify.*) may take their own time limit on top.
        let mut limit = TASK_TIME_LIMIT;
        if strong_path.is_some() {
            limit += std::time::Duration::from_millis(settings.tasks.strong_budget_ms) + STRONG_LOAD_MARGIN;
        }
        if settings.verify.compile || settings.verify.run_tests {
            limit += std::time::Duration::from_millis(settings.verify.timeout_ms);
        }
        let (outcome, remote_error, snapshot) = match tokio::time::timeout(limit, job).await {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => match error.try_into_panic() {
                // Answered by the panic guard, like a panic in the handler itself.
                Ok(payload) => std::panic::resume_unwind(payload),
                Err(error) => return Err(format!("Spark: the task stopped: {error}")),
            },
            Err(_) => {
                cancel.cancel();
                return Err(format!("Spark: the task took longer than {} s; stopped", limit.as_secs()));
            }
        };
        let outcome = outcome.map_err(|error| format!("Spark: {error}"))?;
        if strong_path.is_some() && outcome.tier == Tier::Strong {
            // Unloaded once idle: a later task reloads it.
            let strong = self.strong.clone();
            let idle = std::time::Duration::from_secs(settings.tasks.strong_idle_secs.max(1));
            self.keep_task(tokio::spawn(async move {
                tokio::time::sleep(idle).await;
                strong.unload_if_idle(idle).await;
            }));
        }
        let served = if remote.is_some() && route != Route::Local { Some(Served::Remote) } else { None };
        self.note_remote(remote_error, served).await;
        tracing::info!(
            task = data.task,
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
        let current = self.documents.get(&data.uri).map(|document| (document.version, document.revision));
        let unchanged = current.is_some_and(|(version, revision)| {
            edit_check::check_version(snapshot.version, version).is_ok() && revision == snapshot.revision
        });
        let others_unchanged = snapshot.open_files.iter().all(|file| {
            let now = Uri::from_file_path(&file.path).and_then(|uri| self.documents.get(&uri).map(|doc| doc.version));
            now.is_none_or(|version| version == file.version)
        });
        if !unchanged || !others_unchanged {
            return Err("Spark: the document changed while the edit was computed; ask again".to_owned());
        }
        Ok((actions::workspace_edit(&data.uri, &snapshot, encoding, &outcome), outcome.title))
    }

    /// The files besides the document that a task reads, from the store when the editor has them open (their
    /// unsaved text, at its version); the task reads the others from disk.
    fn open_files_for(&self, kind: TaskKind, snapshot: &TaskDocument) -> Vec<OpenFile> {
        let Some(path) = snapshot.path.as_deref() else { return Vec::new() };
        tasks::files_read(kind, snapshot.lang, path)
            .into_iter()
            .filter_map(|path| {
                let uri = Uri::from_file_path(&path)?;
                let document = self.documents.get(&uri)?;
                Some(OpenFile { path, text: document.text(), version: document.version })
            })
            .collect()
    }

    fn cancel_inflight(&self, uri: &Uri) {
        if let Some((_, (_, token))) = self.inflight.remove(uri) {
            token.cancel();
        }
    }
}

/// A verified suggestion and where it goes.
struct Found {
    text: String,
    position: Position,
    /// The identifier typed before the cursor, for completion-menu clients that filter by it.
    word: String,
    word_position: Position,
}

fn state_json(state: &EngineState) -> Value {
    match state {
        EngineState::Loading { path } => {
            json!({"state": "loading", "message": format!("loading {}", path.display()), "model": null})
        }
        EngineState::Ready(info) => json!({
            "state": "ready",
            "message": format!("{} ready", info.name),
            "model": {
                "path": info.path, "name": info.name, "arch": info.architecture, "sizeBytes": info.size_bytes,
                "fim": info.fim.as_ref().map(|fim| format!("{:?}", fim.family)), "threads": info.threads,
                "nCtx": info.n_ctx, "loadMs": info.load_ms,
            },
        }),
        EngineState::Failed { error } => {
            json!({"state": "failed", "message": error.to_string(), "model": null})
        }
    }
}

fn to_lsp(position: Position) -> LspPosition {
    LspPosition { line: position.line, character: position.character }
}

fn from_lsp(position: LspPosition) -> Position {
    Position::new(position.line, position.character)
}

impl LanguageServer for Spark {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let settings = match params.initialization_options.as_ref().map(Settings::from_json) {
            None => Settings::default(),
            Some(Ok(settings)) => settings,
            Some(Err(message)) => {
                tracing::warn!(%message, "initializationOptions ignored");
                self.client.show_message(MessageType::WARNING, format!("Spark: {message}; using defaults")).await;
                Settings::default()
            }
        };
        let offered: Vec<String> = params
            .capabilities
            .general
            .as_ref()
            .and_then(|general| general.position_encodings.as_ref())
            .map(|kinds| kinds.iter().map(|kind| kind.as_str().to_owned()).collect())
            .unwrap_or_default();
        let encoding = PositionEncoding::negotiate(&offered);
        let _ = self.encoding.set(encoding);
        let has_progress =
            params.capabilities.window.as_ref().and_then(|window| window.work_done_progress).unwrap_or(false);
        self.client_has_progress.store(has_progress, Ordering::Relaxed);
        let resolve_supported = params
            .capabilities
            .text_document
            .as_ref()
            .and_then(|text_document| text_document.code_action.as_ref())
            .and_then(|code_action| code_action.resolve_support.as_ref())
            .is_some_and(|support| support.properties.iter().any(|property| property == "edit"));
        self.resolve_supported.store(resolve_supported, Ordering::Relaxed);
        let engine = Arc::new(Engine::start(settings.engine_config()));
        let _ = self.engine.set(engine);
        self.configure_remote(&settings).await;
        *self.settings.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = settings;
        tracing::info!(encoding = encoding.as_lsp_str(), "initialized");

        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(PositionEncodingKind::from(encoding.as_lsp_str().to_owned())),
                text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                    open_close: Some(true),
                    change: Some(TextDocumentSyncKind::INCREMENTAL),
                    ..Default::default()
                })),
                completion_provider: Some(CompletionOptions { resolve_provider: Some(false), ..Default::default() }),
                inline_completion_provider: Some(OneOf::Left(true)),
                code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                    code_action_kinds: Some(vec![CodeActionKind::QUICKFIX, CodeActionKind::REFACTOR_REWRITE]),
                    resolve_provider: Some(true),
                    ..Default::default()
                })),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: actions::COMMANDS.iter().map(|command| (*command).to_owned()).collect(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            server_info: Some(ServerInfo { name: "spark-lsp".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        if let Some(engine) = self.engine.get().cloned() {
            self.spawn_status_watcher(engine);
        }
    }

    async fn shutdown(&self) -> Result<()> {
        for entry in self.inflight.iter() {
            entry.value().1.cancel();
        }
        let tasks: Vec<_> = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).drain(..).collect();
        for task in tasks {
            task.abort();
        }
        if let Some(engine) = self.engine.get().cloned() {
            let _ = tokio::task::spawn_blocking(move || engine.shutdown()).await;
        }
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let item = params.text_document;
        let lang = spark_grammars::Lang::from_language_id(&item.language_id)
            .or_else(|| spark_grammars::Lang::from_path(std::path::Path::new(item.uri.path().as_str())));
        let document = Document::new(&item.text, &item.language_id, lang, item.version);
        self.documents.insert(item.uri.clone(), document);
        self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).touch(&item.uri, 0);
        self.schedule_diagnostics(&item.uri);
        self.warm_up(&item.uri);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let version = params.text_document.version;
        let encoding = self.encoding();
        let changes: Vec<Change> = params
            .content_changes
            .into_iter()
            .map(|change| Change {
                range: change.range.map(|range| (to_lsp(range.start), to_lsp(range.end))),
                text: change.text,
            })
            .collect();
        let edited_line = changes.first().and_then(|change| change.range).map(|(start, _)| start.line as usize);
        {
            let Some(mut document) = self.documents.get_mut(&uri) else {
                tracing::warn!(uri = uri.as_str(), "didChange for a document that is not open; ignored");
                return;
            };
            if version <= document.version {
                tracing::warn!(
                    uri = uri.as_str(),
                    old = document.version,
                    new = version,
                    "document version did not increase"
                );
            }
            let report = document.apply_changes(&changes, encoding, version);
            if report.clamped_positions > 0 || report.inverted_ranges > 0 {
                tracing::warn!(
                    uri = uri.as_str(),
                    clamped = report.clamped_positions,
                    inverted = report.inverted_ranges,
                    "didChange ranges out of bounds; clamped"
                );
            }
        }
        if let Some(line) = edited_line {
            self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).touch(&uri, line);
        }
        // Writes win: whatever was being computed for the old text is stale now.
        self.cancel_inflight(&uri);
        self.schedule_diagnostics(&uri);
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        self.cancel_inflight(&uri);
        if let Some((_, task)) = self.diagnostics_tasks.remove(&uri) {
            task.abort();
        }
        self.documents.remove(&uri);
        self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).forget(&uri);
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        let settings = match Settings::from_json(&params.settings) {
            Ok(settings) => settings,
            Err(message) => {
                self.client.show_message(MessageType::WARNING, format!("Spark: {message}; settings unchanged")).await;
                return;
            }
        };
        let old = std::mem::replace(
            &mut *self.settings.write().unwrap_or_else(|poisoned| poisoned.into_inner()),
            settings.clone(),
        );
        if old.remote != settings.remote {
            self.configure_remote(&settings).await;
        }
        let new_config = settings.engine_config();
        let model_unusable = matches!(self.engine.get().map(|engine| engine.state()), Some(EngineState::Failed { .. }));
        if old.engine_config() != new_config || model_unusable {
            if let Some(engine) = self.engine.get() {
                tracing::info!("model settings changed; reloading");
                let _ = engine.reload(new_config);
            }
        }
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let TextDocumentPositionParams { text_document, position } = params.text_document_position;
        let Some(found) = self.suggest(&text_document.uri, position).await else {
            return Ok(Some(CompletionResponse::List(CompletionList { is_incomplete: true, items: Vec::new() })));
        };
        let first_line = found.text.lines().next().unwrap_or("").trim();
        let label: String = format!("{}{}", found.word, first_line).chars().take(80).collect();
        let new_text = format!("{}{}", found.word, found.text);
        let item = CompletionItem {
            label,
            kind: Some(CompletionItemKind::TEXT),
            detail: Some("Spark".into()),
            documentation: Some(Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: format!("```\n{new_text}\n```"),
            })),
            preselect: Some(true),
            sort_text: Some("0".into()),
            filter_text: Some(new_text.clone()),
            insert_text_format: Some(InsertTextFormat::PLAIN_TEXT),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                Range::new(found.word_position, found.position),
                new_text,
            ))),
            ..Default::default()
        };
        Ok(Some(CompletionResponse::List(CompletionList { is_incomplete: true, items: vec![item] })))
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        self.panic_if_asked("textDocument/codeAction");
        let encoding = self.encoding();
        let resolve = self.resolve_supported.load(Ordering::Relaxed);
        // A file whose text must not reach a model gets no model actions.
        if self.settings().is_excluded(params.text_document.uri.as_str()) {
            return Ok(None);
        }
        let Some(document) = self.documents.get(&params.text_document.uri) else { return Ok(None) };
        // Diagnostics of other servers are fix targets too; Spark's own are found again from the tree.
        let diagnostics: Vec<Diagnostic> = params
            .context
            .diagnostics
            .into_iter()
            .filter(|diagnostic| diagnostic.source.as_deref() != Some("spark"))
            .collect();
        let listed = actions::list(&document, &params.text_document.uri, params.range, &diagnostics, encoding, resolve);
        Ok((!listed.is_empty()).then_some(listed))
    }

    async fn code_action_resolve(&self, mut action: CodeAction) -> Result<CodeAction> {
        self.panic_if_asked("codeAction/resolve");
        let Some(data) = action.data.clone().and_then(|data| serde_json::from_value::<ActionData>(data).ok()) else {
            return Ok(action);
        };
        match self.run_task(&data).await {
            Ok((edit, _)) => action.edit = Some(edit),
            Err(message) => self.client.show_message(MessageType::INFO, message).await,
        }
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        self.panic_if_asked("workspace/executeCommand");
        let argument = params.arguments.into_iter().next().unwrap_or(Value::Null);
        let data = match serde_json::from_value::<ActionData>(argument) {
            Ok(mut data) => {
                data.task = params.command.clone();
                data
            }
            Err(error) => {
                let message =
                    format!("{}: expected an argument {{uri, range, version?, message?}}: {error}", params.command);
                return Err(tower_lsp_server::jsonrpc::Error::invalid_params(message));
            }
        };
        match self.run_task(&data).await {
            Ok((edit, title)) => {
                let applied = self.client.apply_edit(edit).await;
                match applied {
                    Ok(response) if response.applied => Ok(Some(json!({"applied": true, "title": title}))),
                    Ok(response) => {
                        let reason = response.failure_reason.unwrap_or_else(|| "the editor refused the edit".into());
                        self.client.show_message(MessageType::WARNING, format!("Spark: {reason}")).await;
                        Ok(Some(json!({"applied": false, "reason": reason})))
                    }
                    Err(error) => Ok(Some(json!({"applied": false, "reason": error.to_string()}))),
                }
            }
            Err(message) => {
                self.client.show_message(MessageType::INFO, message.clone()).await;
                Ok(Some(json!({"applied": false, "reason": message})))
            }
        }
    }
}
