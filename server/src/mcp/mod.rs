//! `spark-lsp mcp`: Spark's verified edits as MCP tools over stdio (docs/mcp.md), for coding agents. The tools
//! convert their JSON arguments, confine paths to the root (`paths`), call `core` and convert back; every failure
//! is a tool error with a message, and the server reads the next message.

pub mod core;
pub mod params;
pub mod paths;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, Implementation,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio_util::sync::CancellationToken;

use self::core::{
    CheckAnswer, CheckRequest, Core, CoreError, CoreSettings, Dialect, LineColumn, ProposedEdit, RegexAnswer,
    RegexExamples, Suggestion, Task, TaskAnswer,
};
use self::params::{
    CheckParams, CompleteParams, DialectParam, FixParams, RegexParams, Strict, TaskCallOptions, TestsParams,
};
use self::paths::{Root, MAX_FILE_BYTES};
use crate::options::TaskOptions;

/// `spark-lsp mcp`'s options.
#[derive(Args, Debug, Clone)]
pub struct McpArgs {
    /// The workspace root: tools read (and with --allow-write write) files under it only.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Let `write: true` apply verified edits to files under the root (otherwise tools return diffs only).
    #[arg(long)]
    pub allow_write: bool,
    #[command(flatten)]
    pub options: TaskOptions,
}

/// A call's deadline when it names none, and the longest it may name.
const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);
const MAX_DEADLINE: Duration = Duration::from_secs(600);
/// The most examples a regex call may carry, and the longest description or diagnostic message.
const MAX_EXAMPLES: usize = 200;
const MAX_LINE_TEXT: usize = 4096;

/// Serves MCP on stdin/stdout until the client closes stdin.
pub async fn serve(args: McpArgs) -> anyhow::Result<ExitCode> {
    let root = Root::new(&args.root, args.allow_write)?;
    let core = Arc::new(Core::start(CoreSettings {
        model: args.options.model_options(),
        samples: args.options.samples,
        task_budget: Duration::from_millis(args.options.budget_ms),
        run_timeout: Duration::from_millis(args.options.run_timeout_ms),
    }));
    tracing::info!(root = %root.dir().display(), allow_write = root.allow_write(), "mcp: serving on stdio");
    let server = SparkMcp { core: core.clone(), root: Arc::new(root), tool_router: SparkMcp::tool_router() };
    let running = server.serve(rmcp::transport::stdio()).await?;
    let quit = running.waiting().await;
    tracing::info!(?quit, "mcp: the client closed the connection");
    let _ = tokio::task::spawn_blocking(move || core.shutdown()).await;
    Ok(ExitCode::SUCCESS)
}

#[derive(Clone)]
pub struct SparkMcp {
    core: Arc<Core>,
    root: Arc<Root>,
    tool_router: ToolRouter<SparkMcp>,
}

#[tool_router]
impl SparkMcp {
    #[tool(description = "Ghost-text completion at a cursor from Spark's resident model, checked to add no syntax \
                       error. Give `file` and `line`/`column` (1-based), or `text` containing a cursor `marker`.")]
    async fn complete(
        &self,
        Parameters(Strict(params)): Parameters<Strict<CompleteParams>>,
        ct: CancellationToken,
    ) -> Result<Json<Suggestion>, String> {
        let fail = |error: String| format!("complete: {error}");
        let deadline = deadline(params.deadline_ms);
        let file = self.root.file_to_write(Path::new(&params.file)).map_err(fail)?;
        let (text, at) = match params.text {
            Some(text) => {
                limit("text", &text, MAX_FILE_BYTES as usize).map_err(fail)?;
                let marker = params.marker.unwrap_or_else(|| "$0".to_owned());
                match (params.line, params.column, text.find(&marker)) {
                    (Some(line), Some(column), _) => (text, LineColumn { line, column }),
                    (None, None, Some(at)) if !marker.is_empty() => {
                        let at = line_column(&text, at);
                        (text.replacen(&marker, "", 1), at)
                    }
                    _ => return Err(fail(format!("give line and column, or put the marker {marker:?} in text"))),
                }
            }
            None => {
                let (Some(line), Some(column)) = (params.line, params.column) else {
                    return Err(fail("give line and column (1-based), or text with a cursor marker".into()));
                };
                (self.root.read(&file).map_err(fail)?, LineColumn { line, column })
            }
        };
        let max_lines = params.max_lines.map(|lines| lines as usize);
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        self.core
            .complete(&file, &text, at, max_lines, deadline, &cancel)
            .await
            .map(Json)
            .map_err(|e| tool_error("complete", e))
    }

    #[tool(description = "Spark fix: repair the broken statement or item at a position (a compiler diagnostic's \
                       range and message help). Returns a verified unified diff, or says plainly that no \
                       candidate verified and why. `run: true` also type-checks candidates (execution tier).")]
    async fn fix(
        &self,
        Parameters(Strict(params)): Parameters<Strict<FixParams>>,
        ct: CancellationToken,
    ) -> Result<Json<TaskAnswer>, String> {
        let fail = |error: String| format!("fix: {error}");
        let (file, text) = self.read_existing(&params.file).map_err(fail)?;
        let message = match (params.message, params.code) {
            (Some(message), Some(code)) => Some(format!("error[{code}]: {message}")),
            (Some(message), None) => Some(message),
            (None, Some(code)) => Some(format!("error[{code}]")),
            (None, None) => None,
        };
        if let Some(message) = &message {
            limit("message", message, MAX_LINE_TEXT).map_err(fail)?;
        }
        let start = LineColumn { line: params.line, column: params.column };
        let end = LineColumn {
            line: params.end_line.unwrap_or(params.line),
            column: params.end_column.unwrap_or(if params.end_line.is_some() { 1 } else { params.column }),
        };
        self.task(Task::Fix, &file, text, (start, end), message, &params.options, ct).await
    }

    #[tool(
        description = "Generate tests for a function (by `function` name, or a `line`/`column` inside it). Returns \
                       the verified test edit as a diff; `run: true` runs the tests (execution tier) and offers \
                       them only when they pass."
    )]
    async fn generate_tests(
        &self,
        Parameters(Strict(params)): Parameters<Strict<TestsParams>>,
        ct: CancellationToken,
    ) -> Result<Json<TaskAnswer>, String> {
        let fail = |error: String| format!("generate_tests: {error}");
        let (file, text) = self.read_existing(&params.file).map_err(fail)?;
        let at = match (params.function.as_deref(), params.line, params.column) {
            (_, Some(line), Some(column)) => LineColumn { line, column },
            (Some(name), None, None) => {
                self.core.function_position(&text, name).map_err(|error| tool_error("generate_tests", error))?
            }
            _ => return Err(fail("give `function` (a name), or `line` and `column` inside the function".into())),
        };
        self.task(Task::Tests, &file, text, (at, at), None, &params.options, ct).await
    }

    #[tool(description = "Generate a regular expression from a description and examples that must and must not \
                       match, in the `rust` or `ecmascript` dialect. Returns the pattern, verified against every \
                       example, and the example table.")]
    async fn generate_regex(
        &self,
        Parameters(Strict(params)): Parameters<Strict<RegexParams>>,
        ct: CancellationToken,
    ) -> Result<Json<RegexAnswer>, String> {
        let fail = |error: String| format!("generate_regex: {error}");
        limit("description", &params.description, MAX_LINE_TEXT).map_err(fail)?;
        let examples = &params.examples;
        examples_within_limits(&examples.must_match, &examples.must_not_match).map_err(fail)?;
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        self.core
            .regex(
                &params.description,
                &examples.must_match,
                &examples.must_not_match,
                dialect(examples.dialect),
                deadline(params.deadline_ms),
                &cancel,
            )
            .await
            .map(Json)
            .map_err(|error| tool_error("generate_regex", error))
    }

    #[tool(description = "Run Spark's verifiers on an edit you made (`old_text` in `file` becomes `new_text`): it \
                       parses, stays inside its statement or item, a regex matches its examples, and with \
                       `compile: true` the crate or package still type-checks. Writes nothing.")]
    async fn check(
        &self,
        Parameters(Strict(params)): Parameters<Strict<CheckParams>>,
        ct: CancellationToken,
    ) -> Result<Json<CheckAnswer>, String> {
        let fail = |error: String| format!("check: {error}");
        let (file, text) = self.read_existing(&params.file).map_err(fail)?;
        limit("old_text", &params.old_text, MAX_FILE_BYTES as usize).map_err(fail)?;
        limit("new_text", &params.new_text, MAX_FILE_BYTES as usize).map_err(fail)?;
        let regex = match params.regex {
            Some(Strict(regex)) => {
                limit("regex.pattern", &regex.pattern, MAX_LINE_TEXT).map_err(fail)?;
                let examples = regex.examples;
                examples_within_limits(&examples.must_match, &examples.must_not_match).map_err(fail)?;
                Some(RegexExamples {
                    pattern: regex.pattern,
                    must_match: examples.must_match,
                    must_not_match: examples.must_not_match,
                    dialect: dialect(examples.dialect),
                })
            }
            None => None,
        };
        let request = CheckRequest {
            edit: ProposedEdit { old_text: params.old_text, new_text: params.new_text },
            regex,
            compile: params.compile,
        };
        let shown = self.root.shown(&file);
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        self.core
            .check(&file, &shown, &text, &request, &cancel)
            .await
            .map(Json)
            .map_err(|error| tool_error("check", error))
    }
}

impl SparkMcp {
    /// A file that exists inside the root, and its text.
    fn read_existing(&self, file: &str) -> Result<(PathBuf, String), String> {
        let file = self.root.existing_file(file)?;
        let text = self.root.read(&file)?;
        Ok((file, text))
    }

    /// Runs `task` on `file` (inside the root, its `text` read) within the call's deadline (counted from here)
    /// and the client's cancellation, and finishes its answer (paths, `write`).
    #[allow(clippy::too_many_arguments)]
    async fn task(
        &self,
        task: Task,
        file: &Path,
        text: String,
        range: (LineColumn, LineColumn),
        message: Option<String>,
        options: &TaskCallOptions,
        ct: CancellationToken,
    ) -> Result<Json<TaskAnswer>, String> {
        let tool = match task {
            Task::Fix => "fix",
            Task::Tests => "generate_tests",
        };
        let deadline = deadline(options.deadline_ms);
        let shown = self.root.shown(file);
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        let answer = self
            .core
            .task(task, file, &shown, text, range, message, options.run, deadline, &cancel)
            .await
            .map_err(|error| tool_error(tool, error))?;
        self.finish(answer, options.write).map(Json).map_err(|error| format!("{tool}: {error}"))
    }

    /// Names each change relative to the root (a change to another file must be inside it too), and writes it
    /// when the call asked and the root allows.
    fn finish(&self, mut answer: TaskAnswer, write: bool) -> Result<TaskAnswer, String> {
        for change in &mut answer.changes {
            let inside = self.root.file_to_write(&change.absolute)?;
            change.path = self.root.shown(&inside);
            change.absolute = inside;
        }
        if write && answer.verified {
            if !self.root.allow_write() {
                answer.summary.push_str(" (not written: the server was started without --allow-write)");
                return Ok(answer);
            }
            for change in &answer.changes {
                self.root.write(&change.absolute, &change.new_text)?;
            }
            answer.written = true;
        }
        Ok(answer)
    }
}

#[tool_handler]
impl ServerHandler for SparkMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("spark-lsp", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Spark: fast, verified edits from a model resident in this process. Paths are relative to the \
                 workspace root {}; writing is {}. Model: {}.",
                self.root.dir().display(),
                if self.root.allow_write() { "allowed with write: true" } else { "off (diffs only)" },
                self.core.model_state()
            ))
    }

    /// Arguments that do not fit a tool's schema (wrong types, unknown fields) are tool errors that name the tool
    /// and the field, so that an agent can correct the call (MCP asks for input errors as tool results).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let known = self.tool_router.has_route(&name);
        let call = ToolCallContext::new(self, request, context);
        match self.tool_router.call(call).await {
            Err(error) if known && error.code == ErrorCode::INVALID_PARAMS => {
                Ok(CallToolResult::error(vec![ContentBlock::text(format!("{name}: {}", error.message))]).into())
            }
            Err(_) if !known => Err(ErrorData::invalid_params(
                format!("no tool named {name:?}; the tools are complete, fix, generate_tests, generate_regex, check"),
                None,
            )),
            Ok(CallToolResponse::Complete(mut result)) if result.is_error == Some(true) => {
                // rmcp words a deserialization error without the tool's name.
                if let Some(text) = result.content.first().and_then(ContentBlock::as_text) {
                    if !text.text.starts_with(&format!("{name}:")) {
                        result.content = vec![ContentBlock::text(format!("{name}: {}", text.text))];
                    }
                }
                Ok(CallToolResponse::Complete(result))
            }
            other => other,
        }
    }
}

fn tool_error(tool: &str, error: CoreError) -> String {
    tracing::info!(tool, %error, "mcp: tool error");
    format!("{tool}: {error}")
}

fn deadline(deadline_ms: Option<u64>) -> Instant {
    let wanted = deadline_ms.map(Duration::from_millis).unwrap_or(DEFAULT_DEADLINE);
    Instant::now() + wanted.clamp(Duration::from_millis(1), MAX_DEADLINE)
}

fn dialect(dialect: DialectParam) -> Dialect {
    match dialect {
        DialectParam::Rust => Dialect::Rust,
        DialectParam::Ecmascript => Dialect::EcmaScript,
    }
}

fn limit(field: &str, text: &str, max_bytes: usize) -> Result<(), String> {
    if text.len() > max_bytes {
        Err(format!("{field} is {} bytes; the limit is {max_bytes}", text.len()))
    } else {
        Ok(())
    }
}

fn examples_within_limits(must: &[String], must_not: &[String]) -> Result<(), String> {
    if must.len() + must_not.len() > MAX_EXAMPLES {
        return Err(format!("{} examples; the limit is {MAX_EXAMPLES}", must.len() + must_not.len()));
    }
    must.iter().chain(must_not).try_for_each(|example| limit("an example", example, MAX_LINE_TEXT))
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> LineColumn {
    let line = text[..at].matches('\n').count() as u32 + 1;
    let line_start = text[..at].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    LineColumn { line, column: text[line_start..at].chars().count() as u32 + 1 }
}
