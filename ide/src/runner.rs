//! The one runner of a task (fix, tests, regex) for every front end — the LSP server's code actions, the CLI and
//! the MCP server: the tiers the policy allows (the fast model, then the strong one, loaded on first need and
//! unloaded once idle), on a blocking thread (a task parses every candidate and matches regexes: CPU work that
//! must not hold the async workers reading a front end's input), within a time limit that follows from the
//! budget. The front ends differ only in how they take the request and show the answer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use spark_engine::{Engine, EngineConfig, EngineError, ModelSource, RemoteClient, RemoteError};
use tokio_util::sync::CancellationToken;

use crate::config::{Route, TaskSettings, TierPolicy};
use crate::position::LspPosition;
use crate::route::Generator;
use crate::tasks::{self, TaskBudget, TaskDocument, TaskInput, TaskKind, TaskOutcome, TaskTarget};
use crate::tiers::{StrongModel, Tier};

/// What a task may take beyond its sampling budget before it is stopped (the default 12 s budget gets 30 s).
const TASK_MARGIN: Duration = Duration::from_secs(18);
/// The least time limit of a task.
const TASK_TIME_LIMIT: Duration = Duration::from_secs(30);
/// What the strong tier's first load may add to a task's time limit.
const STRONG_LOAD_MARGIN: Duration = Duration::from_secs(30);

/// A task asked for at a place of an open document.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub uri: String,
    pub kind: TaskKind,
    pub start: LspPosition,
    pub end: LspPosition,
    /// The document version the request was made for; `None` from a command typed by hand.
    pub version: Option<i32>,
    /// The diagnostic to fix, as a compiler or another server gave it.
    pub message: Option<String>,
}

/// A verified task edit and the document snapshot it was made for.
pub struct TaskResult {
    pub snapshot: TaskDocument,
    pub outcome: TaskOutcome,
}

/// One task to run: the request, and the settings it runs under.
pub struct TaskJob {
    pub kind: TaskKind,
    pub document: TaskDocument,
    pub target: TaskTarget,
    pub budget: TaskBudget,
    /// The tiers (`tasks.*`).
    pub tiers: TaskSettings,
    /// The fast model's configuration: the strong tier loads with the same, its own model in place.
    pub fast_config: EngineConfig,
    /// The remote endpoint and the route of this task's kind; `None`/`Route::Local`: the local model only.
    pub remote: Option<RemoteClient>,
    pub route: Route,
}

/// A task that ran to its end (verified or not).
pub struct TaskRun {
    pub outcome: TaskOutcome,
    /// The remote failure met, for one notice to the user.
    pub remote_error: Option<RemoteError>,
    /// The document the task ran on, given back.
    pub document: TaskDocument,
}

/// Why a task gave no outcome.
#[derive(Debug)]
pub enum TaskError {
    Engine(EngineError),
    /// Stopped at its time limit (its cancel token is set, so the model stops too).
    TimeLimit(Duration),
    /// The task panicked: the payload, for the front end's panic guard to answer.
    Panicked(Box<dyn std::any::Any + Send>),
    /// The blocking thread was stopped some other way (the runtime shutting down).
    Stopped(String),
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::Engine(error) => write!(f, "{error}"),
            TaskError::TimeLimit(limit) => write!(f, "the task took longer than {} s; stopped", limit.as_secs()),
            TaskError::Panicked(payload) => write!(f, "the task panicked: {}", panic_message(payload.as_ref())),
            TaskError::Stopped(why) => write!(f, "the task stopped: {why}"),
        }
    }
}

/// A panic's message, when it has one.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// The fast engine, the strong tier's model and its idle unloading: one per front end, shared by its tasks.
pub struct TaskRunner {
    engine: Arc<Engine>,
    strong: Arc<StrongModel>,
    /// The pending unload of an idle strong model (one at a time; aborted when the runner goes).
    idle_unload: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for TaskRunner {
    fn drop(&mut self) {
        if let Some(pending) = self.idle_unload.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
            pending.abort();
        }
    }
}

impl TaskRunner {
    pub fn new(engine: Arc<Engine>) -> TaskRunner {
        TaskRunner { engine, strong: Arc::new(StrongModel::default()), idle_unload: std::sync::Mutex::new(None) }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The loaded strong model's file, for the status.
    pub fn strong_loaded_path(&self) -> Option<PathBuf> {
        self.strong.loaded_path()
    }

    /// Unloads the strong model now (a one-shot CLI run at its end).
    pub async fn unload_strong(&self) {
        self.strong.unload_if_idle(Duration::ZERO).await;
    }

    /// The time limit of `job`: its budget and a margin; with a strong tier its budget and first load on top,
    /// with execution checks their time limit.
    pub fn time_limit(job: &TaskJob, has_strong: bool) -> Duration {
        let mut limit = TASK_TIME_LIMIT.max(job.budget.time + TASK_MARGIN);
        if has_strong {
            limit += Duration::from_millis(job.tiers.strong_budget_ms) + STRONG_LOAD_MARGIN;
        }
        if job.budget.verify.compile || job.budget.verify.run_tests {
            limit += Duration::from_millis(job.budget.verify.timeout_ms);
        }
        limit
    }

    /// Runs `job` on a blocking thread within its time limit; `cancel` stops it (and is set when this future is
    /// dropped, so the model stops too). A strong model that answered is unloaded once idle.
    pub async fn run(&self, job: TaskJob, cancel: &CancellationToken) -> Result<TaskRun, TaskError> {
        let stop_model_on_drop = cancel.clone().drop_guard();
        let ran = self.run_to_end(job, cancel).await;
        stop_model_on_drop.disarm();
        ran
    }

    async fn run_to_end(&self, job: TaskJob, cancel: &CancellationToken) -> Result<TaskRun, TaskError> {
        let fast_path = match &job.fast_config.model {
            ModelSource::Path(path) => Some(path.clone()),
            ModelSource::None => None,
        };
        let strong_path = job.tiers.strong_model_path(fast_path.as_deref());
        let limit = TaskRunner::time_limit(&job, strong_path.is_some());
        let idle = Duration::from_secs(job.tiers.strong_idle_secs.max(1));
        let work = {
            let (engine, strong, cancel) = (self.engine.clone(), self.strong.clone(), cancel.clone());
            let strong_path = strong_path.clone();
            let runtime = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                runtime.block_on(async move {
                    let TaskJob { kind, document, target, budget, tiers, fast_config, remote, route } = job;
                    let generator = Generator::new(&engine, remote.as_ref(), route);
                    let strong = strong_path.map(|path| (strong.as_ref(), path, fast_config));
                    let input = TaskInput { kind, document: &document, target: &target };
                    let outcome = run_tiers(&generator, strong, &tiers, input, budget, &cancel).await;
                    (outcome, generator.take_remote_error(), document)
                })
            })
        };
        let (outcome, remote_error, document) = match tokio::time::timeout(limit, work).await {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => {
                return Err(match error.try_into_panic() {
                    Ok(payload) => TaskError::Panicked(payload),
                    Err(error) => TaskError::Stopped(error.to_string()),
                })
            }
            Err(_) => {
                cancel.cancel();
                return Err(TaskError::TimeLimit(limit));
            }
        };
        let outcome = outcome.map_err(TaskError::Engine)?;
        if strong_path.is_some() && outcome.tier == Tier::Strong {
            self.unload_strong_when_idle(idle);
        }
        Ok(TaskRun { outcome, remote_error, document })
    }

    /// Unloads the strong model once it has been idle for `idle` (a later task reloads it).
    fn unload_strong_when_idle(&self, idle: Duration) {
        let strong = self.strong.clone();
        let pending = tokio::spawn(async move {
            tokio::time::sleep(idle).await;
            strong.unload_if_idle(idle).await;
        });
        let mut slot = self.idle_unload.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(previous) = slot.replace(pending) {
            previous.abort();
        }
    }
}

/// Runs CPU work (a parse, a verification) on tokio's blocking pool, so the async workers (which read a front
/// end's input) only wait. A panic in `work` is resumed here, for the front end's panic guard.
pub async fn off_the_async_workers<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => match error.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(error) => panic!("blocking work cancelled: {error}"),
        },
    }
}

/// Runs a task on the tiers its policy allows: the fast tier with `budget`, then the strong tier (loaded on
/// first need) with its own budget when nothing verified. The outcome names the tier that produced the edit;
/// a strong tier that cannot load leaves the fast tier's outcome, with the reason among its rejections.
async fn run_tiers(
    fast: &Generator<'_>,
    strong: Option<(&StrongModel, PathBuf, EngineConfig)>,
    settings: &TaskSettings,
    input: TaskInput<'_>,
    budget: TaskBudget,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let kind = input.kind;
    let policy = settings.policy(kind);
    let Some((model, path, fast_config)) = strong.filter(|_| policy != TierPolicy::Fast) else {
        return tasks::run(fast, input, budget, cancel).await;
    };
    let mut outcome = None;
    if policy != TierPolicy::Strong {
        let fast_outcome = tasks::run(fast, input, budget, cancel).await?;
        if fast_outcome.verified() {
            return Ok(fast_outcome);
        }
        outcome = Some(fast_outcome);
    }
    if cancel.is_cancelled() {
        // Cancelled before the strong tier: what the fast tier found (nothing verified), or, when it never ran,
        // a task that tried nothing.
        return Ok(outcome.unwrap_or_else(|| tasks::cancelled(kind)));
    }
    let engine = match model.get(&path, &fast_config).await {
        Ok(engine) => engine,
        Err(error) => {
            tracing::warn!(%error, "strong tier unavailable");
            let mut fallback = match outcome {
                Some(outcome) => outcome,
                None => tasks::run(fast, input, budget, cancel).await?,
            };
            fallback.rejections.push(format!("strong tier unavailable: {error}"));
            return Ok(fallback);
        }
    };
    let strong_budget = TaskBudget {
        samples: budget.samples.clamp(1, 3),
        time: Duration::from_millis(settings.strong_budget_ms.max(1)),
        verify: budget.verify,
        // What needs no model was tried by the fast tier: the strong one spends its budget on its own answers.
        model_only: outcome.is_some(),
        ..budget
    };
    let generator = Generator::local(&engine);
    let mut strong_outcome = tasks::run(&generator, input, strong_budget, cancel).await?;
    strong_outcome.tier = Tier::Strong;
    if let Some(fast_outcome) = outcome {
        strong_outcome.samples_tried += fast_outcome.samples_tried;
        strong_outcome.ms += fast_outcome.ms;
        let mut rejections = fast_outcome.rejections;
        rejections.append(&mut strong_outcome.rejections);
        strong_outcome.rejections = rejections;
    }
    Ok(strong_outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request cancelled before it starts, under the "strong" policy with a strong model configured: the fast
    /// tier never ran, so there is no outcome of its to return. It used to panic ("the fast tier ran").
    #[test]
    fn a_cancelled_strong_only_task_answers_nothing_and_never_panics() {
        let text = "fn f() -> u32 {\n    1 +\n}\n";
        let document = TaskDocument::parsed(spark_grammars::Lang::Rust, text);
        let target = TaskTarget { range: 22..22, message: None };
        let engine = Engine::start_scripted(vec!["1 + 2".to_owned()]);
        let settings = TaskSettings { fix: TierPolicy::Strong, ..TaskSettings::default() };
        let strong_model = StrongModel::default();
        let strong =
            Some((&strong_model, PathBuf::from("/nonexistent/strong.gguf"), EngineConfig::new(ModelSource::None, 1)));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outcome = runtime
            .block_on(run_tiers(
                &Generator::local(&engine),
                strong,
                &settings,
                TaskInput { kind: TaskKind::Fix, document: &document, target: &target },
                TaskBudget::default(),
                &cancel,
            ))
            .unwrap();
        assert!(!outcome.verified(), "a cancelled task offers nothing: {outcome:?}");
        assert_eq!(strong_model.loaded_path(), None, "a cancelled task loads no strong model");
    }
}
