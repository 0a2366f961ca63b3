//! The model a front end holds: the engine started from the settings (for the LSP server a whole [`Workspace`],
//! for the CLI and the MCP server an engine or a [`TaskRunner`] over one), the models installed for `doctor`, and
//! the few engine types a front end names (the state it reports, the errors it explains, the recent calls it
//! lists). The front ends reach `spark-engine` through this module only (ARCHITECTURE.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use spark_engine::{default_threads, Engine, EngineConfig, EngineError, EngineState, ModelSource, RecentCall};

use crate::config::{self, Route, Settings, TaskSettings};
use crate::position::PositionEncoding;
use crate::runner::{TaskJob, TaskRunner};
use crate::tasks::{TaskBudget, TaskDocument, TaskKind, TaskTarget};
use crate::workspace::{Notice, Workspace};

/// Starts the engine of `config`; the model loads in the background (`Engine::wait_ready` waits for it).
pub fn start(config: EngineConfig) -> Arc<Engine> {
    Arc::new(Engine::start(config))
}

/// The engine of a model file (`None`: `SPARK_MODEL`, then the installed default) and a thread count (`None`:
/// the physical cores), as the CLI's and the MCP server's `--model` and `--threads` give them.
pub fn start_file(model: Option<&Path>, threads: Option<usize>) -> Arc<Engine> {
    start(config::engine_config(model, threads))
}

/// The model options of the CLI's task commands and of the MCP server: `--model`, `--threads` and
/// `--strong-model`; their tasks run on the local model alone (no remote route).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelOptions {
    /// A GGUF file or a known model's name; `None`: `SPARK_MODEL`, then the installed default.
    pub model: Option<PathBuf>,
    /// `None`: the physical cores.
    pub threads: Option<usize>,
    /// The strong tier: a name, a path, "auto" or "none" (`TaskSettings::strong_model`).
    pub strong_model: String,
}

impl ModelOptions {
    /// The task runner over the engine of these options (the model loads in the background).
    pub fn task_runner(&self) -> TaskRunner {
        TaskRunner::new(start_file(self.model.as_deref(), self.threads))
    }

    /// A task to run on [`ModelOptions::task_runner`]'s runner: the fast model of these options, then the strong
    /// tier they name, with `budget`.
    pub fn job(&self, kind: TaskKind, document: TaskDocument, target: TaskTarget, budget: TaskBudget) -> TaskJob {
        TaskJob {
            kind,
            document,
            target,
            budget,
            tiers: TaskSettings { strong_model: self.strong_model.clone(), ..TaskSettings::default() },
            fast_config: config::engine_config(self.model.as_deref(), self.threads),
            remote: None,
            route: Route::Local,
        }
    }
}

/// The LSP server's workspace over the engine of `settings` (`model.*`); `notify` shows a notice to the user.
/// Must be called inside a tokio runtime, as [`Workspace::new`].
pub fn workspace(
    settings: Settings,
    encoding: PositionEncoding,
    notify: impl Fn(Notice) + Send + Sync + 'static,
) -> Workspace {
    let engine = start(settings.engine_config());
    Workspace::new(engine, settings, encoding, notify)
}

/// A GGUF file in the model folder and what Spark uses it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledModel {
    pub file: String,
    pub size_bytes: u64,
    /// What Spark serves with it, for a model it knows (`scripts/install-model.sh --list`).
    pub serves: Option<&'static str>,
}

/// The model folder, what is installed in it, and the known models that are not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// `None` when HOME is not set.
    pub dir: Option<PathBuf>,
    pub models: Vec<InstalledModel>,
    /// The names of the known models not installed.
    pub missing: Vec<&'static str>,
}

/// What the model folder holds (`spark-lsp doctor`).
pub fn installed() -> Installed {
    let found = spark_engine::installed_models();
    let models = found
        .iter()
        .map(|(path, size)| {
            let file = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            let serves = spark_engine::KNOWN_MODELS.iter().find(|known| known.file == file).map(|known| known.serves);
            InstalledModel { file, size_bytes: *size, serves }
        })
        .collect();
    let missing = spark_engine::KNOWN_MODELS
        .iter()
        .filter(|known| !found.iter().any(|(path, _)| path.file_name().is_some_and(|name| name == known.file)))
        .map(|known| known.name)
        .collect();
    Installed { dir: spark_engine::model_dir(), models, missing }
}
