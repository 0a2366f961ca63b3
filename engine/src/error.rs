//! The engine's error type. Cancellation is not an error: it is a `StopReason`.

use std::path::PathBuf;

use crate::memory::MemoryEstimate;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum EngineError {
    #[error("no model is configured: install the default model (make model) or set SPARK_MODEL or model.path")]
    NoModel,
    #[error("model file {path} does not exist")]
    ModelMissing { path: PathBuf },
    #[error("model file {path} is not a GGUF file (bad magic bytes)")]
    NotGguf { path: PathBuf },
    #[error("model file {path} could not be loaded: {reason}")]
    LoadFailed { path: PathBuf, reason: String },
    #[error(
        "model file {path} does not fit in memory: it needs {estimate}, over the limit of {limit_mib} MiB \
         ({limit_source}); lower model.contextSize or choose a smaller model"
    )]
    DoesNotFit { path: PathBuf, estimate: MemoryEstimate, limit_mib: u64, limit_source: String },
    #[error(
        "model file {path}: llama.cpp could not allocate its context ({reason}); it needs {estimate}; lower \
         model.contextSize or choose a smaller model"
    )]
    ContextAllocation { path: PathBuf, estimate: MemoryEstimate, reason: String },
    #[error("the model is still loading")]
    Loading,
    #[error("the model failed to load: {0}")]
    Unavailable(String),
    #[error("model evaluation failed: {0}")]
    Decode(String),
    #[error("the model thread stopped")]
    WorkerGone,
    #[error("the model thread panicked while serving the request: {0}")]
    Panicked(String),
}
