//! Model tiers for the code-action tasks: the fast model (the one serving ghost text) tries first; when none of
//! its candidates verifies, the task escalates to a strong tier — a second local model, loaded on first need
//! (only if it fits the memory limit) and unloaded after it has been idle a while. The answer says which tier
//! produced the edit. Ghost text never escalates: it stays on the fast model.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use spark_engine::{Engine, EngineConfig, EngineError, ModelSource};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::route::Generator;
use crate::tasks::{self, TaskBudget, TaskDocument, TaskKind, TaskOutcome, TaskTarget};

/// Which tiers a task may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TierPolicy {
    /// The fast model only.
    Fast,
    /// The fast model, then the strong one when nothing verified.
    FastThenStrong,
    /// The strong model only (the fast one when there is no strong model).
    Strong,
}

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

/// `tasks.*` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TaskSettings {
    /// The strong tier's model: a name from `scripts/install-model.sh --list`, or a GGUF path; `"auto"` (the
    /// default) takes the largest installed Qwen2.5-Coder that is not the fast model; `""` or `"none"`: no strong
    /// tier.
    pub strong_model: String,
    pub fix: TierPolicy,
    pub tests: TierPolicy,
    pub regex: TierPolicy,
    /// The strong tier's own time budget for one task (its first load not counted).
    pub strong_budget_ms: u64,
    /// The strong model is unloaded after this many seconds without a task.
    pub strong_idle_secs: u64,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            strong_model: "auto".to_owned(),
            fix: TierPolicy::FastThenStrong,
            tests: TierPolicy::FastThenStrong,
            regex: TierPolicy::FastThenStrong,
            strong_budget_ms: 20_000,
            strong_idle_secs: 300,
        }
    }
}

impl TaskSettings {
    pub fn policy(&self, kind: TaskKind) -> TierPolicy {
        match kind {
            TaskKind::Fix => self.fix,
            TaskKind::Tests => self.tests,
            TaskKind::Regex => self.regex,
        }
    }

    /// The strong model's file, when there is one and it is not `fast_model`.
    pub fn strong_model_path(&self, fast_model: Option<&std::path::Path>) -> Option<PathBuf> {
        let setting = self.strong_model.trim();
        let path = match setting {
            "" | "none" | "off" => return None,
            "auto" => {
                // Largest first: the strong tier is there to know more than the fast one.
                ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]
                    .into_iter()
                    .filter_map(spark_engine::known_model_path)
                    .find(|path| path.is_file() && Some(path.as_path()) != fast_model)?
            }
            name => spark_engine::known_model_path(name).unwrap_or_else(|| PathBuf::from(name)),
        };
        let same = fast_model.is_some_and(|fast| {
            let canonical = |path: &std::path::Path| std::fs::canonicalize(path).ok();
            fast == path.as_path() || canonical(fast).is_some_and(|fast| Some(fast) == canonical(&path))
        });
        (!same).then_some(path)
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

/// Runs a task on the tiers its policy allows: the fast tier with `budget`, then the strong tier (loaded on
/// first need) with its own budget when nothing verified. The outcome names the tier that produced the edit;
/// a strong tier that cannot load leaves the fast tier's outcome, with the reason among its rejections.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    fast: &Generator<'_>,
    strong: Option<(&StrongModel, PathBuf, EngineConfig)>,
    settings: &TaskSettings,
    kind: TaskKind,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let policy = settings.policy(kind);
    let Some((model, path, fast_config)) = strong.filter(|_| policy != TierPolicy::Fast) else {
        return tasks::run(fast, kind, document, target, budget, cancel).await;
    };
    let mut outcome = None;
    if policy != TierPolicy::Strong {
        let fast_outcome = tasks::run(fast, kind, document, target, budget, cancel).await?;
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
                None => tasks::run(fast, kind, document, target, budget, cancel).await?,
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
    };
    let generator = Generator::local(&engine);
    let mut strong_outcome = tasks::run(&generator, kind, document, target, strong_budget, cancel).await?;
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

    #[test]
    fn settings_parse_and_auto_never_picks_the_fast_model() {
        let settings: TaskSettings =
            serde_json::from_value(serde_json::json!({"fix": "fast", "strongModel": "none"})).unwrap();
        assert_eq!(settings.policy(TaskKind::Fix), TierPolicy::Fast);
        assert_eq!(settings.policy(TaskKind::Tests), TierPolicy::FastThenStrong);
        assert_eq!(settings.strong_model_path(None), None);
        let explicit = TaskSettings { strong_model: "/m/big.gguf".into(), ..TaskSettings::default() };
        assert_eq!(explicit.strong_model_path(Some("/m/small.gguf".as_ref())), Some(PathBuf::from("/m/big.gguf")));
        assert_eq!(explicit.strong_model_path(Some("/m/big.gguf".as_ref())), None);
        assert!(serde_json::from_value::<TaskSettings>(serde_json::json!({"regex": "fastest"})).is_err());
    }

    /// A request cancelled before it starts, under the "strong" policy with a strong model configured: the fast
    /// tier never ran, so there is no outcome of its to return. It used to panic ("the fast tier ran").
    #[test]
    fn a_cancelled_strong_only_task_answers_nothing_and_never_panics() {
        let text = "fn f() -> u32 {\n    1 +\n}\n";
        let document = TaskDocument {
            text: text.to_owned(),
            lang: spark_grammars::Lang::Rust,
            tree: spark_grammars::Lang::Rust.parser().parse(text, None).unwrap(),
            path: None,
            version: 1,
            revision: 0,
            open_files: Vec::new(),
        };
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
            .block_on(run(
                &Generator::local(&engine),
                strong,
                &settings,
                TaskKind::Fix,
                &document,
                &target,
                TaskBudget::default(),
                &cancel,
            ))
            .unwrap();
        assert!(!outcome.verified(), "a cancelled task offers nothing: {outcome:?}");
        assert_eq!(strong_model.loaded_path(), None, "a cancelled task loads no strong model");
    }
}
