//! Spark fix: the node around a diagnostic or syntax error, rewritten by the model (the enclosing function for chat models) and narrowed back to what changed; the grammar's missing-token repair first.

use super::*;
use crate::exec_check::Gate;
use crate::route::{Generator, PromptStyle, TaskPrompt};
use crate::tiers::Tier;
use crate::verify::{check_changes_diagnosed_node, check_rewrite};
use spark_engine::EngineError;
use spark_grammars::{smallest_capture, syntax_errors};
use std::ops::Range;
use tokio_util::sync::CancellationToken;

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
pub(super) fn line_span(text: &str, start: usize, end: usize) -> Range<usize> {
    let line_start = text[..start].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    let line_end = text[end..].find('\n').map(|idx| end + idx).unwrap_or(text.len());
    let first_non_space = text[line_start..line_end].len() - text[line_start..line_end].trim_start().len();
    line_start + first_non_space..line_end
}

pub(super) async fn fix(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
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
            if !at_syntax_error {
                let diagnosed = target.range.clone();
                let message = target.message.as_deref();
                let edit = (replace.clone(), insert.as_str());
                check_changes_diagnosed_node(&document.tree, &document.text, diagnosed, message, edit)?;
            }
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

/// Spark fix's prompt: the snippet to rewrite, the diagnostic, and for instruction-tuned models the lines
/// around it (names in scope, the signature), so that a misspelled name or a wrong argument can be put right.
pub(super) fn fix_prompt(document: &TaskDocument, node: Range<usize>, error_at: usize, message: &str) -> TaskPrompt {
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
pub(super) fn missing_token_repair(document: &TaskDocument, node: Range<usize>) -> Option<String> {
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
