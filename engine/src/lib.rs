//! Spark's model runtime: prompt layout, prefix reuse, stop rules, scheduling and the local llama.cpp backend.
//!
//! The engine speaks in editor-neutral terms: a request is a prefix, a suffix and a stop mode; an answer is the
//! text to insert at the cursor (or nothing). It knows nothing of LSP, URIs or JSON.

mod engine;
mod error;
pub mod gguf;
#[cfg(feature = "local")]
mod local;
pub mod memory;
pub mod model_info;
pub mod postprocess;
pub mod prompt;
pub mod remote;
pub mod scripted;
pub mod session;
pub mod suggestion_cache;

pub use engine::{Engine, EngineConfig, EngineCounters, EngineState, ModelSource, RecentCall, RECENT_CAP};
pub use error::EngineError;
pub use memory::MemoryEstimate;
pub use model_info::{ChatFrame, FimFamily, ModelInfo};
pub use remote::{
    RemoteAnswer, RemoteClient, RemoteConfig, RemoteCounters, RemoteError, RemoteHealth, RemoteRequest, RemoteStop,
    StreamRules,
};
pub use session::{Completion, CompletionRequest, CompletionStats, Sampling, StopMode, StopReason};

/// The default model's file name, as the install script places it.
pub const DEFAULT_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// Where the server looks for a model when neither `SPARK_MODEL` nor the `model.path` setting names one:
/// `$SPARK_MODEL_DIR/gemma-3-270m-q4_k_m.gguf`, else `$XDG_DATA_HOME/spark/models/…`, else
/// `~/.local/share/spark/models/…` (where scripts/install-model.sh puts it, by the same rules).
pub fn default_model_path() -> Option<std::path::PathBuf> {
    Some(models_dir()?.join(DEFAULT_MODEL_FILE))
}

/// The directory of installed models: `$SPARK_MODEL_DIR`, else `$XDG_DATA_HOME/spark/models`, else
/// `~/.local/share/spark/models`.
pub fn models_dir() -> Option<std::path::PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(std::path::PathBuf::from);
    if let Some(dir) = set("SPARK_MODEL_DIR") {
        return Some(dir);
    }
    let data_home = set("XDG_DATA_HOME").or_else(|| set("HOME").map(|home| home.join(".local/share")))?;
    Some(data_home.join("spark/models"))
}

/// Physical cores, the default thread count: ggml's workers spin on barriers, so hyper-threads do not help.
pub fn default_threads() -> usize {
    num_cpus::get_physical().max(1)
}
