//! Model tiers for the code-action tasks: the fast model (the one serving ghost text) tries first; when none of
//! its candidates verifies, the task escalates to a strong tier — a second local model, loaded on first need
//! (only if it fits the memory limit) and unloaded after it has been idle a while. The answer says which tier
//! produced the edit. Ghost text never escalates: it stays on the fast model.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spark_engine::{Engine, EngineConfig, EngineError, ModelSource};
use tokio::sync::Mutex;

pub use crate::config::{TaskSettings, TierPolicy};

/// The tier that produced an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tier {
    #[default]
    Fast,
    Strong,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Fast => "fast",
            Tier::Strong => "strong",
        }
    }
}

/// The strong tier's model: loaded on first need, unloaded when idle.
pub struct StrongModel {
    state: Mutex<Option<Loaded>>,
}

struct Loaded {
    path: PathBuf,
    engine: Arc<Engine>,
    last_used: Instant,
}

impl Default for StrongModel {
    fn default() -> Self {
        StrongModel { state: Mutex::new(None) }
    }
}

impl StrongModel {
    /// The engine for `path`, loading it (and unloading another) when needed; `Err` when it cannot load, e.g.
    /// because it does not fit the memory limit next to the fast model.
    pub async fn get(&self, path: &std::path::Path, fast: &EngineConfig) -> Result<Arc<Engine>, EngineError> {
        let mut state = self.state.lock().await;
        if let Some(loaded) = state.as_mut().filter(|loaded| loaded.path == path) {
            loaded.last_used = Instant::now();
            return Ok(loaded.engine.clone());
        }
        if let Some(old) = state.take() {
            old.engine.shutdown();
        }
        // Tasks only: one KV sequence is enough (no documents to keep warm).
        let config = EngineConfig { model: ModelSource::Path(path.to_owned()), kv_slots: Some(1), ..fast.clone() };
        let started = Instant::now();
        let engine = Arc::new(Engine::start(config));
        engine.wait_ready().await?;
        tracing::info!(path = %path.display(), ms = started.elapsed().as_millis() as u64, "strong tier loaded");
        *state = Some(Loaded { path: path.to_owned(), engine: engine.clone(), last_used: Instant::now() });
        Ok(engine)
    }

    /// Unloads the strong model when it has been idle for `idle`; true when it did.
    pub async fn unload_if_idle(&self, idle: Duration) -> bool {
        let mut state = self.state.lock().await;
        let stale = state.as_ref().is_some_and(|loaded| loaded.last_used.elapsed() >= idle);
        if stale {
            if let Some(loaded) = state.take() {
                tracing::info!(path = %loaded.path.display(), "strong tier unloaded after being idle");
                loaded.engine.shutdown();
            }
        }
        stale
    }

    /// The loaded strong model's file, for `spark/status`.
    pub fn loaded_path(&self) -> Option<PathBuf> {
        self.state.try_lock().ok().and_then(|state| state.as_ref().map(|loaded| loaded.path.clone()))
    }
}
