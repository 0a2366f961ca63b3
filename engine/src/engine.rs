//! The engine handle (`Engine`): what the server holds. It starts the model thread (`model_thread.rs`), sends it
//! jobs over a channel (`queue.rs`) with a oneshot for each answer, answers at once while the model loads or after
//! it failed, cancels background work when a keystroke needs the model, and keeps the suggestion cache in front of
//! the model thread (`cached`/`remember`, also used in front of the remote route).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::model_info::ModelInfo;
use crate::model_thread::{model_thread, serve};
use crate::queue::{Command, Job};
use crate::request::{Completion, CompletionRequest, CompletionStats, StopReason};
use crate::session::Session;
use crate::state::{EngineConfig, EngineCounters, EngineState, ModelSource};
use crate::suggestion_cache::{CacheHit, SuggestionCache};

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
    reuse: AtomicBool,
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
            reuse: AtomicBool::new(true),
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

#[cfg(test)]
mod tests {

    use super::*;
    use crate::postprocess::StopMode;

    use crate::request::test_ghost as ghost;

    #[tokio::test]
    async fn a_prefetched_answer_serves_the_accepted_state_without_a_model_call() {
        let engine = Engine::start_scripted(vec!["compute(1);".into(), "\nlet y = 2;".into()]);
        let mut shown = ghost(1, "let x = ");
        shown.max_tokens = 32;
        shown.mode = StopMode::Block;
        let mut accepted_state = shown.clone();
        let shown = engine.complete(shown).await.unwrap();
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

    #[tokio::test]
    async fn an_interactive_request_cancels_background_work_and_a_prefetch_does_not() {
        let engine = Engine::start_scripted(vec!["one\n".into(), "two\n".into(), "three\n".into()]);
        let token = engine.background_token();
        let mut prefetch = ghost(1, "fn a() {");
        prefetch.background = true;
        prefetch.cancel = engine.background_token();
        let _ = engine.complete(prefetch).await;
        assert!(!token.is_cancelled(), "a background request leaves other background work alone");
        let _ = engine.complete(ghost(1, "fn b() {")).await;
        assert!(token.is_cancelled(), "an interactive request that reaches the model cancels background work");
        assert!(!engine.background_token().is_cancelled(), "later background work gets a fresh token");
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
        let error = engine.complete(ghost(1, "a")).await.unwrap_err();
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
