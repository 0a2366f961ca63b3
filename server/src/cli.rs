//! The command line: `spark-lsp [--stdio]` serves LSP; `complete` and `doctor` run the same engine path for
//! people, scripts and agents.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use spark_ide::config::{engine_config, InlineSettings, PromptWindow};
use spark_ide::document::Document;
use spark_ide::model::{self, EngineConfig, EngineError, ModelSource};
use spark_ide::position::{self, LspPosition, PositionEncoding};
use spark_ide::Lang;

use crate::options::{ModelArgs, TaskOptions};
use spark_ide::suggest;
use spark_ide::tasks::{TaskBudget, TaskDocument, TaskKind, TaskTarget};

#[derive(Parser, Debug)]
#[command(
    name = "spark-lsp",
    version,
    about = "Spark: checked AI edits at keystroke latency, from a model in this process"
)]
pub struct Cli {
    /// Serve LSP over stdin/stdout (the default).
    #[arg(long, global = false)]
    pub stdio: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve LSP over stdio (what editors run).
    Serve,
    /// Print the ghost-text suggestion for a cursor in a file, and its latency.
    Complete(CompleteArgs),
    /// Print the model Spark would use, its size, architecture, FIM support, threads, CPU features, load time.
    Doctor(DoctorArgs),
    /// Spark fix: rewrite the broken statement or item at a position; prints a unified diff.
    Fix(TaskArgs),
    /// Generate tests for the function at a position; prints a unified diff.
    Tests(TaskArgs),
    /// Generate a regex from the comment at a position (with its examples); prints a unified diff.
    Regex(TaskArgs),
    /// Serve MCP over stdio for coding agents: complete, fix, generate_tests, generate_regex, check (docs/mcp.md).
    Mcp(crate::mcp::McpArgs),
}

#[derive(Args, Debug)]
pub struct TaskArgs {
    pub file: PathBuf,
    /// Position as LINE:COL, both 1-based; COL counts characters.
    #[arg(long, value_name = "LINE:COL")]
    pub at: String,
    /// The diagnostic to fix (fix only), e.g. the compiler's message.
    #[arg(long)]
    pub message: Option<String>,
    /// Print JSON instead of a diff.
    #[arg(long)]
    pub json: bool,
    /// Apply the verified edit to the files.
    #[arg(long)]
    pub write: bool,
    #[command(flatten)]
    pub options: TaskOptions,
    /// Also check candidates by running the toolchain in a scratch copy of the crate or package (`cargo check`,
    /// `tsc --noEmit`; for tests, the generated test itself): the `verify.compile` and `verify.runTests` settings.
    #[arg(long)]
    pub run: bool,
}

#[derive(Args, Debug)]
pub struct CompleteArgs {
    pub file: PathBuf,
    /// Cursor as LINE:COL, both 1-based; COL counts characters.
    #[arg(long, value_name = "LINE:COL")]
    pub at: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: ModelArgs,
    /// Give up generating after this long (the prompt is always evaluated).
    #[arg(long, default_value_t = 10_000)]
    pub deadline_ms: u64,
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    /// Show the suggestion only when the model gives its first line at least this probability (0 to 1), as
    /// the server's `inline.minConfidence` [default: the model's, 0.25 for the default model]
    #[arg(long, value_parser = probability)]
    pub min_confidence: Option<f32>,
}

fn probability(value: &str) -> Result<f32, String> {
    match value.parse::<f32>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("{value:?} is not a probability between 0 and 1")),
    }
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub engine: ModelArgs,
    /// Context window in tokens, as the `model.contextSize` setting.
    #[arg(long, default_value_t = 4096)]
    pub context_size: u32,
    /// Memory limit in MiB, as the `model.maxMemoryMb` setting (default: the memory available; 0: no check).
    #[arg(long)]
    pub max_memory_mb: Option<u64>,
    /// KV slots, as the `model.kvSlots` setting (default: derived from the memory limit).
    #[arg(long)]
    pub kv_slots: Option<u32>,
}

/// Handlers tower-lsp runs at once; see `serve_stdio_guarded`.
const MAX_CONCURRENT_HANDLERS: usize = 1024;

/// LSP over stdio with `spark_lsp::framing`'s guard in front of the transport: a malformed message is
/// dropped with a warning instead of ending the server (tower-lsp stops reading at the first frame it cannot
/// decode).
pub async fn serve_stdio() -> anyhow::Result<ExitCode> {
    let (service, socket) = crate::lsp::service();
    let (guarded_input, pump_output) = tokio::io::duplex(1 << 20);
    let pump = tokio::spawn(crate::framing::pump(tokio::io::stdin(), pump_output));
    // tower-lsp runs at most `concurrency_level` handlers at once (4 by default) and stops reading input while
    // they are all busy: four ghost-text requests waiting on the model would hold back the `didChange` and
    // `$/cancelRequest` that make them stale. Requests are cheap to hold; reading input must not stop.
    tower_lsp_server::Server::new(guarded_input, tokio::io::stdout(), socket)
        .concurrency_level(MAX_CONCURRENT_HANDLERS)
        .serve(service)
        .await;
    pump.abort();
    let _ = pump.await;
    Ok(ExitCode::SUCCESS)
}

fn parse_at(at: &str) -> anyhow::Result<(u32, u32)> {
    let (line, column) = at.split_once(':').context("--at takes LINE:COL, e.g. --at 12:5")?;
    let line: u32 = line.trim().parse().with_context(|| format!("--at: line {line:?} is not a number"))?;
    let column: u32 = column.trim().parse().with_context(|| format!("--at: column {column:?} is not a number"))?;
    if line == 0 || column == 0 {
        bail!("--at is 1-based: line and column start at 1");
    }
    Ok((line - 1, column - 1))
}

fn read_source(file: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(error) => {
            eprintln!("spark-lsp: warning: {} is not valid UTF-8; invalid bytes were replaced", file.display());
            Ok(String::from_utf8_lossy(error.as_bytes()).into_owned())
        }
    }
}

pub async fn complete(args: CompleteArgs) -> anyhow::Result<ExitCode> {
    let (line, column) = parse_at(&args.at)?;
    let text = read_source(&args.file)?;
    let lang = Lang::from_path(&args.file);
    let language_id = lang.map(|lang| lang.name()).unwrap_or("plaintext");
    let document = Document::new(&text, language_id, lang, 0);
    let resolved = position::to_byte(&document.rope, LspPosition { line, character: column }, PositionEncoding::Utf32);
    if resolved.clamped {
        eprintln!("spark-lsp: warning: --at {} is outside the file; clamped", args.at);
    }

    let process_start = Instant::now();
    let engine = model::start_file(args.engine.model.as_deref(), args.engine.threads);
    let info = engine.wait_ready().await.context("the model is not available")?;
    let settings = InlineSettings {
        deadline_ms: args.deadline_ms,
        max_tokens: args.max_tokens,
        min_confidence: args.min_confidence,
        ..InlineSettings::default()
    }
    .with_window(PromptWindow::for_model(Some(info.n_params)));
    let path = args.file.to_string_lossy().into_owned();
    let started = Instant::now();
    let answer = suggest::one_shot(&engine, &document, resolved.byte, &path, &settings, CancellationToken::new())
        .await
        .context("completion failed")?;
    let (completion, verified, mode) = (answer.completion, answer.checked, answer.mode);
    let latency_ms = started.elapsed().as_millis();
    let stats = completion.stats;
    if args.json {
        let output = json!({
            "file": args.file,
            "line": line + 1,
            "column": column + 1,
            "suggestion": verified,
            "unverified": completion.text,
            "mode": format!("{mode:?}"),
            "latencyMs": latency_ms,
            "modelLoadMs": info.load_ms,
            "startToReadyMs": u64::try_from(started.duration_since(process_start).as_millis()).unwrap_or(0),
            "stop": format!("{:?}", completion.stop),
            "stats": {
                "nPrompt": stats.n_prompt, "nReused": stats.n_reused, "nDecoded": stats.n_decoded,
                "nGenerated": stats.n_generated, "promptMs": stats.prompt_ms, "totalMs": stats.total_ms,
                "nDrafted": stats.n_drafted, "nAccepted": stats.n_accepted,
                "confidence": f64::from(stats.confidence_permille) / 1000.0, "belowConfidence": stats.below_confidence,
            },
            "model": {"path": info.path, "name": info.name, "arch": info.architecture, "fim": info.fim.is_some()},
        });
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        match &verified {
            Some(text) => println!("{text}"),
            None if stats.below_confidence => {
                println!("(no suggestion: the model's guess is less likely than inline.minConfidence allows)")
            }
            None => println!("(no suggestion passed the checks)"),
        }
        println!("--");
        println!(
            "latency {latency_ms} ms ({mode:?} mode; prompt {} tokens: {} evaluated in {} ms; {} generated; stop: {:?}; \
             first line's probability {:.3}{}); model {} loaded in {} ms",
            stats.n_prompt,
            stats.n_decoded,
            stats.prompt_ms,
            stats.n_generated,
            completion.stop,
            f64::from(stats.confidence_permille) / 1000.0,
            if stats.below_confidence { ", under inline.minConfidence: not shown" } else { "" },
            info.name,
            info.load_ms
        );
    }
    engine.shutdown();
    Ok(ExitCode::SUCCESS)
}

pub async fn doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    println!("spark-lsp {}", env!("CARGO_PKG_VERSION"));
    let source = if args.engine.model.is_some() {
        "--model"
    } else if std::env::var_os("SPARK_MODEL").is_some_and(|value| !value.is_empty()) {
        "SPARK_MODEL"
    } else {
        "default path"
    };
    let config = EngineConfig {
        n_ctx: args.context_size.clamp(512, 131_072),
        max_memory_mb: args.max_memory_mb,
        kv_slots: args.kv_slots,
        ..engine_config(args.engine.model.as_deref(), args.engine.threads)
    };
    match &config.model {
        ModelSource::Path(path) => println!("model:        {} (from {source})", path.display()),
        ModelSource::None => {
            println!("model:        none (HOME is not set and no model is configured)")
        }
    }
    println!("threads:      {} (physical cores {}, logical {})", config.threads, num_physical(), num_logical());
    println!("cpu features: {}", cpu_features());
    print_installed_models();
    let started = Instant::now();
    let engine = model::start(config);
    let ready = engine.wait_ready().await;
    let code = match ready {
        Ok(info) => {
            println!("size:         {:.1} MiB", info.size_bytes as f64 / (1024.0 * 1024.0));
            println!("name:         {}", info.name);
            println!("architecture: {}", info.architecture);
            println!("parameters:   {:.0} M", info.n_params as f64 / 1e6);
            println!("vocabulary:   {} tokens", info.n_vocab);
            println!("context:      {} tokens (trained {})", info.n_ctx, info.n_ctx_train);
            if let Some(memory) = &info.memory {
                println!("memory:       {memory}");
                let source = if args.kv_slots.is_some() { "--kv-slots" } else { "from the memory limit" };
                let use_ = if memory.n_slots > 1 {
                    format!("{} recently used documents + tasks", memory.n_slots - 1)
                } else {
                    "one sequence for everything".to_owned()
                };
                println!("kv slots:     {} ({use_}; {source})", memory.n_slots);
            }
            match &info.fim {
                Some(fim) => println!("fill-in:      yes, {:?} template", fim.family),
                None => println!("fill-in:      no FIM tokens; prefix completion, the suffix stops and trims"),
            }
            let kind = match (&info.chat, info.has_chat_template) {
                (Some(_), _) => "yes: instruction-tuned; task prompts use its chat template",
                (None, true) => "yes, but it could not be rendered; task prompts are few-shot completions",
                (None, false) => "no: a base model; task prompts are few-shot completions",
            };
            println!("chat template: {kind}");
            println!(
                "load time:    {} ms (model), {} ms (start to ready)",
                info.load_ms,
                started.elapsed().as_millis()
            );
            println!("status:       ok");
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("status:       FAILED: {error}");
            let fix = match error {
                EngineError::DoesNotFit { .. } | EngineError::ContextAllocation { .. } => {
                    "lower --context-size (model.contextSize), raise --max-memory-mb (model.maxMemoryMb) if the machine has the memory, or choose a smaller model"
                }
                _ => "run `make model` to install the default model, or point SPARK_MODEL / model.path at a GGUF file",
            };
            println!("fix:          {fix}");
            ExitCode::FAILURE
        }
    };
    engine.shutdown();
    let mcp = if code == ExitCode::SUCCESS {
        "usable: `spark-lsp mcp --root DIR` (stdio; docs/mcp.md)"
    } else {
        "not usable until the model loads (see fix above)"
    };
    println!("mcp:          {mcp}");
    Ok(code)
}

/// The models in the model folder, and what Spark uses each for (`scripts/install-model.sh NAME` adds more).
fn print_installed_models() {
    let installed = model::installed();
    match &installed.dir {
        Some(dir) => println!("models in:    {} ({} installed)", dir.display(), installed.models.len()),
        None => println!("models in:    none (HOME is not set)"),
    }
    for found in &installed.models {
        let serves = found.serves.unwrap_or("a GGUF Spark does not know: FIM when its vocabulary has the tokens");
        println!("  {} ({:.0} MiB): {serves}", found.file, found.size_bytes as f64 / (1024.0 * 1024.0));
    }
    if !installed.missing.is_empty() {
        println!(
            "  not installed: {} (scripts/install-model.sh NAME, or make model MODEL=NAME)",
            installed.missing.join(", ")
        );
    }
}

fn num_physical() -> usize {
    model::default_threads()
}

fn num_logical() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn cpu_features() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let mut found = Vec::new();
        macro_rules! feature {
            ($name:tt) => {
                if std::arch::is_x86_feature_detected!($name) {
                    found.push($name);
                }
            };
        }
        feature!("sse4.2");
        feature!("avx");
        feature!("avx2");
        feature!("fma");
        feature!("f16c");
        feature!("avx512f");
        feature!("avx512vnni");
        found.join(" ")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH.to_owned()
    }
}

/// `fix`, `tests` and `regex`: the same task code as the code actions, on a file.
pub async fn task(kind: TaskKind, args: TaskArgs) -> anyhow::Result<ExitCode> {
    let (line, column) = parse_at(&args.at)?;
    let text = read_source(&args.file)?;
    let Some(lang) = Lang::from_path(&args.file) else {
        bail!("{}: Spark's tasks work on Rust and TypeScript files (.rs, .ts, .tsx, .js, .jsx)", args.file.display());
    };
    let document = Document::new(&text, lang.name(), Some(lang), 0);
    let Some(tree) = document.tree.clone() else { bail!("{} could not be parsed (too large?)", args.file.display()) };
    let at = position::to_byte(&document.rope, LspPosition { line, character: column }, PositionEncoding::Utf32).byte;
    let options = args.options.model_options();
    let runner = options.task_runner();
    runner.engine().wait_ready().await.context("the model is not available")?;
    let path = std::fs::canonicalize(&args.file).unwrap_or_else(|_| args.file.clone());
    let snapshot = TaskDocument {
        text: text.clone(),
        lang,
        tree,
        path: Some(path),
        version: 0,
        revision: 0,
        open_files: Vec::new(),
    };
    let target = TaskTarget { range: at..at, message: args.message.clone() };
    let verify = if args.run {
        spark_ide::exec_check::VerifySettings {
            timeout_ms: args.options.run_timeout_ms,
            ..spark_ide::exec_check::VerifySettings::all()
        }
    } else {
        spark_ide::exec_check::VerifySettings::off()
    };
    let budget = TaskBudget {
        samples: args.options.samples.max(1),
        time: std::time::Duration::from_millis(args.options.budget_ms),
        verify,
        ..TaskBudget::default()
    };
    let run = runner.run(options.job(kind, snapshot, target, budget), &CancellationToken::new()).await;
    runner.engine().shutdown();
    runner.unload_strong().await;
    let outcome = run.map_err(|error| anyhow::anyhow!("{error}"))?.outcome;

    let diffs: Vec<(String, bool, String)> = outcome
        .changes
        .iter()
        .map(|change| {
            let shown = change.path.as_deref().unwrap_or(&args.file).display().to_string();
            let diff = change.unified_diff(&shown);
            (shown, change.create, diff)
        })
        .collect();
    if args.json {
        let output = json!({
            "task": kind.command(),
            "verified": outcome.verified(),
            "title": outcome.title,
            "samplesTried": outcome.samples_tried,
            "tier": outcome.tier.name(),
            "origin": outcome.origin.name(),
            "ms": outcome.ms,
            "rejections": outcome.rejections,
            "message": (!outcome.verified()).then(|| kind.nothing_verified()),
            "changes": diffs.iter().map(|(path, create, diff)| json!({"path": path, "create": create, "diff": diff})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else if outcome.verified() {
        for (_, _, diff) in &diffs {
            print!("{diff}");
        }
        eprintln!(
            "spark-lsp: {} ({} ms, {} sample(s), {})",
            outcome.title,
            outcome.ms,
            outcome.samples_tried,
            outcome.source()
        );
    } else {
        println!("{}", kind.nothing_verified());
        for rejection in &outcome.rejections {
            println!("  refused: {rejection}");
        }
    }
    if args.write && outcome.verified() {
        for change in &outcome.changes {
            let target = change.path.clone().unwrap_or_else(|| args.file.clone());
            std::fs::write(&target, change.new_text()).with_context(|| format!("writing {}", target.display()))?;
        }
    }
    // Exit 2 says "nothing verified", distinct from errors (1).
    Ok(if outcome.verified() { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_at_is_one_based_and_strict() {
        assert_eq!(parse_at("3:7").unwrap(), (2, 6));
        assert!(parse_at("0:1").is_err());
        assert!(parse_at("3").is_err());
        assert!(parse_at("a:b").is_err());
    }
}
