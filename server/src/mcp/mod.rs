//! `spark-lsp mcp`: Spark's verified edits as MCP tools over stdio (docs/mcp.md), for coding agents. The tools
//! convert their JSON arguments, confine paths to the root (`paths`), call `core` and convert back; every failure
//! is a tool error with a message, and the server reads the next message.

pub mod core;
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
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use self::core::{
    CheckAnswer, CheckRequest, Core, CoreError, CoreSettings, Dialect, LineColumn, ProposedEdit, RegexAnswer,
    RegexExamples, Suggestion, Task, TaskAnswer,
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
        model: args.options.model.clone(),
        threads: args.options.threads,
        strong_model: args.options.strong_model.clone(),
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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteParams {
    /// The file, relative to the workspace root (its extension picks the language).
    pub file: String,
    /// 1-based line of the cursor (with `column`); or use `marker` in `text`.
    pub line: Option<u32>,
    /// 1-based column, counted in characters.
    pub column: Option<u32>,
    /// The file's text to complete in, instead of the file on disk (the file need not exist then).
    pub text: Option<String>,
    /// A marker in `text` that stands for the cursor (removed before completing); default `$0`.
    pub marker: Option<String>,
    /// The most lines of suggestion (default 8).
    pub max_lines: Option<u32>,
    /// Give up after this many milliseconds, waiting in the queue included (default 120000).
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixParams {
    /// The file, relative to the workspace root.
    pub file: String,
    /// 1-based line of the error (the start of the range).
    pub line: u32,
    /// 1-based column of the error, in characters.
    pub column: u32,
    /// End of the diagnostic's range (1-based line); default: the start.
    pub end_line: Option<u32>,
    pub end_column: Option<u32>,
    /// The diagnostic's message as the compiler gave it.
    pub message: Option<String>,
    /// The diagnostic's code, e.g. `E0308`.
    pub code: Option<String>,
    /// Also check candidates with the compiler in a scratch copy of the crate or package (the execution tier).
    #[serde(default)]
    pub run: bool,
    /// Apply the verified edit to the file (only on a server started with --allow-write).
    #[serde(default)]
    pub write: bool,
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestsParams {
    /// The file, relative to the workspace root.
    pub file: String,
    /// The function to test, by name; or give `line` and `column` inside it.
    pub function: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// Run the generated tests (and type-check them) in a scratch copy: the execution tier.
    #[serde(default)]
    pub run: bool,
    /// Apply the test edit (only on a server started with --allow-write).
    #[serde(default)]
    pub write: bool,
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DialectParam {
    #[default]
    Rust,
    Ecmascript,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegexParams {
    /// What the pattern matches, in one line.
    pub description: String,
    /// Strings the pattern must match whole.
    #[serde(default)]
    pub must_match: Vec<String>,
    /// Strings it must not match.
    #[serde(default)]
    pub must_not_match: Vec<String>,
    /// `rust` (the regex crate) or `ecmascript` (JavaScript/TypeScript); default rust.
    #[serde(default)]
    pub dialect: DialectParam,
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegexCheckParams {
    /// The pattern the edit introduces.
    pub pattern: String,
    #[serde(default)]
    pub must_match: Vec<String>,
    #[serde(default)]
    pub must_not_match: Vec<String>,
    #[serde(default)]
    pub dialect: DialectParam,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckParams {
    /// The file, relative to the workspace root.
    pub file: String,
    /// The exact text the edit replaces; it must occur once in the file.
    pub old_text: String,
    /// What it becomes.
    pub new_text: String,
    /// Check a regex the edit introduces against examples.
    pub regex: Option<RegexCheckParams>,
    /// Also type-check the edited file in a scratch copy of its crate or package (`cargo check`, `tsc`).
    #[serde(default)]
    pub compile: bool,
}

#[tool_router]
impl SparkMcp {
    #[tool(description = "Ghost-text completion at a cursor from Spark's resident model, checked to add no syntax \
                       error. Give `file` and `line`/`column` (1-based), or `text` containing a cursor `marker`.")]
    async fn complete(
        &self,
        Parameters(params): Parameters<CompleteParams>,
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
        Parameters(params): Parameters<FixParams>,
        ct: CancellationToken,
    ) -> Result<Json<TaskAnswer>, String> {
        let fail = |error: String| format!("fix: {error}");
        let deadline = deadline(params.deadline_ms);
        let file = self.root.existing_file(&params.file).map_err(fail)?;
        let text = self.root.read(&file).map_err(fail)?;
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
        let shown = self.root.shown(&file);
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        let answer = self
            .core
            .task(Task::Fix, &file, &shown, text, (start, end), message, params.run, deadline, &cancel)
            .await
            .map_err(|error| tool_error("fix", error))?;
        self.finish(answer, params.write).map(Json).map_err(fail)
    }

    #[tool(
        description = "Generate tests for a function (by `function` name, or a `line`/`column` inside it). Returns \
                       the verified test edit as a diff; `run: true` runs the tests (execution tier) and offers \
                       them only when they pass."
    )]
    async fn generate_tests(
        &self,
        Parameters(params): Parameters<TestsParams>,
        ct: CancellationToken,
    ) -> Result<Json<TaskAnswer>, String> {
        let fail = |error: String| format!("generate_tests: {error}");
        let deadline = deadline(params.deadline_ms);
        let file = self.root.existing_file(&params.file).map_err(fail)?;
        let text = self.root.read(&file).map_err(fail)?;
        let at = match (params.function.as_deref(), params.line, params.column) {
            (_, Some(line), Some(column)) => LineColumn { line, column },
            (Some(name), None, None) => {
                self.core.function_position(&text, name).map_err(|error| tool_error("generate_tests", error))?
            }
            _ => return Err(fail("give `function` (a name), or `line` and `column` inside the function".into())),
        };
        let shown = self.root.shown(&file);
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        let answer = self
            .core
            .task(Task::Tests, &file, &shown, text, (at, at), None, params.run, deadline, &cancel)
            .await
            .map_err(|error| tool_error("generate_tests", error))?;
        self.finish(answer, params.write).map(Json).map_err(fail)
    }

    #[tool(description = "Generate a regular expression from a description and examples that must and must not \
                       match, in the `rust` or `ecmascript` dialect. Returns the pattern, verified against every \
                       example, and the example table.")]
    async fn generate_regex(
        &self,
        Parameters(params): Parameters<RegexParams>,
        ct: CancellationToken,
    ) -> Result<Json<RegexAnswer>, String> {
        let fail = |error: String| format!("generate_regex: {error}");
        limit("description", &params.description, MAX_LINE_TEXT).map_err(fail)?;
        examples_within_limits(&params.must_match, &params.must_not_match).map_err(fail)?;
        let cancel = ct.child_token();
        let _stop = cancel.clone().drop_guard();
        self.core
            .regex(
                &params.description,
                &params.must_match,
                &params.must_not_match,
                dialect(params.dialect),
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
        Parameters(params): Parameters<CheckParams>,
        ct: CancellationToken,
    ) -> Result<Json<CheckAnswer>, String> {
        let fail = |error: String| format!("check: {error}");
        let file = self.root.existing_file(&params.file).map_err(fail)?;
        let text = self.root.read(&file).map_err(fail)?;
        limit("old_text", &params.old_text, MAX_FILE_BYTES as usize).map_err(fail)?;
        limit("new_text", &params.new_text, MAX_FILE_BYTES as usize).map_err(fail)?;
        let regex = match params.regex {
            Some(regex) => {
                limit("regex.pattern", &regex.pattern, MAX_LINE_TEXT).map_err(fail)?;
                examples_within_limits(&regex.must_match, &regex.must_not_match).map_err(fail)?;
                Some(RegexExamples {
                    pattern: regex.pattern,
                    must_match: regex.must_match,
                    must_not_match: regex.must_not_match,
                    dialect: dialect(regex.dialect),
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
