//! The model thread (`spark-model`): it loads the model (after the checks that need no llama.cpp: the file, its
//! header, the memory it needs), owns it, its context and its KV cache, and serves jobs from the queue until the
//! configuration changes; a load failure answers every job with it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::error::EngineError;
use crate::gguf::{self, GgufError};
use crate::language_model::LanguageModel;
use crate::memory::{self, MemoryEstimate};
use crate::queue::{answer_all, empty, enqueue, take_newest, Command, Job, Next};
use crate::request::StopReason;
use crate::session::Session;
use crate::state::{EngineConfig, EngineCounters, EngineState, ModelSource};

/// Background work (prefetch, finishing a cold prompt, completing a cut suggestion) waits this long after the
/// last interactive request, so that it runs while the user pauses rather than between keystrokes.
pub const IDLE_BEFORE_BACKGROUND: Duration = Duration::from_millis(150);

pub(crate) fn model_thread(
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
pub(crate) fn serve<M: LanguageModel>(
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
            counters.record(completion, job.request.background);
        }
        if !job.request.background {
            last_interactive = Some(Instant::now());
        }
        let _ = job.reply.send(result);
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
