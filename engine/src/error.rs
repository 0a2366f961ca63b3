//! The engine's error type. Cancellation is not an error: it is a `StopReason`.

use std::path::PathBuf;

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
