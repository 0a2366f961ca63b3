//! Spark's model runtime: prompt layout, prefix reuse, stop rules, scheduling and the local llama.cpp backend.
//!
//! The engine speaks in editor-neutral terms: a request is a prefix, a suffix and a stop mode; an answer is the
//! text to insert at the cursor (or nothing). It knows nothing of LSP, URIs or JSON.

mod engine;
mod error;
pub mod gguf;
mod language_model;
#[cfg(feature = "local")]
mod local;
pub mod memory;
pub mod model_info;
mod model_thread;
pub mod postprocess;
pub mod prompt;
mod queue;
pub mod remote;
mod request;
pub mod scripted;
pub mod session;
mod state;
pub mod suggestion_cache;

pub use engine::Engine;
pub use error::EngineError;
pub use memory::{KvKeys, MemoryEstimate};
pub use model_info::{ChatFrame, FimFamily, ModelInfo};
pub use postprocess::StopMode;
pub use remote::{
    RemoteAnswer, RemoteClient, RemoteConfig, RemoteCounters, RemoteError, RemoteHealth, RemoteRequest, RemoteStop,
    StreamRules,
};
pub use request::{Completion, CompletionRequest, CompletionStats, Sampling, StopReason};
pub use state::{EngineConfig, EngineCounters, EngineState, ModelSource, RecentCall, RECENT_CAP};

/// The default model's file name, as the install script places it: Qwen2.5-Coder 0.5B, chosen by the evaluation
/// (the most right ghost-text lines per second within the latency targets; docs/eval.md, "Results").
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// A model `scripts/install-model.sh NAME` installs: its name there, its file, and what Spark uses it for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    pub name: &'static str,
    pub file: &'static str,
    pub serves: &'static str,
}

/// The models the install script knows (pinned by hash there), in the order `doctor` lists them.
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "gemma-3-270m",
        file: "gemma-3-270m-q4_k_m.gguf",
        serves: "base model, no FIM tokens: ghost text by prefix completion; tasks by few-shot prompts",
    },
    KnownModel {
        name: "qwen2.5-coder-0.5b",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        serves: "code model with FIM tokens: ghost text by fill-in-the-middle; tasks through its chat template",
    },
    KnownModel {
        name: "qwen2.5-coder-1.5b",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        serves: "code model with FIM tokens (2-3x the compute of the 0.5B): FIM ghost text; tasks, strong tier",
    },
];

/// The folder models are installed to: `$SPARK_MODEL_DIR`, else `$XDG_DATA_HOME/spark/models`, else
/// `~/.local/share/spark/models` (the install script uses the same rule).
pub fn model_dir() -> Option<std::path::PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = non_empty("SPARK_MODEL_DIR") {
        return Some(std::path::PathBuf::from(dir));
    }
    let data_home = non_empty("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| non_empty("HOME").map(|home| std::path::PathBuf::from(home).join(".local/share")))?;
    Some(data_home.join("spark/models"))
}

/// Where the server looks for a model when neither `SPARK_MODEL` nor the `model.path` setting names one:
/// the default model's file in `model_dir()`.
pub fn default_model_path() -> Option<std::path::PathBuf> {
    Some(model_dir()?.join(DEFAULT_MODEL_FILE))
}

/// A known model's file in `model_dir()`, when the name is one of `KNOWN_MODELS`.
pub fn known_model_path(name: &str) -> Option<std::path::PathBuf> {
    let known = KNOWN_MODELS.iter().find(|known| known.name == name)?;
    Some(model_dir()?.join(known.file))
}

/// The GGUF files in `model_dir()`, sorted by name, with their size in bytes.
pub fn installed_models() -> Vec<(std::path::PathBuf, u64)> {
    let Some(dir) = model_dir() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut found: Vec<(std::path::PathBuf, u64)> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "gguf"))
        .filter_map(|path| Some((path.clone(), std::fs::metadata(&path).ok()?.len())))
        .collect();
    found.sort();
    found
}

/// Physical cores, the default thread count: ggml's workers spin on barriers, so hyper-threads do not help.
pub fn default_threads() -> usize {
    num_cpus::get_physical().max(1)
}
