//! The tasks behind code actions and their CLI: Spark fix, test generation, regex generation. Each builds a
//! prompt for the model's kind (few-shot completion prompts for base models), samples within a time budget
//! (greedy first, then with temperature and seeds), and keeps the first candidate that passes `edit_check`.
//! The result is a set of file changes, or a plain "nothing verified" with the reasons.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spark_engine::{CompletionRequest, EngineError, Sampling, StopMode};
use spark_grammars::{smallest_capture, syntax_errors, tree_sitter::Tree, Lang};
use tokio_util::sync::CancellationToken;

use crate::edit_check::{self, check_regex, check_rewrite, check_tests, RegexFlavor, Rejection};
use crate::exec_check::{Gate, VerifySettings};
use crate::route::{Generator, PromptStyle, TaskPrompt};
use crate::tiers::Tier;

/// Requests of all tasks share one lane: a new task supersedes a queued one, ghost text keeps its own lanes.
const TASK_LANE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Fix,
    Tests,
    Regex,
}

impl TaskKind {
    pub fn command(self) -> &'static str {
        match self {
            TaskKind::Fix => "spark.fix",
            TaskKind::Tests => "spark.generateTests",
            TaskKind::Regex => "spark.generateRegex",
        }
    }

    pub fn from_command(command: &str) -> Option<TaskKind> {
        [TaskKind::Fix, TaskKind::Tests, TaskKind::Regex].into_iter().find(|kind| kind.command() == command)
    }

    /// The message when no sample passed verification.
    pub fn nothing_verified(self) -> &'static str {
        match self {
            TaskKind::Fix => "Spark found no verified fix",
            TaskKind::Tests => "Spark found no verified tests",
            TaskKind::Regex => "Spark found no verified regex",
        }
    }
}

/// A document as a task sees it: a snapshot, so the model can run while the user types on.
pub struct TaskDocument {
    pub text: String,
    pub lang: Lang,
    pub tree: Tree,
    /// The file on disk, for tasks that touch a sibling file (TypeScript tests).
    pub path: Option<PathBuf>,
    pub version: i32,
    /// The document store's revision of this text (see `Document::revision`).
    pub revision: u64,
    /// Other files the task may read or edit (the sibling `<name>.test.ts`) that are open in the editor: their
    /// unsaved text is what an edit applies to, not the file on disk.
    pub open_files: Vec<OpenFile>,
}

/// A file open in the editor, as a task sees it.
#[derive(Debug, Clone)]
pub struct OpenFile {
    pub path: PathBuf,
    pub text: String,
    pub version: i32,
}

impl TaskDocument {
    /// The open file at `path`, if the editor has it open.
    pub fn open_file(&self, path: &Path) -> Option<&OpenFile> {
        self.open_files.iter().find(|file| file.path == path)
    }
}

/// Where the user asked, and what for.
#[derive(Debug, Clone)]
pub struct TaskTarget {
    /// Byte range of the selection or diagnostic (empty at the cursor).
    pub range: Range<usize>,
    /// A diagnostic's message, when the fix targets one.
    pub message: Option<String>,
}

/// How long and how many times to sample, and which execution checks a candidate must also pass.
#[derive(Debug, Clone, Copy)]
pub struct TaskBudget {
    pub samples: usize,
    pub time: Duration,
    pub verify: VerifySettings,
}

impl Default for TaskBudget {
    fn default() -> Self {
        TaskBudget { samples: 4, time: Duration::from_secs(12), verify: VerifySettings::default() }
    }
}

/// One file's change: `replace` (bytes of `old_text`) becomes `insert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// `None`: the task's own document.
    pub path: Option<PathBuf>,
    pub create: bool,
    pub old_text: String,
    pub replace: Range<usize>,
    pub insert: String,
}

impl AsRef<FileChange> for FileChange {
    fn as_ref(&self) -> &FileChange {
        self
    }
}

impl FileChange {
    pub fn new_text(&self) -> String {
        format!("{}{}{}", &self.old_text[..self.replace.start], self.insert, &self.old_text[self.replace.end..])
    }
}

#[derive(Debug, Clone)]
pub struct TaskOutcome {
    /// Empty when nothing verified.
    pub changes: Vec<FileChange>,
    pub title: String,
    pub samples_tried: usize,
    pub rejections: Vec<String>,
    pub ms: u64,
    /// The model tier that produced the edit (or tried last).
    pub tier: Tier,
}

impl TaskOutcome {
    pub fn verified(&self) -> bool {
        !self.changes.is_empty()
    }
}

/// Runs a task to completion (or to its budget).
pub async fn run(
    generator: &Generator<'_>,
    kind: TaskKind,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let started = Instant::now();
    // Execution checks (off unless the user turned them on) gate candidates after `edit_check`.
    let exec = Gate::new(budget.verify, kind, document.path.as_deref(), &document.text, target.message.as_deref());
    let mut outcome = match kind {
        TaskKind::Fix => fix(generator, document, target, budget, &exec, cancel).await?,
        TaskKind::Tests => tests(generator, document, target, budget, &exec, cancel).await?,
        TaskKind::Regex => regex(generator, document, target, budget, &exec, cancel).await?,
    };
    if outcome.verified() {
        outcome.title.push_str(&exec.summary());
    }
    outcome.ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(outcome)
}

/// The outcome of sampling: the change found, or nothing verified, with what was tried.
fn sampled(title: &str, found: Option<FileChange>, tried: usize, rejections: Vec<String>) -> TaskOutcome {
    match found {
        Some(change) => TaskOutcome { changes: vec![change], samples_tried: tried, rejections, ..nothing(title) },
        None => TaskOutcome { samples_tried: tried, rejections, ..nothing(title) },
    }
}

fn nothing(title: &str) -> TaskOutcome {
    TaskOutcome {
        changes: Vec::new(),
        title: title.to_owned(),
        samples_tried: 0,
        rejections: Vec::new(),
        ms: 0,
        tier: Tier::Fast,
    }
}

/// Samples the model on `task` until `accept` takes a candidate that also passes the execution checks, the
/// samples run out or the time does. `accept` gets the answer as code (fences and prose of a chat answer taken
/// off) and how it was prompted.
async fn sample_until<T: AsRef<FileChange>>(
    generator: &Generator<'_>,
    task: &TaskPrompt,
    max_tokens: usize,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
    mut accept: impl FnMut(&str, PromptStyle) -> Result<T, Rejection>,
) -> Result<(Option<T>, usize, Vec<String>), EngineError> {
    let started = Instant::now();
    let mut rejections = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for sample_idx in 0..budget.samples.max(1) {
        let left = budget.time.saturating_sub(started.elapsed());
        if left.is_zero() || cancel.is_cancelled() {
            return Ok((None, sample_idx, rejections));
        }
        let sampling = if sample_idx == 0 {
            Sampling::default()
        } else {
            Sampling { temperature: 0.3 + 0.2 * sample_idx as f32, seed: 17 + sample_idx as u32 }
        };
        let request = CompletionRequest {
            lane: TASK_LANE,
            header: String::new(),
            prefix: String::new(),
            suffix: String::new(),
            mode: StopMode::Free,
            indent: String::new(),
            max_tokens,
            max_lines: usize::MAX,
            deadline: Instant::now() + left,
            cancel: cancel.clone(),
            raw_prompt: true,
            stop_strings: Vec::new(),
            sampling,
            background: false,
        };
        let generated = generator.generate_task(task, request).await?;
        let candidate = match generated.style {
            PromptStyle::FewShot => generated.completion.text.clone(),
            PromptStyle::ChatPrefilled => strip_code_fences(&generated.completion.text),
            PromptStyle::Chat => first_code_block(&generated.completion.text),
        };
        if seen.contains(&candidate) {
            continue;
        }
        match accept(&candidate, generated.style) {
            Ok(found) => match exec.check(found.as_ref(), cancel).await {
                Ok(()) => return Ok((Some(found), sample_idx + 1, rejections)),
                Err(refusal) => {
                    tracing::debug!(sample = sample_idx, %refusal, "candidate refused by an execution check");
                    rejections.push(refusal);
                }
            },
            Err(rejection) => {
                tracing::debug!(sample = sample_idx, %rejection, "candidate refused");
                tracing::trace!(sample = sample_idx, ?candidate, raw = ?generated.completion.text, "refused candidate");
                rejections.push(rejection.to_string());
            }
        }
        seen.push(candidate);
    }
    Ok((None, budget.samples, rejections))
}

/// The code of a chat answer: its first fenced block, or the whole answer when it has none.
pub fn first_code_block(text: &str) -> String {
    let Some(open) = text.find("```") else { return text.trim_matches('\n').to_owned() };
    let body = &text[open + 3..];
    let body = body.split_once('\n').map(|(_, body)| body).unwrap_or("");
    let end = body.find("```").unwrap_or(body.len());
    body[..end].trim_end().trim_start_matches('\n').to_owned()
}

/// The code-fence language tag of a language.
fn fence_tag(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "rust",
        Lang::TypeScript => "typescript",
        Lang::Tsx => "tsx",
    }
}

/// Whole lines around `node`: up to `max_bytes` before it and a third of that after, for an instruction prompt.
fn surrounding_lines(text: &str, node: Range<usize>, max_bytes: usize) -> &str {
    let mut start = node.start.saturating_sub(max_bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    if start > 0 {
        start = text[start..node.start].find('\n').map_or(node.start, |at| start + at + 1);
    }
    let mut end = (node.end + max_bytes / 3).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len() {
        end = text[node.end..end].rfind('\n').map_or(node.end, |at| node.end + at);
    }
    &text[start..end]
}

/// Instruction-tuned models like to wrap code in Markdown fences; the code is what is checked.
pub fn strip_code_fences(text: &str) -> String {
    let trimmed = text.trim_start_matches('\n');
    let Some(rest) = trimmed.strip_prefix("```") else { return text.to_owned() };
    let body = rest.split_once('\n').map(|(_, body)| body).unwrap_or("");
    let body = body.trim_end();
    body.strip_suffix("```").unwrap_or(body).trim_end_matches('\n').to_owned()
}

fn language_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::TypeScript | Lang::Tsx => "TypeScript",
    }
}

/// The node a fix rewrites: the smallest statement or item around the target's errors.
pub fn fix_node(document: &TaskDocument, target: &TaskTarget) -> Range<usize> {
    let root = document.tree.root_node();
    let mut start = target.range.start;
    let mut end = target.range.end;
    // The syntax errors that touch the target widen it: the fix must cover them whole.
    for error in syntax_errors(root, 256) {
        if error.start_byte() <= end && error.end_byte() >= start {
            start = start.min(error.start_byte());
            end = end.max(error.end_byte());
        }
    }
    let queries = document.lang.queries();
    let source = document.text.as_bytes();
    let node = smallest_capture(&queries.items, "item", root, source, start, end)
        .map(|node| node.byte_range())
        .filter(|range| range.len() <= 4000);
    match node {
        Some(range) => range,
        None => line_span(&document.text, start, end),
    }
}

/// The whole lines (without the final line break) that `start..end` touches.
fn line_span(text: &str, start: usize, end: usize) -> Range<usize> {
    let line_start = text[..start].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    let line_end = text[end..].find('\n').map(|idx| end + idx).unwrap_or(text.len());
    let first_non_space = text[line_start..line_end].len() - text[line_start..line_end].trim_start().len();
    line_start + first_non_space..line_end
}

async fn fix(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let node = fix_node(document, target);
    let message = target.message.clone().unwrap_or_else(|| "syntax error".to_owned());
    let title = format!("Spark fix: {}", first_line(&message));
    // The grammar knows what is missing (a `;`, a `)`): that repair is the first candidate, and it is checked
    // like any other.
    let mut refused_repair = None;
    if let Some(repaired) = missing_token_repair(document, node.clone()) {
        if check_rewrite(document.lang, &document.text, node.clone(), &repaired, false).is_ok() {
            let change = FileChange {
                path: None,
                create: false,
                old_text: document.text.clone(),
                replace: node.clone(),
                insert: repaired,
            };
            match exec.check(&change, cancel).await {
                Ok(()) => {
                    let outcome = TaskOutcome {
                        changes: vec![change],
                        title,
                        samples_tried: 0,
                        rejections: Vec::new(),
                        ms: 0,
                        tier: Tier::Fast,
                    };
                    return Ok(outcome);
                }
                Err(refusal) => refused_repair = Some(refusal),
            }
        }
    }
    // An instruction-tuned model rewrites the whole function around the error (a misspelled name or a wrong
    // argument is fixed with the signature and the locals in view, and the model is not left to guess how much
    // of the code a bare expression stands for); the edit is then narrowed to what it changed.
    let node = if generator.local_chat().is_some() { enclosing_function(document, node) } else { node };
    let broken = &document.text[node.clone()];
    let task = fix_prompt(document, node.clone(), target.range.start, &message);
    let max_tokens = broken.len() / 2 + 32;
    let (found, tried, mut rejections) =
        sample_until(generator, &task, max_tokens, budget, exec, cancel, |candidate, style| {
            let candidate = candidate.trim_end().trim_start_matches('\n');
            // A chat answer may repeat code around the snippet (the reference above it, the next function).
            let unrepeated;
            let candidate = if style == PromptStyle::FewShot {
                candidate
            } else {
                unrepeated =
                    without_repeated_context(candidate, &document.text[..node.start], &document.text[node.end..]);
                unrepeated.as_str()
            };
            // The node starts after its line's indentation; a chat answer repeats it.
            let candidate = if broken.starts_with(char::is_whitespace) { candidate } else { candidate.trim_start() };
            check_rewrite(document.lang, &document.text, node.clone(), candidate, false)?;
            let (replace, insert) = narrow_rewrite(&document.text, node.clone(), candidate);
            Ok(FileChange { path: None, create: false, old_text: document.text.clone(), replace, insert })
        })
        .await?;
    rejections.splice(0..0, refused_repair);
    let Some(change) = found else {
        return Ok(TaskOutcome { samples_tried: tried, rejections, ..nothing(&title) });
    };
    Ok(TaskOutcome { changes: vec![change], title, samples_tried: tried, rejections, ms: 0, tier: Tier::Fast })
}

/// `answer` without the lines at its start that repeat the end of `before` and the lines at its end that repeat
/// the start of `after` (compared without surrounding whitespace): what is left rewrites the snippet between.
pub fn without_repeated_context(answer: &str, before: &str, after: &str) -> String {
    let lines: Vec<&str> = answer.lines().collect();
    let before_lines: Vec<&str> = match before.rfind('\n') {
        Some(at) => before[..at].lines().collect(),
        None => Vec::new(),
    };
    let after_lines: Vec<&str> = match after.find('\n') {
        Some(at) => after[at + 1..].lines().collect(),
        None => Vec::new(),
    };
    let same = |a: &[&str], b: &[&str]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.trim() == y.trim());
    let max_head = lines.len().min(before_lines.len());
    let head = (1..=max_head)
        .rev()
        .find(|&k| {
            same(&lines[..k], &before_lines[before_lines.len() - k..])
                && lines[..k].iter().any(|l| !l.trim().is_empty())
        })
        .unwrap_or(0);
    let rest = &lines[head..];
    let max_tail = rest.len().saturating_sub(1).min(after_lines.len());
    let tail = (1..=max_tail)
        .rev()
        .find(|&m| {
            same(&rest[rest.len() - m..], &after_lines[..m])
                && rest[rest.len() - m..].iter().any(|l| !l.trim().is_empty())
        })
        .unwrap_or(0);
    rest[..rest.len() - tail].join("\n").trim_matches('\n').to_owned()
}

/// The function (or method) around `node`, when it is not much larger than a screen; `node` otherwise.
fn enclosing_function(document: &TaskDocument, node: Range<usize>) -> Range<usize> {
    let root = document.tree.root_node();
    let queries = document.lang.queries();
    smallest_capture(&queries.functions, "function", root, document.text.as_bytes(), node.start, node.end)
        .map(|function| function.byte_range())
        .filter(|function| function.len() <= 3000 && function.start <= node.start && node.end <= function.end)
        .unwrap_or(node)
}

/// `node` rewritten to `candidate`, as the smallest replacement: the common start and end of the old and new
/// text are left alone (on character boundaries), so the edit touches only what changed.
pub fn narrow_rewrite(text: &str, node: Range<usize>, candidate: &str) -> (Range<usize>, String) {
    let old = &text[node.clone()];
    let mut head = old.bytes().zip(candidate.bytes()).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(head) || !candidate.is_char_boundary(head) {
        head -= 1;
    }
    let max_tail = (old.len() - head).min(candidate.len() - head);
    let mut tail = old.bytes().rev().zip(candidate.bytes().rev()).take(max_tail).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(old.len() - tail) || !candidate.is_char_boundary(candidate.len() - tail) {
        tail -= 1;
    }
    let replace = node.start + head..node.end - tail;
    (replace, candidate[head..candidate.len() - tail].to_owned())
}

/// Spark fix's prompt: the snippet to rewrite, the diagnostic, and for instruction-tuned models the lines
/// around it (names in scope, the signature), so that a misspelled name or a wrong argument can be put right.
fn fix_prompt(document: &TaskDocument, node: Range<usize>, error_at: usize, message: &str) -> TaskPrompt {
    let language = language_name(document.lang);
    let tag = fence_tag(document.lang);
    let text = &document.text;
    let broken = &text[node.clone()];
    // The code above the snippet (imports, types, signatures), not repeated in the snippet itself.
    let before = surrounding_lines(text, node.start..node.start, 1500).trim_end();
    let reference = if before.trim().is_empty() {
        String::new()
    } else {
        format!("Code above it in the file, for reference:\n```{tag}\n{before}\n```\n\n")
    };
    let error_at = error_at.clamp(node.start, node.end);
    let line_start = text[..error_at].rfind('\n').map_or(0, |at| at + 1).max(node.start);
    let line_end = text[error_at..].find('\n').map_or(text.len(), |at| error_at + at).min(node.end.max(error_at));
    let error_line = text[line_start..line_end].trim();
    let line_number = text[node.start..line_start].matches('\n').count() + 1;
    let location =
        if error_line.is_empty() { String::new() } else { format!(" at line {line_number} of it (`{error_line}`)") };
    TaskPrompt {
        system: format!(
            "You fix errors in {language} code. Change as little as possible, keep every name the rest of the code \
             uses, and answer with the whole corrected code in one code block, nothing else."
        ),
        instruction: format!(
            "{reference}This code does not compile:\n```{tag}\n{broken}\n```\n\
             The compiler reports{location}: {message}\n\nAnswer with the corrected code, all of it."
        ),
        few_shot: format!(
            "// Each broken {language} snippet is followed by the same code, fixed.\n\n\
             // Error: expected `;`\n// Broken:\nlet total = price * count\n// Fixed:\nlet total = price * count;\n\n\
             // Error: mismatched closing delimiter\n// Broken:\nif ready {{ start(] }}\n// Fixed:\nif ready {{ start() }}\n\n\
             // Error: {message}\n// Broken:\n{broken}\n// Fixed:\n"
        ),
        few_shot_stops: vec!["\n\n".to_owned(), "\n// ".to_owned()],
        chat_prefill: format!("```{tag}\n"),
        chat_stops: vec!["```".to_owned()],
    }
}

/// The node's text with every MISSING punctuation token the parser reported inserted where it belongs.
fn missing_token_repair(document: &TaskDocument, node: Range<usize>) -> Option<String> {
    let mut inserts: Vec<(usize, &str)> = syntax_errors(document.tree.root_node(), 256)
        .into_iter()
        .filter(|error| error.is_missing() && node.start <= error.start_byte() && error.start_byte() <= node.end)
        .filter(|error| error.kind().chars().all(|ch| ch.is_ascii_punctuation()))
        .map(|error| (error.start_byte(), error.kind()))
        .collect();
    if inserts.is_empty() {
        return None;
    }
    inserts.sort();
    let mut repaired = String::new();
    let mut copied = node.start;
    for (at, token) in inserts {
        repaired.push_str(&document.text[copied..at]);
        repaired.push_str(token);
        copied = at;
    }
    repaired.push_str(&document.text[copied..node.end]);
    Some(repaired)
}

/// The function under the cursor: its byte range and name.
pub fn function_at(document: &TaskDocument, at: usize) -> Option<(Range<usize>, String)> {
    let root = document.tree.root_node();
    let queries = document.lang.queries();
    let source = document.text.as_bytes();
    let function = smallest_capture(&queries.functions, "function", root, source, at, at)?;
    let mut cursor = spark_grammars::tree_sitter::QueryCursor::new();
    let name_idx = queries.functions.capture_index_for_name("name")?;
    use spark_grammars::tree_sitter::StreamingIterator;
    let mut matches = cursor.matches(&queries.functions, function, source);
    while let Some(found) = matches.next() {
        for capture in found.captures {
            if capture.index == name_idx && function.byte_range().contains(&capture.node.start_byte()) {
                let name = capture.node.utf8_text(source).ok()?.to_owned();
                return Some((function.byte_range(), name));
            }
        }
    }
    None
}

async fn tests(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let Some((function, name)) = function_at(document, target.range.start) else {
        return Ok(nothing("Spark: no function under the cursor"));
    };
    let title = format!("Spark: generate tests for `{name}`");
    let arity = function_arity(document, function.clone());
    let source = &document.text[function];
    match document.lang {
        Lang::Rust => {
            rust_tests(generator, document, FunctionTarget { source, name: &name, arity }, &title, budget, exec, cancel)
                .await
        }
        Lang::TypeScript | Lang::Tsx => {
            ts_tests(generator, document, FunctionTarget { source, name: &name, arity }, &title, budget, exec, cancel)
                .await
        }
    }
}

async fn rust_tests(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: FunctionTarget<'_>,
    title: &str,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let FunctionTarget { source: function_source, name, arity } = target;
    let header = format!("    #[test]\n    fn {name}_works() {{\n");
    let task = TaskPrompt {
        system: TESTS_SYSTEM.to_owned(),
        instruction: format!(
            "```rust\n{function_source}\n```\n\nWrite one test function for `{name}`, named `{name}_works`, marked \
             `#[test]`. It goes inside `mod tests` with `use super::*;`, so `{name}` is in scope. Call `{name}` with a \
             few concrete inputs and check each exact result with `assert_eq!` or `assert!`; work every expected \
             value out from the code above, step by step, before you write it."
        ),
        few_shot: format!(
            "pub fn add(a: i32, b: i32) -> i32 {{\n    a + b\n}}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    \
             #[test]\n    fn add_works() {{\n        assert_eq!(add(2, 3), 5);\n        assert_eq!(add(-1, 1), 0);\n    }}\n}}\n\n\
             {function_source}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{header}"
        ),
        few_shot_stops: vec!["\n    }\n".to_owned(), "\n}\n".to_owned()],
        chat_prefill: format!("```rust\n#[test]\nfn {name}_works() {{\n"),
        chat_stops: vec!["```".to_owned()],
    };
    let existing = existing_test_module(document);
    let (found, tried, rejections) = sample_until(generator, &task, 240, budget, exec, cancel, |body, style| {
        let test_fn = match style {
            PromptStyle::FewShot => format!("{header}{}\n    }}\n", body.trim_end()),
            // Prefilled up to the body: the answer is the body and the closing brace, at the top level.
            PromptStyle::ChatPrefilled => {
                indent_block(&format!("#[test]\nfn {name}_works() {{\n{}\n", body.trim_end()), "    ")
            }
            PromptStyle::Chat => indent_block(&format!("{}\n", body.trim()), "    "),
        };
        let change = rust_test_change(document, existing, &test_fn);
        check_tests(Lang::Rust, &document.text, &change.new_text(), &test_fn, name, arity)?;
        Ok(change)
    })
    .await?;
    Ok(sampled(title, found, tried, rejections))
}

const TESTS_SYSTEM: &str = "You write unit tests. Every expected value in an assertion is what the code really \
    returns for that input: trace the code by hand before you write it. Answer with code only, in one code block.";

/// `text` with `indent` before every non-empty line.
fn indent_block(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16 * indent.len());
    for line in text.split_inclusive('\n') {
        if !line.trim().is_empty() {
            out.push_str(indent);
        }
        out.push_str(line);
    }
    out
}

/// The function tests are generated for.
#[derive(Clone, Copy)]
struct FunctionTarget<'a> {
    source: &'a str,
    name: &'a str,
    arity: Option<(usize, usize)>,
}

/// How many arguments the function takes (required ..= all), from its parameter list; `self` does not count.
fn function_arity(document: &TaskDocument, function: Range<usize>) -> Option<(usize, usize)> {
    let root = document.tree.root_node();
    let node = root.descendant_for_byte_range(function.start, function.end)?;
    let mut stack = vec![node];
    while let Some(current) = stack.pop() {
        if let Some(parameters) = current.child_by_field_name("parameters") {
            let mut cursor = parameters.walk();
            let mut required = 0;
            let mut all = 0;
            for parameter in parameters.named_children(&mut cursor) {
                let is_rest = parameter.kind() == "rest_pattern"
                    || parameter.child_by_field_name("pattern").is_some_and(|pattern| pattern.kind() == "rest_pattern");
                if is_rest {
                    return Some((required, usize::MAX));
                }
                match parameter.kind() {
                    "self_parameter" | "comment" => {}
                    "optional_parameter" => all += 1,
                    "required_parameter" if parameter.child_by_field_name("value").is_some() => all += 1,
                    _ => {
                        required += 1;
                        all += 1;
                    }
                }
            }
            return Some((required, all));
        }
        let mut cursor = current.walk();
        let children: Vec<_> = current.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    None
}

/// The byte offset just before the closing brace of the file's `#[cfg(test)] mod tests`, if there is one.
fn existing_test_module(document: &TaskDocument) -> Option<usize> {
    let queries = document.lang.queries();
    let root = document.tree.root_node();
    let mut cursor = spark_grammars::tree_sitter::QueryCursor::new();
    let index = queries.tests.capture_index_for_name("test_module")?;
    use spark_grammars::tree_sitter::StreamingIterator;
    let mut matches = cursor.matches(&queries.tests, root, document.text.as_bytes());
    while let Some(found) = matches.next() {
        for capture in found.captures {
            if capture.index == index {
                let end = capture.node.end_byte();
                if document.text[..end].ends_with('}') {
                    return Some(end - 1);
                }
            }
        }
    }
    None
}

fn rust_test_change(document: &TaskDocument, module_end: Option<usize>, test_fn: &str) -> FileChange {
    match module_end {
        Some(at) => FileChange {
            path: None,
            create: false,
            old_text: document.text.clone(),
            replace: at..at,
            insert: format!("\n{test_fn}"),
        },
        None => {
            let end = document.text.len();
            let separator = if document.text.ends_with('\n') { "\n" } else { "\n\n" };
            FileChange {
                path: None,
                create: false,
                old_text: document.text.clone(),
                replace: end..end,
                insert: format!("{separator}#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{test_fn}}}\n"),
            }
        }
    }
}

/// The test framework a TypeScript project uses, from the nearest package.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsFramework {
    Vitest,
    Jest,
    NodeTest,
}

pub fn ts_framework(file: Option<&Path>) -> TsFramework {
    let mut dir = file.and_then(Path::parent);
    while let Some(current) = dir {
        if let Ok(text) = std::fs::read_to_string(current.join("package.json")) {
            if let Ok(package) = serde_json::from_str::<serde_json::Value>(&text) {
                let has = |name: &str| {
                    ["dependencies", "devDependencies"].iter().any(|section| package[section].get(name).is_some())
                };
                if has("vitest") {
                    return TsFramework::Vitest;
                }
                if has("jest") || has("ts-jest") || has("@jest/globals") {
                    return TsFramework::Jest;
                }
            }
            return TsFramework::NodeTest;
        }
        dir = current.parent();
    }
    TsFramework::NodeTest
}

/// The files besides the document itself that a task on `path` reads (and may edit).
pub fn files_read(kind: TaskKind, lang: Lang, path: &Path) -> Vec<PathBuf> {
    match (kind, lang) {
        (TaskKind::Tests, Lang::TypeScript | Lang::Tsx) => vec![ts_test_path(path)],
        _ => Vec::new(),
    }
}

/// `src/math.ts` → `src/math.test.ts`.
pub fn ts_test_path(file: &Path) -> PathBuf {
    let stem = file.file_stem().and_then(|stem| stem.to_str()).unwrap_or("module");
    let extension = file.extension().and_then(|ext| ext.to_str()).unwrap_or("ts");
    file.with_file_name(format!("{stem}.test.{extension}"))
}

async fn ts_tests(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: FunctionTarget<'_>,
    title: &str,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let FunctionTarget { source: function_source, name, arity } = target;
    let framework = ts_framework(document.path.as_deref());
    let (imports, example_assert) = match framework {
        TsFramework::Vitest => ("import { test, expect } from \"vitest\";\n", "expect(add(2, 3)).toBe(5);"),
        TsFramework::Jest => ("", "expect(add(2, 3)).toBe(5);"),
        TsFramework::NodeTest => (
            "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\n",
            "assert.equal(add(2, 3), 5);",
        ),
    };
    let header = format!("test(\"{name} works\", () => {{\n");
    let assert_style = match framework {
        TsFramework::Vitest | TsFramework::Jest => "`expect(...).toBe(...)` / `toEqual(...)`",
        TsFramework::NodeTest => "`assert.equal` / `assert.deepEqual` from `node:assert/strict`",
    };
    let task = TaskPrompt {
        system: TESTS_SYSTEM.to_owned(),
        instruction: format!(
            "```typescript\n{function_source}\n```\n\nWrite one test for `{name}`: a call \
             `test(\"{name} works\", () => {{ ... }});`. The test file already starts with:\n```typescript\n\
             {imports}import {{ {name} }} from \"./module\";\n```\nCall `{name}` with a few concrete inputs and \
             check each exact result with {assert_style}; work every expected value out from the code above, step \
             by step, before you write it."
        ),
        few_shot: format!(
            "export function add(a: number, b: number): number {{\n  return a + b;\n}}\n\n// add.test.ts\n{imports}\
             test(\"add works\", () => {{\n  {example_assert}\n}});\n\n{function_source}\n\n// {name}.test.ts\n{imports}{header}"
        ),
        few_shot_stops: vec!["\n});".to_owned(), "\n}\n".to_owned()],
        chat_prefill: format!("```typescript\n{header}"),
        chat_stops: vec!["```".to_owned()],
    };
    let path = document.path.clone().unwrap_or_else(|| PathBuf::from("module.ts"));
    let test_path = ts_test_path(&path);
    let module = format!("./{}", path.file_stem().and_then(|stem| stem.to_str()).unwrap_or("module"));
    // The editor's buffer when the test file is open there (unsaved text counts), else the file on disk.
    let existing = match document.open_file(&test_path) {
        Some(open) => Some(open.text.clone()),
        None => std::fs::read_to_string(&test_path).ok(),
    };
    let (found, tried, rejections) = sample_until(generator, &task, 240, budget, exec, cancel, |body, style| {
        let test_code = match style {
            PromptStyle::FewShot => format!("{header}{}\n}});\n", body.trim_end()),
            PromptStyle::ChatPrefilled => format!("{header}{}\n", body.trim_end()),
            PromptStyle::Chat => format!("{}\n", without_imports(body).trim()),
        };
        let change = match &existing {
            Some(old_text) => {
                let end = old_text.len();
                let import = format!("import {{ {name} }} from \"{module}\";\n");
                let needs_import = !old_text.contains(&import);
                FileChange {
                    path: Some(test_path.clone()),
                    create: false,
                    old_text: old_text.clone(),
                    replace: end..end,
                    insert: format!("\n{}{test_code}", if needs_import { import } else { String::new() }),
                }
            }
            None => FileChange {
                path: Some(test_path.clone()),
                create: true,
                old_text: String::new(),
                replace: 0..0,
                insert: format!("{imports}import {{ {name} }} from \"{module}\";\n\n{test_code}"),
            },
        };
        check_tests(document.lang, &change.old_text, &change.new_text(), &test_code, name, arity)?;
        Ok(change)
    })
    .await?;
    Ok(sampled(title, found, tried, rejections))
}

/// A chat answer's test code without the import lines it may repeat (the test file has its own).
fn without_imports(code: &str) -> String {
    code.lines().filter(|line| !line.trim_start().starts_with("import ")).collect::<Vec<_>>().join("\n")
}

/// A pattern description and its examples, read from a comment such as
/// `// regex: ISO date, matches 2024-01-31, 1999-12-01, not 2024-1-31`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexSpec {
    pub description: String,
    pub positives: Vec<String>,
    pub negatives: Vec<String>,
}

pub fn parse_regex_spec(comment: &str) -> Option<RegexSpec> {
    let text: String = comment
        .lines()
        .map(|line| line.trim().trim_start_matches("///").trim_start_matches("//").trim_start_matches("/*"))
        .map(|line| line.trim_start_matches('*').trim_end_matches("*/").trim())
        .collect::<Vec<_>>()
        .join(" ");
    let lower = text.to_lowercase();
    let has_keyword = ["regex", "regexp", "pattern", "matches", "match "].iter().any(|word| lower.contains(word));
    if !has_keyword {
        return None;
    }
    let mut description = Vec::new();
    let mut positives = Vec::new();
    let mut negatives = Vec::new();
    #[derive(PartialEq)]
    enum Mode {
        Description,
        Positive,
        Negative,
    }
    let mut mode = Mode::Description;
    for segment in text.split([',', ';']) {
        let mut segment = segment.trim();
        let lower = segment.to_lowercase();
        for (keyword, next) in [
            ("doesn't match ", Mode::Negative),
            ("does not match ", Mode::Negative),
            ("but not ", Mode::Negative),
            ("not ", Mode::Negative),
            ("rejects ", Mode::Negative),
            ("matches ", Mode::Positive),
            ("match ", Mode::Positive),
            ("e.g. ", Mode::Positive),
            ("accepts ", Mode::Positive),
        ] {
            if lower.starts_with(keyword) {
                segment = segment[keyword.len()..].trim();
                mode = next;
                break;
            }
        }
        let segment = segment.trim_matches(|ch| ch == '`' || ch == '"' || ch == '\'');
        if segment.is_empty() {
            continue;
        }
        match mode {
            Mode::Description => description.push(segment.to_owned()),
            Mode::Positive => positives.push(segment.to_owned()),
            Mode::Negative => negatives.push(segment.to_owned()),
        }
    }
    let mut description = description.join(", ");
    for prefix in ["regex:", "regexp:", "pattern:", "regex", "pattern"] {
        if description.to_lowercase().starts_with(prefix) {
            description = description[prefix.len()..].trim().to_owned();
            break;
        }
    }
    Some(RegexSpec { description, positives, negatives })
}

/// The comment at `at`, its byte range and its spec.
pub fn regex_comment_at(document: &TaskDocument, at: usize) -> Option<(Range<usize>, RegexSpec)> {
    let root = document.tree.root_node();
    let queries = document.lang.queries();
    let comment = smallest_capture(&queries.comments, "comment", root, document.text.as_bytes(), at, at)
        .map(|node| node.byte_range())
        .or_else(|| {
            // The cursor may be at the end of the comment's line, just past the node.
            let line = line_span(&document.text, at, at);
            let text = &document.text[line.clone()];
            text.starts_with("//").then_some(line)
        })?;
    let spec = parse_regex_spec(&document.text[comment.clone()])?;
    Some((comment, spec))
}

async fn regex(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let Some((comment, spec)) = regex_comment_at(document, target.range.start) else {
        return Ok(nothing("Spark: no pattern description under the cursor"));
    };
    let title = "Spark: generate regex".to_owned();
    let describe = |spec: &RegexSpec| {
        let mut line = spec.description.clone();
        if !spec.positives.is_empty() {
            line.push_str(&format!(", matches {}", spec.positives.join(", ")));
        }
        if !spec.negatives.is_empty() {
            line.push_str(&format!(", not {}", spec.negatives.join(", ")));
        }
        line
    };
    let flavor = match document.lang {
        Lang::Rust => RegexFlavor::Rust,
        Lang::TypeScript | Lang::Tsx => RegexFlavor::EcmaScript,
    };
    let dialect = match flavor {
        RegexFlavor::Rust => "Rust `regex` crate",
        RegexFlavor::EcmaScript => "JavaScript (ECMAScript)",
    };
    let quoted =
        |examples: &[String]| examples.iter().map(|example| format!("`{example}`")).collect::<Vec<_>>().join(", ");
    let mut instruction = format!(
        "Write a {dialect} regular expression, anchored with ^ and $ so it matches a whole string: {}.",
        spec.description
    );
    if !spec.positives.is_empty() {
        instruction.push_str(&format!("\nIt must match each of: {}.", quoted(&spec.positives)));
    }
    if !spec.negatives.is_empty() {
        instruction.push_str(&format!("\nIt must not match any of: {}.", quoted(&spec.negatives)));
    }
    instruction.push_str("\nCover the whole kind of string described, not only these examples.");
    let task = TaskPrompt {
        system: "You write regular expressions. Answer with the pattern only, on one line in a code block, nothing \
                 else."
            .to_owned(),
        instruction,
        few_shot: format!(
            "Regular expressions that match a whole string, one per description.\n\n\
             Description: a US zip code, matches 12345, 12345-6789, not 1234\nRegex: ^\\d{{5}}(-\\d{{4}})?$\n\n\
             Description: a hex color, matches #fff, #a1b2c3, not #ggg\nRegex: ^#([0-9a-fA-F]{{3}}|[0-9a-fA-F]{{6}})$\n\n\
             Description: a lowercase word, matches hello, not Hello\nRegex: ^[a-z]+$\n\n\
             Description: {}\nRegex: ^",
            describe(&spec)
        ),
        few_shot_stops: vec!["\n".to_owned()],
        chat_prefill: "```\n^".to_owned(),
        chat_stops: vec!["\n".to_owned(), "```".to_owned()],
    };
    let line_end = document.text[comment.end..].find('\n').map(|idx| comment.end + idx).unwrap_or(document.text.len());
    let line_start = document.text[..comment.start].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    let indent: String = document.text[line_start..].chars().take_while(|ch| *ch == ' ' || *ch == '\t').collect();
    let in_body = inside_function_body(document, comment.start);
    let (found, tried, rejections) = sample_until(generator, &task, 64, budget, exec, cancel, |generated, style| {
        let generated = generated.trim();
        let pattern = match style {
            // The prompt ends with `^`: the answer goes on after it.
            PromptStyle::FewShot | PromptStyle::ChatPrefilled => format!("^{generated}"),
            PromptStyle::Chat => {
                let line = generated.lines().next().unwrap_or("").trim().trim_matches('`');
                let line = line.strip_prefix('/').and_then(|line| line.strip_suffix('/')).unwrap_or(line);
                if line.starts_with('^') {
                    line.to_owned()
                } else {
                    format!("^{line}")
                }
            }
        };
        check_regex(flavor, &pattern, &spec.positives, &spec.negatives)?;
        let statement = regex_statement(document.lang, &pattern, in_body);
        let change = FileChange {
            path: None,
            create: false,
            old_text: document.text.clone(),
            replace: line_end..line_end,
            insert: format!("\n{indent}{statement}"),
        };
        let before = edit_check::parse(document.lang, &document.text).map(|tree| count_all(&tree)).unwrap_or(0);
        let after =
            edit_check::parse(document.lang, &change.new_text()).map(|tree| count_all(&tree)).unwrap_or(usize::MAX);
        if after > before {
            return Err(Rejection::SyntaxErrors { in_edit: after - before, total_before: before, total_after: after });
        }
        Ok(change)
    })
    .await?;
    Ok(sampled(&title, found, tried, rejections))
}

fn count_all(tree: &Tree) -> usize {
    syntax_errors(tree.root_node(), 10_000).len()
}

fn inside_function_body(document: &TaskDocument, at: usize) -> bool {
    let root = document.tree.root_node();
    let source = document.text.as_bytes();
    smallest_capture(&document.lang.queries().functions, "function", root, source, at, at).is_some()
}

/// The pattern in the language's own syntax, as a statement to insert.
pub fn regex_statement(lang: Lang, pattern: &str, in_function_body: bool) -> String {
    match lang {
        Lang::Rust => {
            let mut hashes = String::new();
            while pattern.contains(&format!("\"{hashes}")) {
                hashes.push('#');
            }
            let literal = format!("r{hashes}\"{pattern}\"{hashes}");
            if in_function_body {
                format!("let re = regex::Regex::new({literal}).unwrap();")
            } else {
                format!("const PATTERN: &str = {literal};")
            }
        }
        Lang::TypeScript | Lang::Tsx => format!("const re = /{}/;", escape_slashes(pattern)),
    }
}

/// Escapes `/` not already escaped, for a regex literal.
fn escape_slashes(pattern: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for ch in pattern.chars() {
        if ch == '/' && !escaped {
            out.push('\\');
        }
        escaped = ch == '\\' && !escaped;
        out.push(ch);
    }
    out
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    line.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_answer_that_repeats_the_file_around_the_snippet_is_cut_to_the_snippet() {
        let before = "use std::fmt;\n\n/// Doc.\n";
        let after = "\n\nfn next() {}\n";
        let answer = "use std::fmt;\n\n/// Doc.\nfn broken() {\n    fixed();\n}\n\nfn next() {}";
        assert_eq!(without_repeated_context(answer, before, after), "fn broken() {\n    fixed();\n}");
        // An answer with only the snippet is kept as it is.
        assert_eq!(without_repeated_context("fn broken() {}", before, after), "fn broken() {}");
    }

    #[test]
    fn a_rewrite_is_narrowed_to_what_changed() {
        let text = "fn f() {\n    count\n}\n";
        let node = 0..text.len() - 1;
        let (range, insert) = narrow_rewrite(text, node, "fn f() {\n    counts\n}");
        assert_eq!((range, insert.as_str()), (18..18, "s"));
        let (range, insert) = narrow_rewrite("a é b", 0..6, "a è b");
        assert_eq!((range, insert.as_str()), (2..4, "è"));
    }

    fn document(lang: Lang, text: &str) -> TaskDocument {
        TaskDocument {
            text: text.to_owned(),
            lang,
            tree: edit_check::parse(lang, text).unwrap(),
            path: None,
            version: 1,
            revision: 0,
            open_files: Vec::new(),
        }
    }

    #[test]
    fn regex_spec_table() {
        let cases = [
            (
                "// regex: ISO date, matches 2024-01-31, 1999-12-01, not 2024-1-31",
                Some(("ISO date", vec!["2024-01-31", "1999-12-01"], vec!["2024-1-31"])),
            ),
            (
                "/* pattern: hex byte, e.g. `ff`, `0A`, but not `g1` */",
                Some(("hex byte", vec!["ff", "0A"], vec!["g1"])),
            ),
            ("// regex for a semantic version", Some(("for a semantic version", vec![], vec![]))),
            ("// just a comment", None),
        ];
        for (comment, expected) in cases {
            let got = parse_regex_spec(comment);
            let expected = expected.map(|(description, positives, negatives)| RegexSpec {
                description: description.to_owned(),
                positives: positives.into_iter().map(str::to_owned).collect(),
                negatives: negatives.into_iter().map(str::to_owned).collect(),
            });
            assert_eq!(got, expected, "{comment}");
        }
    }

    #[test]
    fn fix_node_is_the_smallest_statement_around_the_error() {
        let text = "fn f() {\n    let a = 1;\n    let x = 1 +;\n    let y = 2;\n}\n";
        let doc = document(Lang::Rust, text);
        let at = text.find("+;").unwrap();
        let node = fix_node(&doc, &TaskTarget { range: at..at + 1, message: None });
        assert_eq!(&text[node], "let x = 1 +;");
    }

    #[test]
    fn missing_tokens_are_the_first_repair() {
        let text = "pub fn total(p: &[u32]) -> u32 {\n    let sum: u32 = p.iter().sum()\n    sum\n}\n";
        let doc = document(Lang::Rust, text);
        let at = text.find("sum()").unwrap();
        let node = fix_node(&doc, &TaskTarget { range: at..at, message: None });
        assert_eq!(missing_token_repair(&doc, node).as_deref(), Some("let sum: u32 = p.iter().sum();"));
    }

    #[test]
    fn function_and_test_module_lookup() {
        let text =
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n";
        let doc = document(Lang::Rust, text);
        let (range, name) = function_at(&doc, text.find("a + b").unwrap()).unwrap();
        assert_eq!(name, "add");
        assert!(text[range].starts_with("pub fn add"));
        let at = existing_test_module(&doc).unwrap();
        assert_eq!(&text[at..], "}\n");
        let change = rust_test_change(&doc, Some(at), "    #[test]\n    fn t() {}\n");
        assert!(
            change.new_text().contains("use super::*;\n\n    #[test]\n    fn t() {}\n}\n"),
            "{}",
            change.new_text()
        );
    }

    #[test]
    fn arity_from_the_parameter_list() {
        let rust = document(Lang::Rust, "impl A {\n    pub fn f(&self, a: u32, b: u32) -> u32 { a + b }\n}\n");
        let (range, _) = function_at(&rust, rust.text.find("a + b").unwrap()).unwrap();
        assert_eq!(function_arity(&rust, range), Some((2, 2)));
        let ts = document(Lang::TypeScript, "export function f(a: number, b?: number, c = 1): number { return a; }\n");
        let (range, _) = function_at(&ts, ts.text.find("return").unwrap()).unwrap();
        assert_eq!(function_arity(&ts, range), Some((1, 3)));
        let arrow = document(Lang::TypeScript, "export const g = (xs: number[]) => xs.length;\n");
        let (range, _) = function_at(&arrow, arrow.text.find("xs.length").unwrap()).unwrap();
        assert_eq!(function_arity(&arrow, range), Some((1, 1)));
    }

    #[test]
    fn code_fences_are_stripped() {
        assert_eq!(strip_code_fences("```rust\nlet x = 1;\n```"), "let x = 1;");
        assert_eq!(strip_code_fences("```\nlet x = 1;\n"), "let x = 1;");
        assert_eq!(strip_code_fences("let x = 1;"), "let x = 1;");
    }

    #[test]
    fn regex_statements_in_each_language() {
        assert_eq!(regex_statement(Lang::Rust, r"^\d+$", true), r#"let re = regex::Regex::new(r"^\d+$").unwrap();"#);
        assert_eq!(regex_statement(Lang::Rust, r#"^"a"$"#, false), r###"const PATTERN: &str = r#"^"a"$"#;"###);
        assert_eq!(regex_statement(Lang::TypeScript, r"^a/b\/c$", true), r"const re = /^a\/b\/c$/;");
    }

    #[test]
    fn ts_paths_and_framework() {
        assert_eq!(ts_test_path(Path::new("/p/src/math.ts")), PathBuf::from("/p/src/math.test.ts"));
        let dir = std::env::temp_dir().join(format!("spark-fw-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("package.json"), r#"{"devDependencies": {"vitest": "^2"}}"#).unwrap();
        assert_eq!(ts_framework(Some(&dir.join("src/math.ts"))), TsFramework::Vitest);
        std::fs::write(dir.join("package.json"), r#"{"name": "x"}"#).unwrap();
        assert_eq!(ts_framework(Some(&dir.join("src/math.ts"))), TsFramework::NodeTest);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
