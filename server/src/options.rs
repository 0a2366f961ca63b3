//! Command-line options shared by several subcommands (the model of every command that loads one; the task
//! commands' and the MCP server's), declared once and flattened into each.

use std::path::PathBuf;

use clap::Args;
use spark_ide::model::ModelOptions;

/// The model every command that loads one takes: `complete`, `doctor`, the tasks and `mcp`.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// A GGUF model (default: SPARK_MODEL, then the installed default model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Threads the model computes on (default: the physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// The options `fix`, `tests`, `regex` and `mcp` share: the model, and how a task samples and checks.
#[derive(Args, Debug, Clone)]
pub struct TaskOptions {
    #[command(flatten)]
    pub engine: ModelArgs,
    /// Samples a task tries (greedy first, then sampled).
    #[arg(long, default_value_t = 4)]
    pub samples: usize,
    /// Time budget of a task's sampling (in MCP, a call's `deadline_ms` may cut it shorter).
    #[arg(long, default_value_t = 20_000)]
    pub budget_ms: u64,
    /// Time limit of one execution check (with --run; in MCP, `run: true` or `compile: true`).
    #[arg(long, default_value_t = 60_000)]
    pub run_timeout_ms: u64,
    /// The strong tier, tried when nothing from the model verified: a model name
    /// (scripts/install-model.sh --list) or a GGUF path; "auto": the largest installed Qwen2.5-Coder that is not
    /// the model; "none": no strong tier.
    #[arg(long, default_value = "auto", value_name = "NAME|PATH")]
    pub strong_model: String,
}

impl TaskOptions {
    /// The model, threads and strong tier, as `spark-ide` takes them.
    pub fn model_options(&self) -> ModelOptions {
        let ModelArgs { model, threads } = self.engine.clone();
        ModelOptions { model, threads, strong_model: self.strong_model.clone() }
    }
}
