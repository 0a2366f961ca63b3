//! The engine handle and its model thread. One OS thread owns the model, its context and KV cache; requests
//! arrive over a channel with a cancel token and a deadline, and each gets exactly one answer on a oneshot.
//! Newest wins: before each job the thread drains the queue and answers every superseded job at once.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::gguf::{self, GgufError};
use crate::memory::{self, KvKeys, MemoryEstimate};
use crate::model_info::ModelInfo;
use crate::session::{Completion, CompletionRequest, CompletionStats, Session, StopReason};
use crate::suggestion_cache::{CacheHit, SuggestionCache};

/// Which model to load and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    pub model: ModelSource,
    pub threads: usize,
    pub n_ctx: u32,
    /// The most memory the model may take, in MiB; `None` means the memory available when it loads, zero means
    /// no check.
    pub max_memory_mb: Option<u64>,
    /// KV-cache prefix reuse and the suggestion cache (`model.reuse`, default on). Off, every prompt is evaluated
    /// from an empty cache: the baseline the benchmark compares against.
    pub reuse: bool,
    /// KV slots (sequences in the one context); `None` derives the count from the memory limit.
    pub kv_slots: Option<u32>,
    /// Prompt-lookup speculative decoding for greedy requests (`model.speculative`, default off: llama.cpp
    /// evaluates a batch with other kernels than a single token, and on a near tie the output can differ from
    /// plain greedy decoding; see `local::SURE_MARGIN`).
    pub speculative: bool,
    /// How the KV cache stores keys (`model.kvCacheKeys`, default f16).
    pub kv_keys: KvKeys,
}

impl EngineConfig {
    /// A configuration with Spark's defaults for everything but the model and threads.
    pub fn new(model: ModelSource, threads: usize) -> EngineConfig {
        EngineConfig {
            model,
            threads,
            n_ctx: 4096,
            max_memory_mb: None,
            reuse: true,
            kv_slots: None,
            speculative: false,
            kv_keys: KvKeys::default(),
        }
    }
}

/// Where the model comes from; `None` when nothing is configured and the default is not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    Path(PathBuf),
    None,
}

/// The model's state, watched by the server (progress, status bar, `spark/status`).
#[derive(Debug, Clone, PartialEq)]
pub enum EngineState {
    Loading { path: PathBuf },
    Ready(Arc<ModelInfo>),
    Failed { error: EngineError },
}

/// Background work (prefetch, finishing a cold prompt, completing a cut suggestion) waits this long after the
/// last interactive request, so that it runs while the user pauses rather than between keystrokes.
pub const IDLE_BEFORE_BACKGROUND: Duration = Duration::from_millis(150);

/// How many recent model calls `EngineCounters::recent` keeps.
pub const RECENT_CAP: usize = 4096;

/// One model call, as a benchmark sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentCall {
    pub stats: CompletionStats,
    pub stop: StopReason,
    pub background: bool,
    /// Bytes of text the call answered with (after post-processing).
    pub produced: usize,
}

/// Totals over the engine's life, for `spark/status` and benchmarks.
#[derive(Debug, Default)]
pub struct EngineCounters {
    pub requests: AtomicU64,
    pub superseded: AtomicU64,
    pub cancelled: AtomicU64,
    pub n_prompt: AtomicU64,
    pub n_reused: AtomicU64,
    pub n_decoded: AtomicU64,
    pub n_generated: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Prompt tokens copied between KV slots instead of evaluated.
    pub n_copied: AtomicU64,
    /// Generated tokens carried over to a later request that typed along them.
    pub n_carried: AtomicU64,
    /// Speculative decoding: tokens drafted by prompt lookup, and those the model confirmed.
    pub n_drafted: AtomicU64,
    pub n_accepted: AtomicU64,
    pub last: Mutex<Option<CompletionStats>>,
    /// The most recent model calls (at most `RECENT_CAP`), oldest first: what a benchmark reads medians from.
    pub recent: Mutex<VecDeque<RecentCall>>,
}

enum Command {
    Complete(Job),
    Reload(EngineConfig),
    Shutdown,
}

struct Job {
    request: CompletionRequest,
    queued_at: Instant,
    reply: oneshot::Sender<Result<Completion, EngineError>>,
}

/// The server's handle on the model thread. Cheap to share behind an `Arc`.
pub struct Engine {
    commands: Mutex<Sender<Command>>,
    state: watch::Receiver<EngineState>,
    counters: Arc<EngineCounters>,
    cache: Mutex<SuggestionCache>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Parent of every background request's cancel token; replaced (and cancelled) when an interactive request
    /// goes to the model thread, so a prefetch never delays a keystroke by more than one token or prompt chunk.
    background: Mutex<CancellationToken>,
    /// `EngineConfig::reuse` of the configuration loaded last: off, the suggestion cache is not used either.
    reuse: std::sync::atomic::AtomicBool,
}

impl Engine {
    /// Starts the model thread; the model loads in the background (watch `subscribe()`).
    pub fn start(config: EngineConfig) -> Engine {
        let (commands, receiver) = mpsc::channel();
        let initial = match &config.model {
            ModelSource::Path(path) => EngineState::Loading { path: path.clone() },
            ModelSource::None => EngineState::Failed { error: EngineError::NoModel },
        };
        let (state_tx, state) = watch::channel(initial);
        let counters = Arc::new(EngineCounters::default());
        let thread_counters = counters.clone();
        let reuse = config.reuse;
        let thread = std::thread::Builder::new()
            .name("spark-model".into())
            .spawn(move || model_thread(config, receiver, state_tx, thread_counters))
            .expect("spawning the model thread");
        let engine = Engine::assemble(commands, state, counters, thread);
        engine.reuse.store(reuse, Ordering::Relaxed);
        engine
    }

    /// An engine whose model is a script (`scripted::ScriptedModel`): for tests of the layers above.
    pub fn start_scripted(outputs: Vec<String>) -> Engine {
        let (commands, receiver) = mpsc::channel();
        let info = Arc::new(ModelInfo {
            path: PathBuf::from("scripted"),
            size_bytes: 0,
            architecture: "scripted".into(),
            name: "scripted".into(),
            n_params: 0,
            n_vocab: 0,
            n_ctx_train: 1 << 20,
            n_ctx: 1 << 20,
            threads: 1,
            fim: None,
            has_chat_template: false,
            chat: None,
            load_ms: 0,
            memory: None,
        });
        let (_state_tx, state) = watch::channel(EngineState::Ready(info));
        let counters = Arc::new(EngineCounters::default());
        let thread_counters = counters.clone();
        let thread = std::thread::Builder::new()
            .name("spark-scripted-model".into())
            .spawn(move || {
                let mut session = Session::new(crate::scripted::ScriptedModel::new(outputs), None);
                let _ = serve(&mut session, &receiver, &thread_counters, true);
            })
            .expect("spawning the scripted model thread");
        Engine::assemble(commands, state, counters, thread)
    }

    fn assemble(
        commands: Sender<Command>,
        state: watch::Receiver<EngineState>,
        counters: Arc<EngineCounters>,
        thread: JoinHandle<()>,
    ) -> Engine {
        Engine {
            commands: Mutex::new(commands),
            state,
            counters,
            cache: Mutex::new(SuggestionCache::new(256)),
            thread: Mutex::new(Some(thread)),
            background: Mutex::new(CancellationToken::new()),
            reuse: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// A cancel token for a background request (`CompletionRequest::background`): it is cancelled as soon as an
    /// interactive request needs the model thread.
    pub fn background_token(&self) -> CancellationToken {
        self.background.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).child_token()
    }

    pub fn state(&self) -> EngineState {
        self.state.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<EngineState> {
        self.state.clone()
    }

    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }

    /// Waits until the model is ready or has failed.
    pub async fn wait_ready(&self) -> Result<Arc<ModelInfo>, EngineError> {
        let mut state = self.state.clone();
        loop {
            match state.borrow_and_update().clone() {
                EngineState::Ready(info) => return Ok(info),
                EngineState::Failed { error } => return Err(error),
                EngineState::Loading { .. } => {}
            }
            if state.changed().await.is_err() {
                return Err(EngineError::WorkerGone);
            }
        }
    }

    /// Runs a completion. While the model loads or after it failed, answers at once with an error.
    pub async fn complete(&self, request: CompletionRequest) -> Result<Completion, EngineError> {
        match self.state() {
            EngineState::Ready(_) => {}
            EngineState::Loading { .. } => return Err(EngineError::Loading),
            EngineState::Failed { error } => return Err(error),
        }
        if let Some(cached) = self.cached(&request) {
            return Ok(cached);
        }
        let cache_key = self.cacheable(&request).then(|| request.clone());
        if !request.background {
            let fresh = CancellationToken::new();
            let mut background = self.background.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            std::mem::replace(&mut *background, fresh).cancel();
        }
        let (reply, answer) = oneshot::channel();
        let job = Job { request, queued_at: Instant::now(), reply };
        self.send(Command::Complete(job))?;
        let completion = answer.await.map_err(|_| EngineError::WorkerGone)??;
        if let Some(request) = cache_key {
            self.remember(&request, &completion);
        }
        Ok(completion)
    }

    /// The answer for a ghost-text request that needs no model call (the same context, or the user typed the
    /// start of the shown suggestion), from the suggestion cache. Used in front of the remote route too.
    pub fn cached(&self, request: &CompletionRequest) -> Option<Completion> {
        // Background work computes what is not cached yet, or the whole of a cut answer that is.
        if !self.cacheable(request) || request.background {
            return None;
        }
        let mut cache = self.lock_cache();
        let hit = cache.lookup(request);
        if let (Some((text, CacheHit::Exact)), false) = (&hit, request.background) {
            // A prefetched answer shown now: typing along it reuses it like any other.
            cache.remember_shown(request, text);
        }
        drop(cache);
        let (text, hit) = hit?;
        self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(?hit, "suggestion from the cache");
        Some(Completion { text, stop: StopReason::Cached, stats: CompletionStats::default() })
    }

    /// Keeps a ghost-text answer (from this engine or a remote one) for `cached`.
    pub fn remember(&self, request: &CompletionRequest, completion: &Completion) {
        // An answer cut by the deadline is still worth reusing (typing along it); one cut by a newer keystroke is
        // not. The server computes the whole of a cut answer in the background, which then replaces it.
        let whole = !matches!(completion.stop, StopReason::Cancelled | StopReason::Superseded);
        if !self.cacheable(request) || !whole {
            return;
        }
        if request.background {
            self.lock_cache().store_prefetched(request, &completion.text);
        } else {
            self.lock_cache().store(request, &completion.text);
        }
    }

    /// Task prompts are sampled several times on purpose: only ghost text is cached, and only with reuse on.
    fn cacheable(&self, request: &CompletionRequest) -> bool {
        request.max_tokens > 0 && !request.raw_prompt && self.reuse.load(Ordering::Relaxed)
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, SuggestionCache> {
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Loads another model (or the same one with other settings) without restarting the server.
    pub fn reload(&self, config: EngineConfig) -> Result<(), EngineError> {
        *self.lock_cache() = SuggestionCache::new(256);
        self.reuse.store(config.reuse, Ordering::Relaxed);
        self.send(Command::Reload(config))
    }

    fn send(&self, command: Command) -> Result<(), EngineError> {
        let commands = self.commands.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        commands.send(command).map_err(|_| EngineError::WorkerGone)
    }

    /// Stops the model thread and waits for it.
    pub fn shutdown(&self) {
        let _ = self.send(Command::Shutdown);
        let thread = self.thread.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What the serve loop tells the outer loop when it returns.
enum Next {
    Load(EngineConfig),
    Stop,
}

fn model_thread(
    mut config: EngineConfig,
    commands: Receiver<Command>,
    state: watch::Sender<EngineState>,
    counters: Arc<EngineCounters>,
) {
    loop {
        let next = match &config.model {
            ModelSource::None => fail(&state, &commands, EngineError::NoModel),
            ModelSource::Path(path) => {
                state.send_replace(EngineState::Loading { path: path.clone() });
                tracing::info!(path = %path.display(), threads = config.threads, "loading model");
                match check_model(path, &config) {
                    Err(error) => fail(&state, &commands, error),
                    Ok(checked) => load_and_serve(&checked, &config, &commands, &state, &counters),
                }
            }
        };
        match next {
            Next::Load(new_config) => config = new_config,
            Next::Stop => return,
        }
    }
}

/// A model file that passed the checks made before llama.cpp sees it.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
struct CheckedModel {
    path: PathBuf,
    size_bytes: u64,
    estimate: MemoryEstimate,
}

/// The checks that need no llama.cpp: the file exists, is a GGUF, and fits the memory limit with the context
/// asked for (`max_memory_mb`, else the memory available now; zero turns the check off).
fn check_model(path: &Path, config: &EngineConfig) -> Result<CheckedModel, EngineError> {
    let metadata = std::fs::metadata(path).map_err(|_| EngineError::ModelMissing { path: path.to_owned() })?;
    let file = std::fs::File::open(path).map_err(|_| EngineError::NotGguf { path: path.to_owned() })?;
    let summary = gguf::read_summary(&mut std::io::BufReader::new(file)).map_err(|error| match error {
        GgufError::NotGguf => EngineError::NotGguf { path: path.to_owned() },
        GgufError::Malformed(reason) => EngineError::LoadFailed {
            path: path.to_owned(),
            reason: format!("{reason} (truncated or unsupported GGUF?)"),
        },
    })?;
    let n_ctx = memory::effective_n_ctx(config.n_ctx, summary.n_ctx_train);
    let limit = match config.max_memory_mb {
        Some(0) => None,
        Some(limit_mib) => Some((limit_mib, "model.maxMemoryMb")),
        None => memory::available_mib().map(|limit_mib| (limit_mib, "the memory available now")),
    };
    // Extra slots take at most half of the memory available now (the editor and the build need the rest), all
    // of an explicit limit.
    let budget = limit.map(|(limit_mib, source)| if source == "model.maxMemoryMb" { limit_mib } else { limit_mib / 2 });
    let n_slots = memory::choose_slots(config.kv_slots, metadata.len(), &summary, n_ctx, config.kv_keys, budget);
    let estimate = memory::estimate(metadata.len(), &summary, n_ctx, n_slots, config.kv_keys);
    tracing::info!(needs = %estimate, limit_mib = ?limit.map(|(limit_mib, _)| limit_mib), "memory estimate");
    if let Some((limit_mib, source)) = limit.filter(|(limit_mib, _)| estimate.total_mib() > *limit_mib) {
        return Err(EngineError::DoesNotFit {
            path: path.to_owned(),
            estimate,
            limit_mib,
            limit_source: source.to_owned(),
        });
    }
    Ok(CheckedModel { path: path.to_owned(), size_bytes: metadata.len(), estimate })
}

/// Loads the model with llama.cpp and serves until the configuration changes.
#[cfg(feature = "local")]
fn load_and_serve(
    checked: &CheckedModel,
    config: &EngineConfig,
    commands: &Receiver<Command>,
    state: &watch::Sender<EngineState>,
    counters: &EngineCounters,
) -> Next {
    use crate::local::{self, LlamaLm};
    let loaded = catch_unwind(AssertUnwindSafe(|| {
        local::load_model(&checked.path, checked.size_bytes, config.threads, checked.estimate.n_ctx)
    }))
    .unwrap_or_else(|panic| Err(EngineError::Panicked(panic_message(&panic))));
    let (model, mut info) = match loaded {
        Ok(loaded) => loaded,
        Err(error) => return fail(state, commands, error),
    };
    info.memory = Some(checked.estimate);
    let lm = match LlamaLm::new(&model, &info, &checked.estimate) {
        Ok(lm) => lm,
        Err(error) => return fail(state, commands, error),
    };
    tracing::info!(load_ms = info.load_ms, arch = %info.architecture, fim = info.fim.is_some(), "model ready");
    let info = Arc::new(info);
    let mut session = Session::new(lm, info.fim.clone());
    session.speculative = config.speculative;
    // Token healing's vocabulary index (~60 ms for Qwen2.5-Coder's 152k tokens on 2 cores): built with the model,
    // not on the first keystroke.
    session.index_vocabulary();
    state.send_replace(EngineState::Ready(info));
    serve(&mut session, commands, counters, config.reuse)
}

/// Built without the local backend (the fuzz targets): no model loads.
#[cfg(not(feature = "local"))]
fn load_and_serve(
    _checked: &CheckedModel,
    _config: &EngineConfig,
    commands: &Receiver<Command>,
    state: &watch::Sender<EngineState>,
    _counters: &EngineCounters,
) -> Next {
    let reason = "this build has no local backend (spark-engine's `local` feature is off)";
    fail(state, commands, EngineError::Unavailable(reason.to_owned()))
}

/// Publishes a load failure and answers with it until the configuration changes.
fn fail(state: &watch::Sender<EngineState>, commands: &Receiver<Command>, error: EngineError) -> Next {
    tracing::error!(%error, "model not loaded");
    state.send_replace(EngineState::Failed { error: error.clone() });
    serve_without_model(commands, &error)
}

/// Answers every job with the load error until the configuration changes.
fn serve_without_model(commands: &Receiver<Command>, error: &EngineError) -> Next {
    loop {
        match commands.recv() {
            Ok(Command::Complete(job)) => {
                let _ = job.reply.send(Err(error.clone()));
            }
            Ok(Command::Reload(config)) => return Next::Load(config),
            Ok(Command::Shutdown) | Err(_) => return Next::Stop,
        }
    }
}

/// Runs jobs until the configuration changes. Without `reuse` every prompt starts from an empty KV cache.
fn serve<M: crate::session::LanguageModel>(
    session: &mut Session<M>,
    commands: &Receiver<Command>,
    counters: &EngineCounters,
    reuse: bool,
) -> Next {
    let mut queue: Vec<Job> = Vec::new();
    let mut last_interactive: Option<Instant> = None;
    loop {
        if queue.is_empty() {
            match commands.recv_timeout(Duration::from_secs(3600)) {
                Ok(command) => {
                    if let Some(next) = enqueue(command, &mut queue) {
                        answer_all(queue, EngineError::WorkerGone);
                        return next;
                    }
                }
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Next::Stop,
            }
        }
        // Drain what else is waiting, then keep only the newest job of each lane.
        while let Ok(command) = commands.try_recv() {
            if let Some(next) = enqueue(command, &mut queue) {
                answer_all(queue, EngineError::WorkerGone);
                return next;
            }
        }
        let Some(job) = take_newest(&mut queue, counters) else {
            continue;
        };
        if job.request.cancel.is_cancelled() || job.reply.is_closed() {
            counters.cancelled.fetch_add(1, Ordering::Relaxed);
            let _ = job.reply.send(Ok(empty(StopReason::Cancelled)));
            continue;
        }
        // Background work starts only when the user pauses: after `IDLE_BEFORE_BACKGROUND` without a keystroke's
        // request. A request arriving meanwhile is taken first. Finishing a keystroke the deadline cut does not
        // wait: that keystroke ran to its deadline, so the user has paused already.
        let idle = last_interactive.map_or(IDLE_BEFORE_BACKGROUND, |at| at.elapsed());
        if job.request.background && !job.request.resume && idle < IDLE_BEFORE_BACKGROUND {
            queue.push(job);
            match commands.recv_timeout(IDLE_BEFORE_BACKGROUND - idle) {
                Ok(command) => {
                    if let Some(next) = enqueue(command, &mut queue) {
                        answer_all(queue, EngineError::WorkerGone);
                        return next;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Next::Stop,
            }
            continue;
        }
        counters.requests.fetch_add(1, Ordering::Relaxed);
        if !reuse {
            session.reset();
        }
        let result = catch_unwind(AssertUnwindSafe(|| session.complete(&job.request, job.queued_at)));
        let result = match result {
            Ok(result) => result,
            Err(panic) => {
                let message = panic_message(&panic);
                tracing::error!(%message, "panic on the model thread; cache reset");
                session.reset();
                Err(EngineError::Panicked(message))
            }
        };
        if let Ok(completion) = &result {
            record(counters, completion, job.request.background);
        }
        if !job.request.background {
            last_interactive = Some(Instant::now());
        }
        let _ = job.reply.send(result);
    }
}

/// Adds a job to the queue; returns what to do instead when the command is not a job.
fn enqueue(command: Command, queue: &mut Vec<Job>) -> Option<Next> {
    match command {
        Command::Complete(job) => {
            queue.push(job);
            None
        }
        Command::Reload(config) => Some(Next::Load(config)),
        Command::Shutdown => Some(Next::Stop),
    }
}

/// Picks the job to run: the newest of the oldest lane. Cancelled jobs are answered first and never supersede: a
/// warm-up is queued from its own task, so it can reach the queue after the request that cancelled it, and as
/// "newest" it would take that request's place. Older live jobs of every lane are answered as superseded. A
/// background job never supersedes an interactive one: it is dropped when its lane has an interactive job (which
/// brings the same prompt into the cache anyway), however late it was queued.
fn take_newest(queue: &mut Vec<Job>, counters: &EngineCounters) -> Option<Job> {
    let mut live = Vec::new();
    for job in queue.drain(..) {
        if job.request.cancel.is_cancelled() || job.reply.is_closed() {
            counters.cancelled.fetch_add(1, Ordering::Relaxed);
            let _ = job.reply.send(Ok(empty(StopReason::Cancelled)));
        } else {
            live.push(job);
        }
    }
    let mut newest_interactive: HashMap<u64, usize> = HashMap::new();
    let mut newest_background: HashMap<u64, usize> = HashMap::new();
    for (idx, job) in live.iter().enumerate() {
        let newest = if job.request.background { &mut newest_background } else { &mut newest_interactive };
        newest.insert(job.request.lane, idx);
    }
    for (idx, job) in live.into_iter().enumerate() {
        let lane = job.request.lane;
        let keep = if job.request.background {
            !newest_interactive.contains_key(&lane) && newest_background.get(&lane) == Some(&idx)
        } else {
            newest_interactive.get(&lane) == Some(&idx)
        };
        if keep {
            queue.push(job);
        } else {
            counters.superseded.fetch_add(1, Ordering::Relaxed);
            let _ = job.reply.send(Ok(empty(StopReason::Superseded)));
        }
    }
    if queue.is_empty() {
        return None;
    }
    // Interactive jobs first, oldest lane first; a background job runs only when nothing else waits.
    let idx = queue.iter().position(|job| !job.request.background).unwrap_or(0);
    Some(queue.remove(idx))
}

fn answer_all(queue: Vec<Job>, error: EngineError) {
    for job in queue {
        let _ = job.reply.send(Err(error.clone()));
    }
}

fn empty(stop: StopReason) -> Completion {
    Completion { text: String::new(), stop, stats: CompletionStats::default() }
}

fn record(counters: &EngineCounters, completion: &Completion, background: bool) {
    let stats = completion.stats;
    if completion.stop == StopReason::Cancelled {
        counters.cancelled.fetch_add(1, Ordering::Relaxed);
    }
    counters.n_prompt.fetch_add(stats.n_prompt as u64, Ordering::Relaxed);
    counters.n_reused.fetch_add(stats.n_reused as u64, Ordering::Relaxed);
    counters.n_decoded.fetch_add(stats.n_decoded as u64, Ordering::Relaxed);
    counters.n_generated.fetch_add(stats.n_generated as u64, Ordering::Relaxed);
    counters.n_copied.fetch_add(stats.n_copied as u64, Ordering::Relaxed);
    counters.n_carried.fetch_add(stats.n_carried as u64, Ordering::Relaxed);
    counters.n_drafted.fetch_add(stats.n_drafted as u64, Ordering::Relaxed);
    counters.n_accepted.fetch_add(stats.n_accepted as u64, Ordering::Relaxed);
    if !background {
        *counters.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(stats);
    }
    let mut recent = counters.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if recent.len() >= RECENT_CAP {
        recent.pop_front();
    }
    recent.push_back(RecentCall { stats, stop: completion.stop, background, produced: completion.text.len() });
    drop(recent);
    tracing::debug!(
        n_prompt = stats.n_prompt,
        n_reused = stats.n_reused,
        n_decoded = stats.n_decoded,
        n_generated = stats.n_generated,
        slot = stats.slot,
        n_copied = stats.n_copied,
        n_carried = stats.n_carried,
        n_drafted = stats.n_drafted,
        n_accepted = stats.n_accepted,
        queue_ms = stats.queue_ms,
        prompt_ms = stats.prompt_ms,
        first_token_ms = stats.first_token_ms,
        generate_us = stats.generate_us,
        background,
        total_ms = stats.total_ms,
        stop = ?completion.stop,
        "completion"
    );
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postprocess::StopMode;
    use crate::session::fake::FakeModel;
    use tokio_util::sync::CancellationToken;

    fn job(lane: u64, prefix: &str) -> (Job, oneshot::Receiver<Result<Completion, EngineError>>) {
        let (reply, answer) = oneshot::channel();
        let request = CompletionRequest {
            lane,
            header: String::new(),
            prefix: prefix.to_owned(),
            suffix: String::new(),
            mode: StopMode::Line,
            indent: String::new(),
            max_tokens: 8,
            max_lines: 4,
            deadline: Instant::now() + Duration::from_secs(10),
            cancel: CancellationToken::new(),
            raw_prompt: false,
            stop_strings: Vec::new(),
            sampling: crate::session::Sampling::default(),
            background: false,
            min_confidence: 0.0,
            speculate: false,
            heal: false,
            resume: false,
        };
        (Job { request, queued_at: Instant::now(), reply }, answer)
    }

    #[tokio::test]
    async fn a_prefetched_answer_serves_the_accepted_state_without_a_model_call() {
        let engine = Engine::start_scripted(vec!["compute(1);".into(), "\nlet y = 2;".into()]);
        let (mut shown, _) = job(1, "let x = ");
        shown.request.max_tokens = 32;
        shown.request.mode = StopMode::Block;
        let mut accepted_state = shown.request.clone();
        let shown = engine.complete(shown.request).await.unwrap();
        assert_eq!(shown.text, "compute(1);");
        accepted_state.prefix.push_str(&shown.text);
        let mut prefetch = accepted_state.clone();
        prefetch.background = true;
        prefetch.cancel = engine.background_token();
        engine.complete(prefetch).await.unwrap();
        let calls = engine.counters().requests.load(Ordering::Relaxed);
        let answer = engine.complete(accepted_state).await.unwrap();
        assert_eq!((answer.text.as_str(), answer.stop), ("\nlet y = 2;", StopReason::Cached));
        assert_eq!(engine.counters().requests.load(Ordering::Relaxed), calls, "no model call");
        let recent = engine.counters().recent.lock().unwrap().clone();
        assert_eq!(recent.iter().map(|call| call.background).collect::<Vec<_>>(), [false, true]);
    }

    #[test]
    fn a_background_job_queued_late_never_supersedes_a_keystroke() {
        let counters = EngineCounters::default();
        let (keystroke, _keystroke_answer) = job(1, "fn a() {");
        let (mut warm_up, _warm_up_answer) = job(1, "fn a() {}");
        warm_up.request.background = true;
        let (mut other_warm_up, _other_answer) = job(2, "x");
        other_warm_up.request.background = true;
        let mut queue = vec![keystroke, warm_up, other_warm_up];
        let first = take_newest(&mut queue, &counters).unwrap();
        assert_eq!((first.request.lane, first.request.background), (1, false));
        assert_eq!(counters.superseded.load(Ordering::Relaxed), 1, "the lane's late background job was dropped");
        let second = take_newest(&mut queue, &counters).unwrap();
        assert_eq!((second.request.lane, second.request.background), (2, true));
    }

    #[test]
    fn interactive_jobs_run_before_background_ones() {
        let counters = EngineCounters::default();
        let (mut prefetch, _prefetch_answer) = job(1, "a");
        prefetch.request.background = true;
        let (keystroke, _keystroke_answer) = job(2, "b");
        let mut queue = vec![prefetch, keystroke];
        assert_eq!(take_newest(&mut queue, &counters).map(|job| job.request.lane), Some(2));
        assert_eq!(take_newest(&mut queue, &counters).map(|job| job.request.lane), Some(1));
        assert!(take_newest(&mut queue, &counters).is_none());
    }

    #[tokio::test]
    async fn an_interactive_request_cancels_background_work_and_a_prefetch_does_not() {
        let engine = Engine::start_scripted(vec!["one\n".into(), "two\n".into(), "three\n".into()]);
        let token = engine.background_token();
        let (mut prefetch, _) = job(1, "fn a() {");
        prefetch.request.background = true;
        prefetch.request.cancel = engine.background_token();
        let _ = engine.complete(prefetch.request).await;
        assert!(!token.is_cancelled(), "a background request leaves other background work alone");
        let (keystroke, _) = job(1, "fn b() {");
        let _ = engine.complete(keystroke.request).await;
        assert!(token.is_cancelled(), "an interactive request that reaches the model cancels background work");
        assert!(!engine.background_token().is_cancelled(), "later background work gets a fresh token");
    }

    #[test]
    fn newest_job_of_a_lane_wins_and_every_job_is_answered() {
        let (sender, receiver) = mpsc::channel();
        let mut answers = Vec::new();
        for (lane, prefix) in [(1, "a"), (1, "ab"), (2, "x"), (1, "abc")] {
            let (job, answer) = job(lane, prefix);
            sender.send(Command::Complete(job)).unwrap();
            answers.push(answer);
        }
        sender.send(Command::Shutdown).unwrap();
        let counters = EngineCounters::default();
        let mut session = Session::new(FakeModel::new("zz"), None);
        // The loop drains all four jobs at once, runs the newest of each lane, then sees Shutdown.
        let (first, _first_answer) = job(3, "warm");
        let mut queue = vec![first];
        while let Ok(command) = receiver.try_recv() {
            if enqueue(command, &mut queue).is_some() {
                break;
            }
        }
        let mut ran = Vec::new();
        while let Some(job) = take_newest(&mut queue, &counters) {
            ran.push(job.request.prefix.clone());
            let result = session.complete(&job.request, job.queued_at);
            let _ = job.reply.send(result);
        }
        assert_eq!(ran, vec!["warm", "x", "abc"]);
        let stops: Vec<StopReason> =
            answers.into_iter().map(|mut answer| answer.try_recv().unwrap().unwrap().stop).collect();
        assert_eq!(stops[0], StopReason::Superseded);
        assert_eq!(stops[1], StopReason::Superseded);
        assert_ne!(stops[2], StopReason::Superseded);
        assert_ne!(stops[3], StopReason::Superseded);
        assert_eq!(counters.superseded.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_cancelled_warm_up_queued_after_the_request_that_cancelled_it_does_not_supersede_it() {
        // The order the server can produce: the ghost-text request's job is sent from its handler, the warm-up's
        // from a task spawned earlier that ran later; the request cancelled the warm-up before sending its job.
        let (request, request_answer) = job(7, "fn main() {");
        let (mut warm_up, mut warm_up_answer) = job(7, "fn main");
        warm_up.request.max_tokens = 0;
        warm_up.request.cancel.cancel();
        let counters = EngineCounters::default();
        let mut queue = vec![request, warm_up];
        let picked = take_newest(&mut queue, &counters).expect("the live request runs");
        assert_eq!(picked.request.prefix, "fn main() {");
        assert!(queue.is_empty());
        assert_eq!(warm_up_answer.try_recv().unwrap().unwrap().stop, StopReason::Cancelled);
        assert_eq!(counters.superseded.load(Ordering::Relaxed), 0);
        assert_eq!(counters.cancelled.load(Ordering::Relaxed), 1);
        drop((picked, request_answer));
    }

    #[tokio::test]
    async fn missing_model_fails_clearly_and_answers_at_once() {
        let engine = Engine::start(EngineConfig {
            model: ModelSource::Path("/nonexistent/model.gguf".into()),
            n_ctx: 512,
            ..EngineConfig::new(ModelSource::None, 1)
        });
        let error = engine.wait_ready().await.unwrap_err();
        assert!(matches!(error, EngineError::ModelMissing { .. }), "{error}");
        let (job, _) = job(1, "a");
        let error = engine.complete(job.request).await.unwrap_err();
        assert!(error.to_string().contains("/nonexistent/model.gguf"), "{error}");
    }

    #[tokio::test]
    async fn a_file_that_is_not_gguf_is_refused_before_llama_cpp_sees_it() {
        let dir = std::env::temp_dir().join(format!("spark-engine-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("not-a-model.gguf");
        std::fs::write(&path, b"hello, this is text").unwrap();
        let engine = Engine::start(EngineConfig {
            model: ModelSource::Path(path.clone()),
            n_ctx: 512,
            ..EngineConfig::new(ModelSource::None, 1)
        });
        let error = engine.wait_ready().await.unwrap_err();
        assert!(matches!(error, EngineError::NotGguf { .. }), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_model_over_the_memory_limit_is_refused_before_llama_cpp_sees_it() {
        let dir = std::env::temp_dir().join(format!("spark-engine-memory-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("header-only.gguf");
        std::fs::write(&path, crate::gguf::tests::gemma_like()).unwrap();
        let config = |max_memory_mb| EngineConfig {
            model: ModelSource::Path(path.clone()),
            n_ctx: 131_072,
            max_memory_mb: Some(max_memory_mb),
            ..EngineConfig::new(ModelSource::None, 1)
        };
        let engine = Engine::start(config(100));
        let error = engine.wait_ready().await.unwrap_err();
        // The context is capped at the 32768 tokens the model was trained for: 18 layers x 512 x 2 bytes each.
        let EngineError::DoesNotFit { estimate, limit_mib: 100, .. } = &error else { panic!("{error}") };
        assert_eq!((estimate.n_ctx, estimate.kv_cache_mib), (32_768, 576));
        let message = error.to_string();
        assert!(message.contains("with contextSize 32768") && message.contains("lower model.contextSize"), "{message}");
        // A limit that fits passes the check; this header-only file then fails in llama.cpp instead.
        let mut states = engine.subscribe();
        states.borrow_and_update();
        engine.reload(config(1 << 20)).unwrap();
        let error = loop {
            states.changed().await.unwrap();
            if let EngineState::Failed { error } = states.borrow_and_update().clone() {
                break error;
            }
        };
        assert!(!matches!(error, EngineError::DoesNotFit { .. }), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
