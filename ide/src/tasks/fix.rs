//! Spark fix: the node around a diagnostic or syntax error, rewritten by the model (the enclosing function for chat models) and narrowed back to what changed; the grammar's missing-token repair first.

use super::suggested;
use super::*;
use crate::exec_check::{find_project, Gate};
use crate::route::{Generator, PromptStyle, TaskPrompt};
use crate::tiers::Tier;
use crate::verify::{
    check_changes_diagnosed_node, check_clears_syntax_error, check_parses_no_worse, check_rewrite, message_names,
};
use spark_engine::EngineError;
use spark_grammars::tree_sitter::Node;
use spark_grammars::{smallest_capture, syntax_errors};
use std::ops::Range;
use tokio_util::sync::CancellationToken;

mod region;
mod repair;

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

/// The outcome of a repair found by parsing (no model sample).
fn grammar_fix(change: FileChange, title: String, rejections: Vec<String>) -> TaskOutcome {
    TaskOutcome {
        changes: vec![change],
        title,
        samples_tried: 0,
        rejections,
        ms: 0,
        tier: Tier::Fast,
        origin: Origin::Grammar,
    }
}

/// A compiler's message about syntax (rustc's delimiters and "expected …", TypeScript's TS1xxx codes), which
/// may point where tree-sitter sees no error (rustc reports an unclosed delimiter at the end of the file).
fn is_syntax_message(message: &str) -> bool {
    let ts_syntax = message.match_indices("TS1").any(|(at, _)| {
        let digits = &message.as_bytes()[at + 3..];
        digits.len() >= 3
            && digits[..3].iter().all(u8::is_ascii_digit)
            && digits.get(3).is_none_or(|b| !b.is_ascii_digit())
    });
    ts_syntax || message.contains("delimiter") || message.starts_with("expected ") || message == "syntax error"
}

/// The whole lines (without the final line break) that `start..end` touches.
pub(super) fn line_span(text: &str, start: usize, end: usize) -> Range<usize> {
    let line_start = text[..start].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    let line_end = text[end..].find('\n').map(|idx| end + idx).unwrap_or(text.len());
    let first_non_space = text[line_start..line_end].len() - text[line_start..line_end].trim_start().len();
    line_start + first_non_space..line_end
}

pub(super) async fn fix(task: &Task<'_>) -> Result<TaskOutcome, EngineError> {
    let Task { generator, document, target, budget, exec, cancel } = *task;
    let node = fix_node(document, target);
    // A diagnostic where the code parses is a compiler's (a name, a type, an argument): the fix must change the
    // diagnosed code itself. (At a syntax error, a candidate that keeps the error is refused for it anyway.)
    let at_syntax_error = syntax_errors(document.tree.root_node(), 256)
        .iter()
        .any(|error| error.start_byte() <= target.range.end && error.end_byte() >= target.range.start);
    let message = target.message.clone().unwrap_or_else(|| "syntax error".to_owned());
    let title = format!("Spark fix: {}", first_line(&message));
    // The grammar knows what is missing (a `;`, a `)`): that repair is the first candidate, and it is checked
    // like any other.
    let mut refused_repair = None;
    let repair = if budget.model_only { None } else { missing_token_repair(document, node.clone()) };
    if let Some(repaired) = repair {
        if check_rewrite(document.lang, &document.text, node.clone(), &repaired, false).is_ok() {
            let change = FileChange {
                path: None,
                create: false,
                old_text: document.text.clone(),
                replace: node.clone(),
                insert: repaired,
            };
            match exec.check(&change, cancel).await {
                Ok(()) => return Ok(grammar_fix(change, title, Vec::new())),
                Err(refusal) => refused_repair = Some(refusal),
            }
        }
    }
    let mut rejections: Vec<String> = refused_repair.into_iter().collect();
    // A token the parser cannot place itself (a block's `}`, a `)` or `;` in a line): put in where the file then
    // parses, and checked like any other fix.
    if !budget.model_only && (at_syntax_error || is_syntax_message(&message)) {
        let repairs = repair::token_repairs(document, target.range.start);
        // Without a compiler to judge them, a repair is offered only when all that parse are the same code.
        let repairs = if exec.compiles() || repair::agree(&document.text, &repairs) { repairs } else { Vec::new() };
        for (replace, insert) in repairs {
            let change = FileChange { path: None, create: false, old_text: document.text.clone(), replace, insert };
            match exec.check(&change, cancel).await {
                Ok(()) => return Ok(grammar_fix(change, title, rejections)),
                Err(refusal) => rejections.push(format!("token repair: {refusal}")),
            }
        }
    }
    let started = Instant::now();
    let mut tried = 0;
    // Where the compiler checks candidates (a diagnostic in code that parses, a project around the file).
    let compiled = !at_syntax_error && exec.compiles();
    let diagnosed_name = target.message.as_deref().and_then(|message| diagnosed_name(document, &target.range, message));
    let similar = diagnosed_name.map(|leaf| similar_names(document, leaf)).unwrap_or_default();
    // The region fix (see [`region`]): the model's first answer for the diagnosed lines is written while the
    // compiler checks the original and its own suggestions (the checker's cold start is paid once, beside the
    // model); a suggestion that verifies stops the model.
    let fim = if budget.fix_region { region::fim_template(generator.engine) } else { None };
    let region = fim.as_ref().and_then(|_| region::fix_region(document, target));
    let region_deadline = started + budget.time * 3 / 4;
    let model_stop = cancel.child_token();
    let first_region = async {
        let (Some(fim), Some(region)) = (fim.as_ref(), region.clone()) else { return None };
        // rustc's `help:` lines ("provide the argument: `f(a, /* u32 */)`") go into the note: its run of the
        // original is the one the compiler's candidates need anyway.
        let help = match (&target.message, document.lang) {
            (Some(diagnostic), Lang::Rust) if compiled => exec
                .original_output(cancel)
                .await
                .map(|(project, output)| {
                    let file = project.file.to_string_lossy().into_owned();
                    suggested::rustc_help(&output, &file, diagnostic, target.range.clone())
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let message = if help.is_empty() { message.clone() } else { format!("{message}\n{}", help.join("\n")) };
        let prompt = region::region_prompt(document, region, &message, &similar, fim);
        let sampled =
            region::region_sample(generator.engine, &prompt, Sampling::default(), region_deadline, &model_stop).await;
        Some((prompt, sampled))
    };
    let compiler_first = async {
        let found =
            compiler_fixes(document, target, compiled, !budget.model_only, diagnosed_name, &similar, exec, cancel)
                .await;
        if found.0.is_some() {
            model_stop.cancel();
        }
        found
    };
    let ((found, help, compiler_rejections), first_region) = tokio::join!(compiler_first, first_region);
    rejections.extend(compiler_rejections);
    if let Some((origin, change)) = found {
        return Ok(TaskOutcome { origin, ..sampled(&title, Some(change), tried, rejections) });
    }
    if let (Some((prompt, first)), Some(region)) = (first_region, region.clone()) {
        let (found, region_tried, region_rejections) =
            region_fix(generator, document, target, region, &prompt, first?, budget, region_deadline, exec, cancel)
                .await?;
        tried += region_tried;
        rejections.extend(region_rejections);
        if found.is_some() {
            return Ok(sampled(&title, found, tried, rejections));
        }
    }
    let message = if help.is_empty() { message } else { format!("{message}\n{}", help.join("\n")) };
    let chat = generator.answers_in_chat_form();
    let function = if chat { enclosing_function(document, node.clone()) } else { node.clone() };
    // A compiler's diagnostic in code that parses is most often fixed on its own line (a misspelled name, a wrong
    // literal, a missing argument): when the compiler checks candidates, an instruction-tuned model is first
    // asked for that line alone, with the lines around it and its function's signature. The answer is a line,
    // not the function: a 1.5B model on two cores writes it in seconds, where a whole function and the code
    // above it took the strong tier's whole budget. Without the compiler the line answers were more often wrong
    // (the evaluation's 32 semantic cases: 8 wrong of 18 offered, against 3 of 10 for whole functions), so then
    // only the whole-function rewrite runs.
    if chat && compiled {
        let line = line_span(&document.text, target.range.start, target.range.end);
        if function.start <= line.start && line.end <= function.end && line != function && line.len() <= 400 {
            let task = fix_line_prompt(document, function.clone(), line.clone(), &message, &similar);
            let line_budget = TaskBudget { samples: budget.samples.min(2), time: budget.time / 2, ..budget };
            let (found, line_tried, line_rejections) =
                sample_until(generator, &task, line.len() / 2 + 64, line_budget, exec, cancel, |candidate, style| {
                    accept_rewrite(document, target, line.clone(), candidate, style, false)
                })
                .await?;
            tried += line_tried;
            rejections.extend(line_rejections);
            if found.is_some() {
                return Ok(sampled(&title, found, tried, rejections));
            }
        }
    }
    // An instruction-tuned model rewrites the whole function around the error (a misspelled name or a wrong
    // argument is fixed with the signature and the locals in view, and the model is not left to guess how much
    // of the code a bare expression stands for); the edit is then narrowed to what it changed.
    let node = function;
    let broken = &document.text[node.clone()];
    let task = fix_prompt(document, node.clone(), target.range.start, &message, &similar);
    let max_tokens = broken.len() / 2 + 32;
    let rest = TaskBudget { time: budget.time.saturating_sub(started.elapsed()), ..budget };
    let (found, node_tried, node_rejections) =
        sample_until(generator, &task, max_tokens, rest, exec, cancel, |candidate, style| {
            accept_rewrite(document, target, node.clone(), candidate, style, at_syntax_error)
        })
        .await?;
    tried += node_tried;
    rejections.extend(node_rejections);
    Ok(sampled(&title, found, tried, rejections))
}

/// The candidates no model writes, each offered only when the compiler accepts the file with it
/// (`verify.compile`): the compiler's own suggested edits (rustc's `help:` replacements, tsc's "Did you mean", the
/// import of a name another module exports), then the file's names spelled like the one the compiler cannot find
/// (the compilers' "did you mean" for a name rustc does not suggest). The nearest name is not a fix unless it
/// type-checks. Without a compiler (`compiled` false) the model decides, told the names; `suggest` false (the
/// strong tier after the fast one) leaves them out. Returns the first that
/// verified, rustc's `help:` lines for the model's prompt ("help: provide the argument: `f(a, /* u32 */)`"), and
/// why the others were refused.
#[allow(clippy::too_many_arguments)]
async fn compiler_fixes(
    document: &TaskDocument,
    target: &TaskTarget,
    compiled: bool,
    suggest: bool,
    diagnosed_name: Option<Node<'_>>,
    similar: &[String],
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> (Option<(Origin, FileChange)>, Vec<String>, Vec<String>) {
    let mut rejections = Vec::new();
    // rustc's whole diagnostic for the document as it is (the run candidates are judged against).
    let rustc = match (&target.message, document.lang) {
        (Some(diagnostic), Lang::Rust) if compiled => exec.original_output(cancel).await.map(|(project, output)| {
            let file = project.file.to_string_lossy().into_owned();
            let suggestions = suggested::rustc_suggestions(&output, &file, diagnostic, target.range.clone());
            (suggestions, suggested::rustc_help(&output, &file, diagnostic, target.range.clone()))
        }),
        _ => None,
    };
    let (rustc_suggestions, help) = rustc.unwrap_or_default();
    if !compiled || !suggest {
        return (None, help, rejections);
    }
    let mut candidates: Vec<(Origin, FileChange)> =
        compiler_candidates(document, target, rustc_suggestions, exec, cancel)
            .await
            .into_iter()
            .map(|change| (Origin::Compiler, change))
            .collect();
    if let Some(leaf) = diagnosed_name {
        for other in similar {
            let change = FileChange {
                path: None,
                create: false,
                old_text: document.text.clone(),
                replace: leaf.byte_range(),
                insert: other.clone(),
            };
            if !candidates.iter().any(|(_, seen)| seen.new_text() == change.new_text()) {
                candidates.push((Origin::SimilarName, change));
            }
        }
    }
    for (origin, change) in candidates {
        let new_text = change.new_text();
        let inserted = change.replace.start..change.replace.start + change.insert.len();
        if let Err(rejection) = check_parses_no_worse(document.lang, &document.tree, &new_text, inserted) {
            rejections.push(format!("{}: {rejection}", origin.name()));
            continue;
        }
        match exec.check(&change, cancel).await {
            Ok(()) if exec.ran_any() => return (Some((origin, change)), help, rejections),
            // No compiler could be run here: leave it to the model.
            Ok(()) => break,
            Err(refusal) => rejections.push(format!("{}: {refusal}", origin.name())),
        }
    }
    (None, help, rejections)
}

/// Samples of the region fix until one verifies: `first` (the greedy answer, generated beside the compiler's
/// run), then up to two more with temperature, each on the prompt already in the task slot's KV cache (only the
/// answer is decoded again), until `deadline`.
#[allow(clippy::too_many_arguments)]
async fn region_fix(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: &TaskTarget,
    region: Range<usize>,
    prompt: &region::RegionPrompt,
    first: spark_engine::Completion,
    budget: TaskBudget,
    deadline: Instant,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<(Option<FileChange>, usize, Vec<String>), EngineError> {
    let at_syntax_error = syntax_errors(document.tree.root_node(), 256)
        .iter()
        .any(|error| error.start_byte() <= target.range.end && error.end_byte() >= target.range.start);
    let mut rejections = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut completion = first;
    let samples = budget.samples.clamp(1, REGION_SAMPLES);
    for sample_idx in 0..samples {
        if sample_idx > 0 {
            if cancel.is_cancelled() || Instant::now() >= deadline {
                return Ok((None, sample_idx, rejections));
            }
            let sampling = Sampling { temperature: 0.3 + 0.2 * sample_idx as f32, seed: 17 + sample_idx as u32 };
            completion = region::region_sample(generator.engine, prompt, sampling, deadline, cancel).await?;
        }
        let stats = &completion.stats;
        tracing::info!(
            sample = sample_idx,
            n_prompt = stats.n_prompt,
            n_reused = stats.n_reused,
            n_copied = stats.n_copied,
            prompt_ms = stats.prompt_ms,
            queue_ms = stats.queue_ms,
            generate_ms = stats.generate_us / 1000,
            n_generated = stats.n_generated,
            stop = ?completion.stop,
            "fix region sample"
        );
        if completion.stop == StopReason::Deadline {
            rejections.push(format!("region: cut by the time budget after {} generated tokens", stats.n_generated));
            return Ok((None, sample_idx + 1, rejections));
        }
        let candidate = region::region_answer(document, region.clone(), &completion.text);
        if seen.contains(&candidate) {
            continue;
        }
        match accept_rewrite(document, target, region.clone(), &candidate, PromptStyle::FewShot, at_syntax_error) {
            Ok(change) => {
                let checking = Instant::now();
                let checked = exec.check(&change, cancel).await;
                tracing::info!(
                    sample = sample_idx,
                    check_ms = checking.elapsed().as_millis() as u64,
                    ok = checked.is_ok(),
                    "fix region check"
                );
                match checked {
                    Ok(()) => return Ok((Some(change), sample_idx + 1, rejections)),
                    Err(refusal) => rejections.push(format!("region: {refusal}")),
                }
            }
            Err(rejection) => rejections.push(format!("region: {rejection}")),
        }
        seen.push(candidate);
    }
    Ok((None, samples, rejections))
}

/// Samples of a region fix at most (greedy, then two with temperature).
const REGION_SAMPLES: usize = 3;

/// The compiler's own suggested edits for the target diagnostic, as changes of the document (see
/// [`suggested`]): for Rust, rustc's replacements (`rustc`, read from `cargo check`'s output for the document as
/// it is); for TypeScript, the name tsc's message proposes, and for a name it cannot find, its import from the
/// package's modules that export it (nearest first).
async fn compiler_candidates(
    document: &TaskDocument,
    target: &TaskTarget,
    rustc: Vec<suggested::Suggested>,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Vec<FileChange> {
    let Some(message) = target.message.as_deref() else { return Vec::new() };
    let mut changes = Vec::new();
    match document.lang {
        Lang::Rust => {
            for suggestion in &rustc {
                changes.extend(suggested::as_change(document, suggestion));
            }
        }
        Lang::TypeScript | Lang::Tsx => {
            if let (Some(name), Some(leaf)) =
                (suggested::tsc_did_you_mean(message), diagnosed_name(document, &target.range, message))
            {
                changes.extend(suggested::as_change(document, &vec![(leaf.byte_range(), name)]));
            }
            let project = document.path.as_deref().and_then(|path| find_project(path).map(|project| (path, project)));
            if let (Some(name), Some((path, project))) = (suggested::tsc_missing_name(message), project) {
                // A removed import leaves several names unknown, each its own error: importing the diagnosed one
                // alone leaves the others. tsc's errors in the file (from the check of the original the gate makes
                // anyway) name them; the package is scanned once for all of them.
                let mut names = vec![name.to_owned()];
                if let Some((_, output)) = exec.original_output(cancel).await {
                    let missing = suggested::tsc_missing_names(&output, &project.file.to_string_lossy());
                    if missing.len() > 1 && missing.iter().any(|other| other == name) {
                        names = missing;
                    }
                }
                let own = names.iter().position(|other| other == name).unwrap_or(0);
                let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
                let mut exporters = suggested::ts_exporters_of(&project.root, path, &wanted);
                if !exporters[own].is_empty() {
                    changes.extend(suggested::ts_combined_import(document, path, &names, &exporters));
                }
                let exporters = std::mem::take(&mut exporters[own]);
                for (exporter, type_only) in exporters.into_iter().take(3) {
                    for specifier in suggested::ts_specifiers(path, &exporter, &document.text) {
                        let names = [(name.to_owned(), type_only)];
                        changes.push(suggested::ts_import_change(document, &names, &specifier));
                    }
                }
            }
        }
    }
    changes.truncate(suggested::MAX_SUGGESTIONS);
    changes
}

/// A model's rewrite of `node` as a checked edit: a chat answer's repeats of the code around the node taken
/// off, the rewrite checked (parses, stays in its node, changes little), narrowed to what changed, and, for a
/// compiler's diagnostic (`at_syntax_error` false), required to change the diagnosed code.
fn accept_rewrite(
    document: &TaskDocument,
    target: &TaskTarget,
    node: Range<usize>,
    candidate: &str,
    style: PromptStyle,
    at_syntax_error: bool,
) -> Result<FileChange, Rejection> {
    let broken = &document.text[node.clone()];
    let candidate = candidate.trim_end().trim_start_matches('\n');
    // A chat answer may repeat code around the snippet (the reference above it, the next function).
    let unrepeated;
    let candidate = if style == PromptStyle::FewShot {
        candidate
    } else {
        unrepeated = without_repeated_context(candidate, &document.text[..node.start], &document.text[node.end..]);
        unrepeated.as_str()
    };
    // The node starts after its line's indentation; a chat answer repeats it.
    let candidate = if broken.starts_with(char::is_whitespace) { candidate } else { candidate.trim_start() };
    let rewritten = check_rewrite(document.lang, &document.text, node.clone(), candidate, false)?;
    if at_syntax_error {
        check_clears_syntax_error(document.lang, &document.tree, &rewritten)?;
    }
    let (replace, insert) = narrow_rewrite(&document.text, node, candidate);
    if !at_syntax_error {
        let edit = (replace.clone(), insert.as_str());
        let message = target.message.as_deref();
        check_changes_diagnosed_node(&document.tree, &document.text, target.range.clone(), message, edit)?;
    }
    Ok(FileChange { path: None, create: false, old_text: document.text.clone(), replace, insert })
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
pub(super) fn enclosing_function(document: &TaskDocument, node: Range<usize>) -> Range<usize> {
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

/// The file's other names closest in spelling to `leaf`, the name a compiler's message says it cannot find
/// (rustc's "cannot find value `totl`", tsc's "Cannot find name 'cuont'"; see [`diagnosed_name`]): at most three,
/// within a third of its length in edits. A compiler's "did you mean", for a model that sees only part of the file.
pub(super) fn similar_names(document: &TaskDocument, leaf: Node<'_>) -> Vec<String> {
    let root = document.tree.root_node();
    let source = document.text.as_bytes();
    let name = &document.text[leaf.byte_range()];
    let limit = (name.chars().count() / 3).max(1);
    let mut found: Vec<(usize, String)> = Vec::new();
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        if node.child_count() == 0 && node.kind().ends_with("identifier") && node.byte_range() != leaf.byte_range() {
            if let Ok(other) = node.utf8_text(source) {
                let distance = edit_distance(name, other);
                if other != name && distance <= limit && !found.iter().any(|(_, seen)| seen == other) {
                    found.push((distance, other.to_owned()));
                }
            }
        }
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                break 'walk;
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
    found.sort();
    found.into_iter().take(3).map(|(_, other)| other).collect()
}

/// Edits (a character inserted, deleted or replaced, or two neighbours swapped) from `a` to `b`: the optimal
/// string alignment distance, over characters.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back (for a swap), the previous one and the current one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            current[j] = (previous[j] + 1).min(current[j - 1] + 1).min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                current[j] = current[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// The name token at `diagnosed` when the message names it.
pub(super) fn diagnosed_name<'t>(
    document: &'t TaskDocument,
    diagnosed: &Range<usize>,
    message: &str,
) -> Option<Node<'t>> {
    let root = document.tree.root_node();
    let leaf = root.descendant_for_byte_range(diagnosed.start, diagnosed.end.max(diagnosed.start))?;
    let name = leaf.utf8_text(document.text.as_bytes()).ok()?;
    let is_name = leaf.child_count() == 0 && leaf.kind().ends_with("identifier");
    (is_name && message_names(message, name)).then_some(leaf)
}

/// The prompts' sentence naming the [`similar_names`], or "".
fn similar_names_hint(names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let list = names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
    format!(" Names in this file spelled like it: {list}.")
}

/// Spark fix's prompt: the snippet to rewrite, the diagnostic, and for instruction-tuned models the lines
/// around it (names in scope, the signature), so that a misspelled name or a wrong argument can be put right.
pub(super) fn fix_prompt(
    document: &TaskDocument,
    node: Range<usize>,
    error_at: usize,
    message: &str,
    similar: &[String],
) -> TaskPrompt {
    let hint = similar_names_hint(similar);
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
             The compiler reports{location}: {message}{hint}\n\nAnswer with the corrected code, all of it."
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

/// Bytes of the function shown around the diagnosed line in a line fix's prompt (its signature, up to
/// [`LINE_FIX_ABOVE`] lines before the line and [`LINE_FIX_BELOW`] after): a 1.5B model evaluates ~90 prompt
/// tokens a second on two cores, so a whole function and the code above it took the strong tier's budget.
const LINE_FIX_CONTEXT_BYTES: usize = 1200;
const LINE_FIX_ABOVE: usize = 12;
const LINE_FIX_BELOW: usize = 3;

/// A line fix's prompt: the function's signature, the lines around the diagnosed `line` (whole lines of
/// `function`), the diagnostic, and the request for that line alone, corrected.
pub(super) fn fix_line_prompt(
    document: &TaskDocument,
    function: Range<usize>,
    line: Range<usize>,
    message: &str,
    similar: &[String],
) -> TaskPrompt {
    let hint = similar_names_hint(similar);
    let language = language_name(document.lang);
    let tag = fence_tag(document.lang);
    let text = &document.text;
    let line_start = text[..line.start].rfind('\n').map_or(0, |at| at + 1);
    let lines_of = |range: Range<usize>| -> Vec<(usize, &str)> {
        let mut at = range.start;
        text[range]
            .split('\n')
            .map(|piece| {
                let start = at;
                at += piece.len() + 1;
                (start, piece)
            })
            .collect()
    };
    let function_lines = lines_of(text[..function.start].rfind('\n').map_or(0, |at| at + 1)..function.end);
    let error_idx = function_lines.iter().rposition(|(start, _)| *start <= line_start).unwrap_or(0);
    let error_last = function_lines.iter().rposition(|(start, _)| *start <= line.end).unwrap_or(error_idx);
    let last = (error_last + LINE_FIX_BELOW).min(function_lines.len() - 1);
    let mut first = error_idx.saturating_sub(LINE_FIX_ABOVE).max(1).min(error_idx);
    let bytes = |from: usize| function_lines[from..=last].iter().map(|(_, piece)| piece.len() + 1).sum::<usize>();
    while first < error_idx && bytes(first) > LINE_FIX_CONTEXT_BYTES {
        first += 1;
    }
    // The signature (the parameters' names and types), a gap marker when lines are left out, then the window.
    let mut shown: Vec<String> = Vec::new();
    if first > 0 {
        shown.push(function_lines[0].1.to_owned());
        if first > 1 {
            let window_first = function_lines[first].1;
            let indent = &window_first[..window_first.len() - window_first.trim_start().len()];
            shown.push(format!("{indent}{} …", document.lang.line_comment()));
        }
    }
    let error_number = shown.len() + (error_idx - first) + 1;
    shown.extend(function_lines[first..=last].iter().map(|(_, piece)| (*piece).to_owned()));
    let snippet = shown.join("\n");
    let error_line = text[line.clone()].trim();
    TaskPrompt {
        system: format!(
            "You fix errors in {language} code. Change as little as possible, keep every name the rest of the code \
             uses, and answer with code in one code block, nothing else."
        ),
        instruction: format!(
            "Part of a {language} function that does not compile:\n```{tag}\n{snippet}\n```\n\
             The compiler reports at line {error_number} (`{error_line}`): {message}{hint}\n\n\
             Answer with line {error_number} corrected, only that line."
        ),
        few_shot: format!("// Error: {message}\n// Broken:\n{error_line}\n// Fixed:\n"),
        few_shot_stops: vec!["\n\n".to_owned(), "\n// ".to_owned()],
        chat_prefill: format!("```{tag}\n"),
        chat_stops: vec!["```".to_owned()],
    }
}

/// The node's text with every MISSING punctuation token the parser reported inserted where it belongs.
pub(super) fn missing_token_repair(document: &TaskDocument, node: Range<usize>) -> Option<String> {
    let mut inserts: Vec<(usize, &str)> = syntax_errors(document.tree.root_node(), 256)
        .into_iter()
        .filter(|error| error.is_missing() && node.start <= error.start_byte() && error.start_byte() <= node.end)
        .filter(|error| error.kind().chars().all(|ch| ch.is_ascii_punctuation()))
        .map(|error| (error.start_byte(), error.kind()))
        .collect();
    // A closer the parser assumed right after a `,` ("f(a, b,\n),)"): it more likely belongs before the comma,
    // which the one-token repairs try.
    let after_comma = |at: usize| document.text[..at].trim_end().ends_with(',');
    if inserts.is_empty() || inserts.iter().any(|(at, token)| matches!(*token, ")" | "]" | "}") && after_comma(*at)) {
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
