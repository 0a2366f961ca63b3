//! The tasks behind code actions and their CLI: Spark fix, test generation, regex generation. Each builds a
//! prompt for the model's kind (few-shot completion prompts for base models), samples within a time budget
//! (greedy first, then with temperature and seeds), and keeps the first candidate that passes `edit_check`.
//! The result is a set of file changes, or a plain "nothing verified" with the reasons.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spark_engine::{CompletionRequest, EngineError, Sampling, StopMode, StopReason};
use spark_grammars::{tree_sitter::Tree, Lang};
use tokio_util::sync::CancellationToken;

use crate::exec_check::{Gate, VerifySettings};
use crate::route::{Generator, PromptStyle, TaskPrompt};
use crate::tiers::Tier;
use crate::verify::Rejection;

/// Requests of all tasks share one lane: a new task supersedes a queued one, ghost text keeps its own lanes.
mod characterise;
mod characterise_inputs;
mod fix;
mod probe;
mod regex;
mod regex_describe;
mod regex_synth;
pub mod suggested;
mod tests;

pub use crate::kinds::{ts_framework, TsFramework};
#[allow(unused_imports)]
use fix::*;
pub use fix::{fix_node, narrow_rewrite, without_repeated_context};
#[allow(unused_imports)]
use regex::*;
pub use regex::{parse_regex_spec, quote_example, regex_comment_at, regex_statement, RegexSpec};
#[allow(unused_imports)]
use tests::*;
pub use tests::{files_read, function_at, ts_export, ts_test_path, TsExport};

pub(crate) const TASK_LANE: u64 = u64::MAX;

pub use crate::kinds::{FileChange, TaskKind};

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

#[cfg(test)]
impl TaskDocument {
    /// `text` parsed as `lang`, with no file on disk and no other open file: what unit tests ask tasks about.
    pub(crate) fn parsed(lang: Lang, text: &str) -> Self {
        TaskDocument {
            text: text.to_owned(),
            lang,
            tree: crate::parse::text(lang, text).expect("parses"),
            path: None,
            version: 1,
            revision: 0,
            open_files: Vec::new(),
        }
    }
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
    /// The model's samples only: the candidates no model writes (the grammar's repair, the compiler's own
    /// suggestions, the file's similarly spelled names) were tried already, by the fast tier.
    pub model_only: bool,
    /// Spark fix tries the region prompt first (`tasks.fixRegion`, off by default; see `fix/region.rs`).
    pub fix_region: bool,
}

impl Default for TaskBudget {
    fn default() -> Self {
        TaskBudget {
            samples: 4,
            time: Duration::from_secs(12),
            verify: VerifySettings::off(),
            model_only: false,
            fix_region: false,
        }
    }
}

/// Where a verified edit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// A model's answer (the outcome's tier says which model).
    #[default]
    Model,
    /// The grammar's repair: the tokens the parser reported missing, inserted.
    Grammar,
    /// The compiler's own suggested edit (rustc's `help:`, tsc's "Did you mean", an import of an exported name).
    Compiler,
    /// A name of the file spelled like the one the compiler cannot find.
    SimilarName,
    /// A regex synthesised from its examples' shape.
    Examples,
    /// A regex read from its description's words.
    Description,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Model => "model",
            Origin::Grammar => "grammar",
            Origin::Compiler => "compiler",
            Origin::SimilarName => "similar name",
            Origin::Examples => "examples",
            Origin::Description => "description",
        }
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
    /// What produced the edit: a model (of `tier`), or a candidate no model wrote.
    pub origin: Origin,
}

impl TaskOutcome {
    pub fn verified(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Where the edit came from, as said to the user: "fast tier", "strong tier", or what wrote it without a
    /// model ("compiler", "grammar", "similar name").
    pub fn source(&self) -> String {
        match self.origin {
            Origin::Model => format!("{} tier", self.tier.name()),
            other => other.name().to_owned(),
        }
    }
}

/// What a task works with: the model, the document and the place, its budget, the execution checks and the
/// cancel token.
#[derive(Clone, Copy)]
pub(super) struct Task<'a> {
    generator: &'a Generator<'a>,
    document: &'a TaskDocument,
    target: &'a TaskTarget,
    budget: TaskBudget,
    exec: &'a Gate<'a>,
    cancel: &'a CancellationToken,
}

/// What a task is asked: its kind, the document and the place in it.
#[derive(Clone, Copy)]
pub struct TaskInput<'a> {
    pub kind: TaskKind,
    pub document: &'a TaskDocument,
    pub target: &'a TaskTarget,
}

/// Runs a task to completion (or to its budget).
pub async fn run(
    generator: &Generator<'_>,
    input: TaskInput<'_>,
    budget: TaskBudget,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let TaskInput { kind, document, target } = input;
    let started = Instant::now();
    // Execution checks (off unless the user turned them on) gate candidates after `edit_check`.
    let broken = !spark_grammars::syntax_errors(document.tree.root_node(), 1).is_empty();
    let exec = Gate::new(budget.verify, kind, document.path.as_deref(), &document.text, target.message.as_deref())
        .original_broken(broken);
    let task = Task { generator, document, target, budget, exec: &exec, cancel };
    let mut outcome = match kind {
        TaskKind::Fix => fix(&task).await?,
        TaskKind::Tests => tests(&task).await?,
        TaskKind::Regex => regex(&task).await?,
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

/// The outcome of a task cancelled before it tried anything.
pub fn cancelled(kind: TaskKind) -> TaskOutcome {
    TaskOutcome { rejections: vec!["cancelled".to_owned()], ..nothing(kind.nothing_verified()) }
}

fn nothing(title: &str) -> TaskOutcome {
    TaskOutcome {
        changes: Vec::new(),
        title: title.to_owned(),
        samples_tried: 0,
        rejections: Vec::new(),
        ms: 0,
        tier: Tier::Fast,
        origin: Origin::Model,
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
        let request = task_request(max_tokens, Instant::now() + left, cancel, sampling);
        let generated = generator.generate_task(task, request).await?;
        // An answer the budget cut is code cut off somewhere, not a candidate: said as such (a slow model's
        // refusals read "empty" when the time ran out before its first token).
        if generated.completion.stop == StopReason::Deadline {
            rejections.push(format!(
                "cut by the time budget after {} generated tokens",
                generated.completion.stats.n_generated
            ));
            return Ok((None, sample_idx + 1, rejections));
        }
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

/// A task's request to the model: raw prompt, the task lane, interactive priority.
fn task_request(
    max_tokens: usize,
    deadline: Instant,
    cancel: &CancellationToken,
    sampling: Sampling,
) -> CompletionRequest {
    CompletionRequest {
        lane: TASK_LANE,
        mode: StopMode::Free,
        max_tokens,
        max_lines: usize::MAX,
        deadline,
        cancel: cancel.clone(),
        raw_prompt: true,
        sampling,
        ..Default::default()
    }
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
pub(crate) fn fence_tag(lang: Lang) -> &'static str {
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

pub(crate) fn language_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::TypeScript | Lang::Tsx => "TypeScript",
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    line.chars().take(60).collect()
}

#[cfg(test)]
mod unit {
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
        TaskDocument::parsed(lang, text)
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
            (
                r#"// regex: a csv cell, matches "a, b", `c;d`, "say \"hi\"", not " padded ""#,
                Some(("a csv cell", vec!["a, b", "c;d", "say \"hi\""], vec![" padded "])),
            ),
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

    /// Any example reads back from the comment exactly: bare when it can, else quoted.
    #[test]
    fn quoted_examples_read_back_exactly() {
        let examples =
            ["plain", "a, b", "semi;colon", "quote\"d", "  spaces ", "", "not a keyword", "back\\slash", "tick`"];
        let comment = format!(
            "// regex: anything, matches {}, not {}",
            examples.iter().map(|example| quote_example(example)).collect::<Vec<_>>().join(", "),
            quote_example("x,y")
        );
        let spec = parse_regex_spec(&comment).unwrap();
        assert_eq!(spec.positives, examples, "{comment}");
        assert_eq!(spec.negatives, ["x,y"]);
        assert_eq!(quote_example("plain"), "plain");
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
    fn names_spelled_like_the_unknown_one_are_found_in_the_file() {
        let text = "fn f(prev_row: isize, prev_col: isize) -> isize {\n    let t = pervrow;\n    t + prev_col\n}\n";
        let doc = document(Lang::Rust, text);
        let at = text.find("pervrow").unwrap();
        let range = at..at + "pervrow".len();
        let names = |range: Range<usize>, message: &str| {
            fix::diagnosed_name(&doc, &range, message).map(|leaf| fix::similar_names(&doc, leaf)).unwrap_or_default()
        };
        assert_eq!(names(range.clone(), "cannot find value `pervrow` in this scope"), ["prev_row"]);
        // A message that names something else: no names (the diagnostic is not about this name).
        assert!(names(range, "mismatched types").is_empty());
        let text = "export function f(count: number): number {\n  return cuont + 1;\n}\n";
        let doc = document(Lang::TypeScript, text);
        let at = text.find("cuont").unwrap();
        let leaf = fix::diagnosed_name(&doc, &(at..at + 5), "Cannot find name 'cuont'.").unwrap();
        assert_eq!(fix::similar_names(&doc, leaf), ["count"]);
        // Swapped neighbours are one edit.
        assert_eq!(fix::edit_distance("cuont", "count"), 1);
        assert_eq!(fix::edit_distance("", "abc"), 3);
        assert_eq!(fix::edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_line_fix_prompt_shows_the_signature_and_the_lines_around_the_error() {
        let mut text = String::from("fn long(total: u32) -> u32 {\n");
        for idx in 0..20 {
            text.push_str(&format!("    let v{idx} = total + {idx};\n"));
        }
        text.push_str("    v18 + totl\n}\n");
        let doc = document(Lang::Rust, &text);
        let function = 0..text.len() - 1;
        let at = text.find("totl").unwrap();
        let line = fix::line_span(&text, at, at + 4);
        let message = "cannot find value `totl` in this scope";
        let leaf = fix::diagnosed_name(&doc, &(at..at + 4), message).unwrap();
        let prompt = fix::fix_line_prompt(&doc, function, line, message, &fix::similar_names(&doc, leaf));
        let snippet = prompt.instruction.split("```rust\n").nth(1).unwrap().split("\n```").next().unwrap();
        let lines: Vec<&str> = snippet.lines().collect();
        assert_eq!(lines[0], "fn long(total: u32) -> u32 {");
        assert_eq!(lines[1], "    // …");
        assert_eq!(lines[2], "    let v8 = total + 8;", "{snippet}");
        let number = lines.iter().position(|line| line.trim() == "v18 + totl").unwrap() + 1;
        assert!(prompt.instruction.contains(&format!("at line {number} (`v18 + totl`)")), "{}", prompt.instruction);
        assert!(prompt.instruction.contains(&format!("Answer with line {number} corrected")));
        assert!(prompt.instruction.contains("Names in this file spelled like it: `total`."), "{}", prompt.instruction);
        assert_eq!(lines.last(), Some(&"}"));
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
    fn a_test_module_without_the_parent_glob_gets_it_in_the_test() {
        let text =
            "pub enum Rule { A }\nimpl Rule {\n    pub fn f(&self) -> u8 { 1 }\n}\n\n#[cfg(test)]\nmod tests {\n    \
                    use super::Rule::*;\n}\n";
        let doc = document(Lang::Rust, text);
        let at = existing_test_module(&doc).unwrap();
        let test_fn = "    #[test]\n    fn f_works() {\n        assert_eq!(Rule::A.f(), 1);\n    }\n";
        let change = rust_test_change(&doc, Some(at), test_fn);
        assert!(
            change.new_text().ends_with(
                "    use super::Rule::*;\n\n    #[test]\n    fn f_works() {\n        use super::*;\n        \
                 assert_eq!(Rule::A.f(), 1);\n    }\n}\n"
            ),
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
    fn how_a_typescript_function_is_exported() {
        let export_of = |text: &str, at: &str| {
            let doc = document(Lang::TypeScript, text);
            let (range, name) = function_at(&doc, text.find(at).unwrap()).unwrap();
            ts_export(&doc, range, &name)
        };
        let named = |name: &str| TsExport::Named(name.to_owned());
        assert_eq!(export_of("export function f(a: number) { return a; }\n", "return"), named("f"));
        assert_eq!(export_of("export const g = (a: number) => a + 1;\n", "a + 1"), named("g"));
        assert_eq!(export_of("export default function h(a: number) { return a; }\n", "return"), TsExport::Default);
        assert_eq!(export_of("function h(a: number) { return a; }\nexport default h;\n", "return"), TsExport::Default);
        assert_eq!(export_of("function k(a: number) { return a; }\nexport { k };\n", "return"), named("k"));
        assert_eq!(export_of("function k(a: number) { return a; }\nexport { k as key };\n", "return"), named("key"));
        assert_eq!(
            export_of("function k(a: number) { return a; }\nexport { k as default };\n", "return"),
            TsExport::Default
        );
        assert_eq!(export_of("function p(a: number) { return a; }\n", "return"), TsExport::NotExported);
        assert_eq!(
            export_of("export { p } from \"./other\";\nfunction p(a: number) { return a; }\n", "return"),
            TsExport::NotExported
        );
        assert_eq!(export_of("export class C {\n  m(a: number) { return a; }\n}\n", "return"), TsExport::Member);
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
