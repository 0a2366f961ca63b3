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
/// `$XDG_DATA_HOME/spark/models/gemma-3-270m-q4_k_m.gguf`, or `~/.local/share/spark/models/…`.
pub fn default_model_path() -> Option<std::path::PathBuf> {
    let data_home =
        std::env::var_os("XDG_DATA_HOME")
            .filter(|value| !value.is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".local/share")))?;
    Some(data_home.join("spark/models").join(DEFAULT_MODEL_FILE))
}

/// Physical cores, the default thread count: ggml's workers spin on barriers, so hyper-threads do not help.
pub fn default_threads() -> usize {
    num_cpus::get_physical().max(1)
}
