//! The one adapter between the MCP server and Spark's core: the resident engine, the tasks, the verifiers and the
//! execution tier are called from here and nowhere else in `mcp/`, so that the server follows the core when it
//! moves (into `spark-ide`'s `Workspace`). Inputs are text, 1-based line/column positions and paths already
//! confined to the root; outputs are plain structs that also serialize as the tools' structured results.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use spark_ide::config::{InlineSettings, PromptWindow};
use spark_ide::document::Document;
use spark_ide::exec_check::{Gate, VerifySettings};
use spark_ide::model::{EngineError, EngineState, ModelOptions};
use spark_ide::parse;
use spark_ide::position::{self, LspPosition, PositionEncoding};
use spark_ide::runner::{TaskError, TaskRunner};
use spark_ide::tasks::{self, FileChange, TaskBudget, TaskDocument, TaskKind, TaskTarget};
use spark_ide::verify::{self as edit_check, RegexFlavor, Rejection};
use spark_ide::{suggest, verify, Lang};

/// What the server was started with, for every call.
#[derive(Debug, Clone)]
pub struct CoreSettings {
    /// The model, threads and strong tier (`--model`, `--threads`, `--strong-model`, as the CLI's).
    pub model: ModelOptions,
    /// Samples a task tries (greedy first).
    pub samples: usize,
    /// The time a task samples for, at most (a call's own deadline may cut it shorter).
    pub task_budget: Duration,
    /// Time limit of one execution check (`run: true`, `compile: true`).
    pub run_timeout: Duration,
}

/// Why a call gave no result: each becomes a tool error with this text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The input is wrong (a position past the file, an unsupported language, a missing function).
    BadInput(String),
    /// The model was still loading when the call's deadline came.
    Loading {
        waited_ms: u64,
    },
    /// The model cannot be used (not installed, failed to load).
    Model(String),
    Cancelled,
    Deadline {
        ms: u64,
    },
    Internal(String),
}

impl std::fmt::Display for CoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CoreError::BadInput(message) => write!(f, "{message}"),
            CoreError::Loading { waited_ms } => {
                write!(f, "the model is still loading (waited {waited_ms} ms); call again shortly")
            }
            CoreError::Model(message) => write!(f, "the model is not available: {message}"),
            CoreError::Cancelled => write!(f, "cancelled by the client; the model stopped"),
            CoreError::Deadline { ms } => write!(f, "the call took longer than its deadline ({ms} ms); stopped"),
            CoreError::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

/// A 1-based position; the column counts characters (Unicode scalar values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineColumn {
    pub line: u32,
    pub column: u32,
}

/// The three tasks, as the tools name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Fix,
    Tests,
}

/// The regex dialects `generate_regex` and `check` know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Rust,
    EcmaScript,
}

/// One file's verified change, as a unified diff and as whole new text (for `write: true`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Change {
    /// The file, relative to the workspace root when inside it.
    pub path: String,
    /// True when the change creates the file (a TypeScript test file).
    pub create: bool,
    pub diff: String,
    #[serde(skip)]
    pub absolute: PathBuf,
    #[serde(skip)]
    pub new_text: String,
}

/// A task's answer: a verified edit, or a plain statement that nothing verified and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskAnswer {
    /// True when a candidate passed every verifier; `changes` then holds it.
    pub verified: bool,
    /// What happened, in one sentence (the edit's title, or why nothing verified).
    pub summary: String,
    pub changes: Vec<Change>,
    /// Why each refused candidate was refused, in order.
    pub rejections: Vec<String>,
    pub samples_tried: usize,
    /// The model tier that produced the edit (or tried last): "fast" or "strong".
    pub tier: String,
    /// Milliseconds the task took (model and checks, not the wait in the queue).
    pub ms: u64,
    /// Whether the edit was written to disk (`write: true` on a server started with --allow-write).
    pub written: bool,
}

/// A ghost-text suggestion and its checks.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Suggestion {
    /// The text to insert at the position, when it passed the check; null otherwise.
    pub suggestion: Option<String>,
    /// What the model wrote, before the check cut it to its longest clean prefix of lines.
    pub model_text: String,
    pub checks: Vec<CheckRow>,
    /// The 1-based line and column the suggestion is for.
    pub line: u32,
    pub column: u32,
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    pub ms: u64,
}

/// One verifier's verdict.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckRow {
    pub check: String,
    pub passed: bool,
    pub detail: String,
}

/// One example of a regex and whether the pattern treats it as asked.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExampleRow {
    pub example: String,
    /// True for an example that must match, false for one that must not.
    pub should_match: bool,
    pub matches: bool,
    pub ok: bool,
}

/// A generated pattern and its example table.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RegexAnswer {
    pub verified: bool,
    /// The pattern (anchored), when one verified.
    pub pattern: Option<String>,
    /// "rust" or "ecmascript".
    pub dialect: String,
    pub examples: Vec<ExampleRow>,
    pub summary: String,
    pub rejections: Vec<String>,
    pub samples_tried: usize,
    pub ms: u64,
}

/// Spark's verifiers on an edit the agent made.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckAnswer {
    /// True when every check passed.
    pub ok: bool,
    pub checks: Vec<CheckRow>,
    pub diff: String,
    /// The example table, when regex examples were given.
    pub examples: Vec<ExampleRow>,
}

/// The edit `check` is asked about: `old_text` (occurring exactly once in the file) becomes `new_text`.
#[derive(Debug, Clone)]
pub struct ProposedEdit {
    pub old_text: String,
    pub new_text: String,
}

/// What `check` is asked: the edit, a regex it introduces with its examples, and whether to type-check.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    pub edit: ProposedEdit,
    pub regex: Option<RegexExamples>,
    pub compile: bool,
}

/// Regex examples for `check`: the pattern the edit introduces and what it must and must not match.
#[derive(Debug, Clone)]
pub struct RegexExamples {
    pub pattern: String,
    pub must_match: Vec<String>,
    pub must_not_match: Vec<String>,
    pub dialect: Dialect,
}

/// The resident engine, the strong tier's lazily loaded model, and the queue calls take turns in.
pub struct Core {
    /// The one task runner, over the resident engine (`runner.engine()`).
    runner: TaskRunner,
    settings: CoreSettings,
    /// Calls that use the model take turns here, first come first served: the engine supersedes a queued task
    /// by a newer one (the editor's rule), which would answer a concurrent agent's call with nothing.
    model_queue: tokio::sync::Mutex<()>,
}

impl Core {
    /// Starts the engine; the model loads in the background.
    pub fn start(settings: CoreSettings) -> Core {
        let runner = settings.model.task_runner();
        Core { runner, settings, model_queue: tokio::sync::Mutex::new(()) }
    }

    /// "loading", "ready: NAME" or "failed: why", for the server's instructions and logs.
    pub fn model_state(&self) -> String {
        match self.runner.engine().state() {
            EngineState::Loading { path } => format!("loading {}", path.display()),
            EngineState::Ready(info) => format!("ready: {}", info.name),
            EngineState::Failed { error } => format!("failed: {error}"),
            #[allow(unreachable_patterns)]
            _ => "unknown".to_owned(),
        }
    }

    pub fn shutdown(&self) {
        self.runner.engine().shutdown();
    }

    /// `complete`: the ghost text at a position of `text` (the file's text, or text the agent gave).
    pub async fn complete(
        &self,
        file: &Path,
        text: &str,
        at: LineColumn,
        max_lines: Option<usize>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Suggestion, CoreError> {
        let lang = Lang::from_path(file);
        let document = Document::new(text, lang.map(|lang| lang.name()).unwrap_or("plaintext"), lang, 0);
        let byte = byte_at(&document, at)?;
        let started = Instant::now();
        bounded(deadline, cancel, async {
            let _turn = self.model_queue.lock().await;
            self.ready(deadline).await?;
            // Ghost text answers at its own deadline with what it has; the call's deadline bounds it.
            let left = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
            let settings = InlineSettings {
                deadline_ms: left.clamp(50, 10_000),
                max_tokens: 96,
                max_lines: max_lines.unwrap_or(8).clamp(1, 64),
                prefetch: false,
                ..InlineSettings::default()
            }
            .with_window(PromptWindow::for_model(match self.runner.engine().state() {
                EngineState::Ready(info) => Some(info.n_params),
                _ => None,
            }));
            let path = file.to_string_lossy();
            let answer =
                suggest::one_shot(self.runner.engine(), &document, byte, &path, &settings, cancel.child_token())
                    .await
                    .map_err(engine_error)?;
            let (completion, checked) = (answer.completion, answer.checked);
            let passed = checked.as_ref().is_some_and(|text| !text.is_empty());
            let detail = match (&checked, completion.text.is_empty()) {
                (_, true) => "the model wrote nothing here".to_owned(),
                (Some(kept), false) if kept.len() == completion.text.len() => {
                    "the file parses with it inserted (no new syntax error in the lines it touches)".to_owned()
                }
                (Some(kept), false) if !kept.is_empty() => {
                    "cut to its longest prefix of lines that adds no syntax error".to_owned()
                }
                _ => "every line of it adds a syntax error: refused".to_owned(),
            };
            Ok(Suggestion {
                suggestion: checked.filter(|text| !text.is_empty()),
                model_text: completion.text,
                checks: vec![CheckRow { check: "parses".into(), passed, detail }],
                line: at.line,
                column: at.column,
                prompt_tokens: completion.stats.n_prompt,
                reused_tokens: completion.stats.n_reused,
                generated_tokens: completion.stats.n_generated,
                ms: started.elapsed().as_millis() as u64,
            })
        })
        .await
    }

    /// `fix` and `generate_tests` on a file: the same task code as the editor's code actions and the CLI.
    #[allow(clippy::too_many_arguments)]
    pub async fn task(
        &self,
        task: Task,
        file: &Path,
        shown: &str,
        text: String,
        range: (LineColumn, LineColumn),
        message: Option<String>,
        run: bool,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<TaskAnswer, CoreError> {
        let kind = match task {
            Task::Fix => TaskKind::Fix,
            Task::Tests => TaskKind::Tests,
        };
        let Some(lang) = Lang::from_path(file) else {
            return Err(CoreError::BadInput(format!(
                "{shown}: Spark's tasks work on Rust and TypeScript files (.rs, .ts, .tsx, .js, .jsx)"
            )));
        };
        let document = Document::new(&text, lang.name(), Some(lang), 0);
        let start = byte_at(&document, range.0)?;
        let end = byte_at(&document, range.1)?.max(start);
        let Some(tree) = document.tree.clone() else {
            return Err(CoreError::BadInput(format!("{shown} could not be parsed (too large?)")));
        };
        let snapshot = TaskDocument {
            text,
            lang,
            tree,
            path: Some(file.to_owned()),
            version: 0,
            revision: 0,
            open_files: Vec::new(),
        };
        let target = TaskTarget { range: start..end, message };
        let verify = if run {
            VerifySettings { timeout_ms: self.settings.run_timeout.as_millis() as u64, ..VerifySettings::all() }
        } else {
            VerifySettings::off()
        };
        let outcome = self.run_task(kind, snapshot, target, verify, deadline, cancel).await?;
        let changes = outcome
            .changes
            .iter()
            .map(|change| {
                let absolute = change.path.clone().unwrap_or_else(|| file.to_owned());
                let shown_path = if change.path.is_some() { absolute.display().to_string() } else { shown.to_owned() };
                let diff = change.unified_diff(&shown_path);
                Change { path: shown_path, create: change.create, diff, absolute, new_text: change.new_text() }
            })
            .collect();
        let summary = if outcome.verified() {
            outcome.title.clone()
        } else {
            let reason =
                outcome.rejections.last().map(|reason| format!(" (last candidate: {reason})")).unwrap_or_default();
            format!("{}{reason}", kind.nothing_verified())
        };
        Ok(TaskAnswer {
            verified: outcome.verified(),
            summary,
            changes,
            rejections: outcome.rejections,
            samples_tried: outcome.samples_tried,
            tier: outcome.tier.name().to_owned(),
            ms: outcome.ms,
            written: false,
        })
    }

    /// The 1-based position of a function named `name` in `text` (its `fn`/`function` keyword, else the first
    /// `name(`), for `generate_tests` by name.
    pub fn function_position(&self, text: &str, name: &str) -> Result<LineColumn, CoreError> {
        let valid = !name.is_empty() && name.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$');
        if !valid {
            return Err(CoreError::BadInput(format!("{name:?} is not a function name")));
        }
        let candidates = [format!("fn {name}"), format!("function {name}"), format!("{name}(")];
        let byte = candidates
            .iter()
            .filter_map(|needle| {
                text.match_indices(needle.as_str())
                    .find(|(at, _)| {
                        let after = text[at + needle.len()..].chars().next();
                        let before = text[..*at].chars().next_back();
                        !after.is_some_and(|ch| ch.is_alphanumeric() || ch == '_')
                            && !before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_')
                    })
                    .map(|(at, _)| at)
            })
            .next()
            .ok_or_else(|| CoreError::BadInput(format!("no function named `{name}` in the file")))?;
        let line = text[..byte].matches('\n').count() as u32 + 1;
        let line_start = text[..byte].rfind('\n').map(|at| at + 1).unwrap_or(0);
        let column = text[line_start..byte].chars().count() as u32 + 1;
        Ok(LineColumn { line, column })
    }

    /// `generate_regex`: a pattern from a description and examples, checked against every example.
    pub async fn regex(
        &self,
        description: &str,
        must_match: &[String],
        must_not_match: &[String],
        dialect: Dialect,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<RegexAnswer, CoreError> {
        // The task reads its spec from a comment (the editor's form): an example that would not read back bare
        // (a `,` `;` quote, line break, edge space or keyword) is carried as a JSON string, which the comment
        // parser takes exactly.
        if description.contains(['\n', '\r']) || description.trim().is_empty() {
            return Err(CoreError::BadInput("the description must be one non-empty line".into()));
        }
        let quote =
            |examples: &[String]| examples.iter().map(|example| tasks::quote_example(example)).collect::<Vec<_>>();
        let mut comment = format!("// regex: {}", description.replace([',', ';', '"', '`'], " "));
        if !must_match.is_empty() {
            comment.push_str(&format!(", matches {}", quote(must_match).join(", ")));
        }
        if !must_not_match.is_empty() {
            comment.push_str(&format!(", not {}", quote(must_not_match).join(", ")));
        }
        let lang = match dialect {
            Dialect::Rust => Lang::Rust,
            Dialect::EcmaScript => Lang::TypeScript,
        };
        let text = format!("{comment}\n");
        let spec = tasks::parse_regex_spec(&comment);
        let spec_matches = spec
            .as_ref()
            .is_some_and(|spec| spec.positives.as_slice() == must_match && spec.negatives.as_slice() == must_not_match);
        if !spec_matches {
            return Err(CoreError::BadInput(
                "the description and examples could not be carried to the task unchanged (a description that \
                 starts with `not ` or `matches ` reads as a keyword)"
                    .into(),
            ));
        }
        let document = Document::new(&text, lang.name(), Some(lang), 0);
        let tree = document.tree.clone().ok_or_else(|| CoreError::Internal("the spec did not parse".into()))?;
        let snapshot = TaskDocument { text, lang, tree, path: None, version: 0, revision: 0, open_files: Vec::new() };
        let target = TaskTarget { range: 2..2, message: None };
        let outcome = self.run_task(TaskKind::Regex, snapshot, target, VerifySettings::off(), deadline, cancel).await?;
        let flavor = flavor(dialect);
        let pattern = outcome.changes.first().and_then(|change| pattern_of(lang, change.insert.trim()));
        if outcome.verified() && pattern.is_none() {
            return Err(CoreError::Internal("the verified statement's pattern could not be read back".into()));
        }
        let examples = match &pattern {
            Some(pattern) => example_table(flavor, pattern, must_match, must_not_match),
            None => Vec::new(),
        };
        let summary = if outcome.verified() {
            "Spark: generated regex; it matches every example it must and none it must not".to_owned()
        } else {
            let reason =
                outcome.rejections.last().map(|reason| format!(" (last candidate: {reason})")).unwrap_or_default();
            format!("{}{reason}", TaskKind::Regex.nothing_verified())
        };
        Ok(RegexAnswer {
            verified: outcome.verified(),
            pattern,
            dialect: dialect_name(dialect).to_owned(),
            examples,
            summary,
            rejections: outcome.rejections,
            samples_tried: outcome.samples_tried,
            ms: outcome.ms,
        })
    }

    /// `check`: Spark's verifiers on an edit the agent made itself. No model call.
    pub async fn check(
        &self,
        file: &Path,
        shown: &str,
        text: &str,
        request: &CheckRequest,
        cancel: &CancellationToken,
    ) -> Result<CheckAnswer, CoreError> {
        let (edit, regex, compile) = (&request.edit, request.regex.as_ref(), request.compile);
        let Some(lang) = Lang::from_path(file) else {
            return Err(CoreError::BadInput(format!("{shown}: Spark checks Rust and TypeScript files")));
        };
        if edit.old_text.is_empty() {
            return Err(CoreError::BadInput("old_text is empty: name the text the edit replaces".into()));
        }
        let found: Vec<usize> = text.match_indices(&edit.old_text).map(|(at, _)| at).take(2).collect();
        let start = match found.as_slice() {
            [at] => *at,
            [] => return Err(CoreError::BadInput(format!("old_text does not occur in {shown}"))),
            _ => {
                return Err(CoreError::BadInput(format!(
                    "old_text occurs more than once in {shown}: include more context to make it unique"
                )))
            }
        };
        let replace = start..start + edit.old_text.len();
        let change = FileChange {
            path: None,
            create: false,
            old_text: text.to_owned(),
            replace: replace.clone(),
            insert: edit.new_text.clone(),
        };
        let new_text = change.new_text();
        let diff = change.unified_diff(shown);
        let mut checks = vec![syntax_row(lang, text, &new_text, start..start + edit.new_text.len())];
        checks.push(node_row(lang, text, replace, &edit.new_text));
        let mut examples = Vec::new();
        if let Some(regex) = regex {
            let flavor = flavor(regex.dialect);
            let verdict = edit_check::check_regex(flavor, &regex.pattern, &regex.must_match, &regex.must_not_match);
            examples = example_table(flavor, &regex.pattern, &regex.must_match, &regex.must_not_match);
            let in_edit = edit.new_text.contains(&regex.pattern);
            let detail = match &verdict {
                Ok(()) if in_edit => "compiles and treats every example as asked".to_owned(),
                Ok(()) => "compiles and treats every example as asked (the pattern is not in new_text)".to_owned(),
                Err(rejection) => rejection.to_string(),
            };
            checks.push(CheckRow { check: "regex_examples".into(), passed: verdict.is_ok(), detail });
        }
        if compile {
            let verify = VerifySettings {
                compile: true,
                run_tests: false,
                timeout_ms: self.settings.run_timeout.as_millis() as u64,
                ..VerifySettings::all()
            };
            let gate = Gate::new(verify, TaskKind::Fix, Some(file), text, None);
            let verdict = gate.check(&change, cancel).await;
            if cancel.is_cancelled() {
                return Err(CoreError::Cancelled);
            }
            let row = match verdict {
                Ok(()) => {
                    let ran = gate.summary();
                    if ran.is_empty() {
                        CheckRow {
                            check: "compiles".into(),
                            passed: true,
                            detail: "not checked: no Cargo.toml or package.json above the file, or no toolchain".into(),
                        }
                    } else {
                        CheckRow {
                            check: "compiles".into(),
                            passed: true,
                            detail: ran.trim().trim_start_matches('(').trim_end_matches(')').to_owned(),
                        }
                    }
                }
                Err(refusal) => CheckRow { check: "compiles".into(), passed: false, detail: refusal },
            };
            checks.push(row);
        }
        Ok(CheckAnswer { ok: checks.iter().all(|row| row.passed), checks, diff, examples })
    }

    async fn ready(&self, deadline: Instant) -> Result<(), CoreError> {
        let started = Instant::now();
        match tokio::time::timeout_at(deadline.into(), self.runner.engine().wait_ready()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(CoreError::Model(error.to_string())),
            Err(_) => Err(CoreError::Loading { waited_ms: started.elapsed().as_millis() as u64 }),
        }
    }

    async fn run_task(
        &self,
        kind: TaskKind,
        snapshot: TaskDocument,
        target: TaskTarget,
        verify: VerifySettings,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<tasks::TaskOutcome, CoreError> {
        bounded(deadline, cancel, async {
            let _turn = self.model_queue.lock().await;
            self.ready(deadline).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            let budget = TaskBudget {
                samples: self.settings.samples.max(1),
                time: self.settings.task_budget.min(left),
                verify,
                ..TaskBudget::default()
            };
            // The one task runner: a blocking thread, the strong tier (unloaded once idle) and a time limit from
            // the budget; the call's own deadline and the client's cancellation bound it too.
            let job = self.settings.model.job(kind, snapshot, target, budget);
            match self.runner.run(job, cancel).await {
                Ok(run) => Ok(run.outcome),
                Err(TaskError::Engine(error)) => Err(engine_error(error)),
                Err(error) => Err(CoreError::Internal(error.to_string())),
            }
        })
        .await
    }
}

/// Runs `work` until it ends, the client cancels, or the deadline: then the token is cancelled, so the model
/// stops between two tokens.
async fn bounded<T>(
    deadline: Instant,
    cancel: &CancellationToken,
    work: impl std::future::Future<Output = Result<T, CoreError>>,
) -> Result<T, CoreError> {
    let started = Instant::now();
    let result = tokio::select! {
        result = work => result,
        () = cancel.cancelled() => Err(CoreError::Cancelled),
        () = tokio::time::sleep_until(deadline.into()) => {
            Err(CoreError::Deadline { ms: started.elapsed().as_millis() as u64 })
        }
    };
    if let Err(error) = &result {
        cancel.cancel();
        if matches!(error, CoreError::Cancelled | CoreError::Deadline { .. }) {
            tracing::info!(%error, "mcp: call stopped; its model work is cancelled");
        }
    }
    result
}

fn engine_error(error: EngineError) -> CoreError {
    match error {
        EngineError::Loading => CoreError::Loading { waited_ms: 0 },
        other => CoreError::Model(other.to_string()),
    }
}

/// The byte offset of a 1-based position; a position past the end of the file is an error, not clamped (an
/// agent that asks about line 900 of a 40-line file has the wrong file).
fn byte_at(document: &Document, at: LineColumn) -> Result<usize, CoreError> {
    if at.line == 0 || at.column == 0 {
        return Err(CoreError::BadInput("line and column are 1-based".into()));
    }
    let lines = document.rope.len_lines() as u32;
    if at.line > lines {
        return Err(CoreError::BadInput(format!("line {} is past the end of the file ({lines} lines)", at.line)));
    }
    let resolved = position::to_byte(
        &document.rope,
        LspPosition { line: at.line - 1, character: at.column - 1 },
        PositionEncoding::Utf32,
    );
    if resolved.clamped {
        tracing::info!(line = at.line, column = at.column, "mcp: column past the end of its line; clamped");
    }
    Ok(resolved.byte)
}

fn flavor(dialect: Dialect) -> RegexFlavor {
    match dialect {
        Dialect::Rust => RegexFlavor::Rust,
        Dialect::EcmaScript => RegexFlavor::EcmaScript,
    }
}

fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Rust => "rust",
        Dialect::EcmaScript => "ecmascript",
    }
}

/// The pattern of a statement `tasks::regex_statement` wrote, checked by writing it again.
fn pattern_of(lang: Lang, statement: &str) -> Option<String> {
    let candidate = match lang {
        Lang::Rust => {
            let literal = statement.strip_prefix("const PATTERN: &str = r")?.strip_suffix(';')?;
            let hashes = literal.len() - literal.trim_start_matches('#').len();
            literal.get(hashes + 1..literal.len() - hashes - 1)?.to_owned()
        }
        Lang::TypeScript | Lang::Tsx => statement.strip_prefix("const re = /")?.strip_suffix("/;")?.replace("\\/", "/"),
    };
    // Unescaping `\/` is ambiguous; the statement written back from the candidate decides.
    [candidate.clone(), statement.to_owned()]
        .into_iter()
        .find(|pattern| tasks::regex_statement(lang, pattern, false) == statement)
        .or_else(|| {
            let raw = statement.strip_prefix("const re = /")?.strip_suffix("/;")?.to_owned();
            (tasks::regex_statement(lang, &raw, false) == statement).then_some(raw)
        })
}

fn example_table(flavor: RegexFlavor, pattern: &str, positives: &[String], negatives: &[String]) -> Vec<ExampleRow> {
    let one = std::slice::from_ref;
    let positive_rows = positives.iter().map(|example| {
        let verdict = edit_check::check_regex(flavor, pattern, one(example), &[]);
        let matches = verdict.is_ok();
        ExampleRow { example: example.clone(), should_match: true, matches, ok: matches }
    });
    let negative_rows = negatives.iter().map(|example| {
        let verdict = edit_check::check_regex(flavor, pattern, &[], one(example));
        let matches = matches!(verdict, Err(Rejection::RegexMatchesCounterexample(_)));
        ExampleRow { example: example.clone(), should_match: false, matches, ok: verdict.is_ok() }
    });
    positive_rows.chain(negative_rows).collect()
}

/// The edit adds no syntax error: none inside the edited text, and no more in the file than before (the rule
/// of `verify::check_parses_no_worse`, which the tasks apply to the compiler's own edits).
fn syntax_row(lang: Lang, old: &str, new: &str, edited: Range<usize>) -> CheckRow {
    let unparsed =
        || CheckRow { check: "parses".into(), passed: false, detail: "the file could not be parsed in time".into() };
    let Some(old_tree) = parse::text(lang, old) else { return unparsed() };
    match verify::check_parses_no_worse(lang, &old_tree, new, edited) {
        Ok(()) => CheckRow {
            check: "parses".into(),
            passed: true,
            detail: "no syntax error in the edit, and none more in the file".into(),
        },
        Err(Rejection::SyntaxErrors { total_after: usize::MAX, .. }) => unparsed(),
        Err(rejection) => CheckRow { check: "parses".into(), passed: false, detail: rejection.to_string() },
    }
}

/// The edit stays inside the statement or item it rewrites (the fix verifier's node rule): it neither repeats
/// the code after it nor leaves brackets open, and keeps the names the rest of the file uses.
fn node_row(lang: Lang, old: &str, replace: Range<usize>, new_text: &str) -> CheckRow {
    let Some(tree) = parse::text(lang, old) else {
        return CheckRow {
            check: "stays_in_node".into(),
            passed: false,
            detail: "the file could not be parsed".into(),
        };
    };
    let document =
        TaskDocument { text: old.to_owned(), lang, tree, path: None, version: 0, revision: 0, open_files: Vec::new() };
    let node = tasks::fix_node(&document, &TaskTarget { range: replace.clone(), message: None });
    let node = node.start.min(replace.start)..node.end.max(replace.end);
    let rewritten = format!("{}{}{}", &old[node.start..replace.start], new_text, &old[replace.end..node.end]);
    let verdict = edit_check::check_rewrite(lang, old, node, &rewritten, true);
    match verdict {
        Ok(_) => CheckRow { check: "stays_in_node".into(), passed: true, detail: "stays inside its node".into() },
        // An agent's edit may rightly rewrite more than a fix would: those rules are reported, not enforced.
        Err(rejection @ (Rejection::TooDifferent { .. } | Rejection::DeletesTooMuch | Rejection::Unchanged)) => {
            CheckRow {
                check: "stays_in_node".into(),
                passed: true,
                detail: format!("stays inside its node (note: {rejection})"),
            }
        }
        Err(Rejection::SyntaxErrors { .. }) => {
            CheckRow { check: "stays_in_node".into(), passed: true, detail: "see `parses`".into() }
        }
        Err(rejection) => CheckRow { check: "stays_in_node".into(), passed: false, detail: rejection.to_string() },
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
