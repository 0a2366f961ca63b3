//! Spark fix as an edit of a small region: the model rewrites only the diagnosed lines (a few at most), laid out
//! as a fill-in-the-middle prompt on the document — the window before the region as ghost text has it, the
//! compiler's message and the broken lines as comments just before the region, the code after it as the suffix —
//! so its answer is a few dozen tokens and the document's KV prefix from ghost text is reused.

use std::ops::Range;
use std::time::Instant;

use spark_engine::model_info::FimTemplate;
use spark_engine::{prompt, Completion, CompletionRequest, Engine, EngineError, EngineState, Sampling, StopMode};
use spark_grammars::syntax_errors;
use tokio_util::sync::CancellationToken;

use super::super::{TaskDocument, TaskTarget, TASK_LANE};
use crate::context::{self, Budget};
use crate::document::Document;

/// The most lines an editable region spans: the diagnosed statement, a few lines at most.
pub(crate) const REGION_MAX_LINES: usize = 4;
/// The most bytes of an editable region.
const REGION_MAX_BYTES: usize = 480;
/// Lines of code after the region in the prompt's suffix (what the answer must fit before).
const SUFFIX_LINES: usize = 4;
/// The window before the region: the narrow ghost-text window (12 lines, moved in steps of 12), with a header of
/// imports kept short. Measured on the evaluation's dev slice with a cold cache (a file just opened): the wide
/// window (32 lines in steps of 32, 1500 bytes of header) made 300–660 prompt tokens, which a loaded 2-core
/// machine did not evaluate within 6 s; in an editor the document's slot holds either from ghost text.
fn window_budget() -> Budget {
    Budget { header_bytes: 600, ..Budget::lines(12, 2) }
}
/// The most lines of the compiler's message (its `help:` lines included) in the note.
const NOTE_MAX_LINES: usize = 5;

/// The editable region of a fix: the whole lines (indentation included, the last line break not) of the diagnosed
/// code; when those are more than a small region, the lines of the syntax errors that touch it, if they are small
/// (tree-sitter's error node around a missing `;` is often the whole function: the compiler's point is nearer).
pub(crate) fn fix_region(document: &TaskDocument, target: &TaskTarget) -> Option<Range<usize>> {
    let text = &document.text;
    let end = target.range.end.min(text.len());
    let start = target.range.start.min(end);
    let mut widened = start..end;
    for error in syntax_errors(document.tree.root_node(), 256) {
        if error.start_byte() <= end && error.end_byte() >= start {
            widened.start = widened.start.min(error.start_byte());
            widened.end = widened.end.max(error.end_byte());
        }
    }
    [start..end, widened].into_iter().map(|range| whole_lines(text, range)).find(|region| small(text, region))
}

/// `range` grown to whole lines: from the start of its first line to the end of its last, without the line break.
fn whole_lines(text: &str, range: Range<usize>) -> Range<usize> {
    let start = text[..range.start].rfind('\n').map_or(0, |at| at + 1);
    let end = text[range.end..].find('\n').map_or(text.len(), |at| range.end + at);
    let end = if text[start..end].ends_with('\r') { end - 1 } else { end };
    start..end.max(start)
}

fn small(text: &str, region: &Range<usize>) -> bool {
    let code = &text[region.clone()];
    !code.trim().is_empty() && code.len() <= REGION_MAX_BYTES && code.lines().count() <= REGION_MAX_LINES
}

/// The local model's fill-in template, when it has one (a region fix needs it).
pub(crate) fn fim_template(engine: &Engine) -> Option<FimTemplate> {
    match engine.state() {
        EngineState::Ready(info) => info.fim.clone(),
        _ => None,
    }
}

/// A region fix's prompt and what bounds its answer.
pub(crate) struct RegionPrompt {
    pub rendered: String,
    pub stops: Vec<String>,
    pub max_tokens: usize,
}

/// The region fix's prompt (see [`prompt::render_fix`]): the header and window ghost text would have for a cursor
/// at the region's first line, then the note — the compiler's `message` (and its `help:` lines), the file's names
/// spelled like the unknown one, the broken lines — as comments in the region's indentation, then the code after
/// the region as the suffix.
pub(crate) fn region_prompt(
    document: &TaskDocument,
    region: Range<usize>,
    message: &str,
    similar: &[String],
    fim: &FimTemplate,
) -> RegionPrompt {
    let text = &document.text;
    let comment = document.lang.line_comment();
    let path = document.path.as_deref().map(|path| crate::suggest::display_path(&path.to_string_lossy()));
    // The ghost-text context of the region's first line: the same header and window start as a keystroke there.
    let as_document = Document::new(text, "", Some(document.lang), document.version);
    let window = context::gather(&as_document, region.start, path.as_deref(), &window_budget());
    let broken = &text[region.clone()];
    let indent: String = broken.chars().take_while(|ch| *ch == ' ' || *ch == '\t').collect();
    let mut note = String::new();
    for (idx, line) in message.lines().filter(|line| !line.trim().is_empty()).take(NOTE_MAX_LINES).enumerate() {
        let label = if idx == 0 { "error: " } else { "" };
        note.push_str(&format!("{indent}{comment} {label}{}\n", line.trim()));
    }
    if !similar.is_empty() {
        note.push_str(&format!("{indent}{comment} names spelled like it: {}\n", similar.join(", ")));
    }
    let broken_lines: Vec<&str> = broken.lines().collect();
    if let [line] = broken_lines.as_slice() {
        note.push_str(&format!("{indent}{comment} the next line, broken: {}\n", line.trim()));
    } else {
        note.push_str(&format!("{indent}{comment} the next {} lines, broken:\n", broken_lines.len()));
        for line in &broken_lines {
            note.push_str(&format!("{indent}{comment}   {}\n", line.trim_end()));
        }
    }
    let after = suffix_after(text, region.end);
    let rendered = prompt::render_fix(fim, &window.header, &window.prefix, &note, &after);
    let mut stops = fim.stop_strings.clone();
    if !broken.contains("\n\n") {
        stops.push("\n\n".to_owned());
    }
    RegionPrompt { rendered, stops, max_tokens: broken.len() / 2 + 24 }
}

/// Up to [`SUFFIX_LINES`] lines of the text after `at` (the region's end, before its line break).
fn suffix_after(text: &str, at: usize) -> String {
    let rest = &text[at..];
    let end = rest.match_indices('\n').nth(SUFFIX_LINES).map_or(rest.len(), |(idx, _)| idx + 1);
    rest[..end].to_owned()
}

/// One sample of the region: the model's answer as it came (the caller shapes it with [`region_answer`]).
pub(crate) async fn region_sample(
    engine: &Engine,
    prompt: &RegionPrompt,
    sampling: Sampling,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Completion, EngineError> {
    let request = CompletionRequest {
        lane: TASK_LANE,
        mode: StopMode::Free,
        max_tokens: prompt.max_tokens,
        max_lines: usize::MAX,
        deadline,
        cancel: cancel.clone(),
        raw_prompt: true,
        prefix: prompt.rendered.clone(),
        stop_strings: prompt.stops.clone(),
        sampling,
        // The answer mostly copies the broken lines of the note: prompt-lookup drafts confirm them in bulk.
        speculate: true,
        ..Default::default()
    };
    engine.complete(request).await
}

/// The model's answer as the region's new text: the note's comments it repeated taken off, the code after the
/// region it went on into cut, as many lines as the region at most.
pub(crate) fn region_answer(document: &TaskDocument, region: Range<usize>, answer: &str) -> String {
    let comment = document.lang.line_comment();
    let text = &document.text;
    let region_lines = text[region.clone()].lines().count().max(1);
    let mut lines: Vec<&str> = answer.trim_end().lines().collect();
    // Blank lines first (the answer starting on a new line) and repeats of the note.
    while lines.first().is_some_and(|line| {
        let line = line.trim_start();
        line.is_empty()
            || line.starts_with(&format!("{comment} error:"))
            || line.starts_with(&format!("{comment} the next"))
    }) {
        lines.remove(0);
    }
    let next_line = text[region.end..].lines().map(str::trim).find(|line| !line.is_empty());
    while lines.len() > region_lines && next_line.is_some_and(|next| lines.last().map(|line| line.trim()) == Some(next))
    {
        lines.pop();
    }
    // As many lines as the region: a line more was the code after it, changed (the dev slice's "runs past the
    // node" refusals).
    lines.truncate(region_lines);
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use spark_engine::FimFamily;
    use spark_grammars::Lang;

    fn document(text: &str) -> TaskDocument {
        TaskDocument::parsed(Lang::Rust, text)
    }

    #[test]
    fn the_region_is_the_diagnosed_lines_and_the_prompt_shows_them_broken() {
        let text = "fn area(w: u32, h: u32) -> u32 {\n    let a = w * h\n    a\n}\n";
        let doc = document(text);
        let at = text.find("w * h").expect("in the text");
        let target = TaskTarget { range: at..at + 5, message: Some("expected `;`".to_owned()) };
        let region = fix_region(&doc, &target).expect("a small region");
        assert_eq!(&text[region.clone()], "    let a = w * h");
        let fim = FimFamily::QwenCoder.template(None);
        let prompt = region_prompt(&doc, region.clone(), "expected `;`\nhelp: add `;` here", &[], &fim);
        assert!(prompt.rendered.ends_with("<|fim_middle|>"), "{}", prompt.rendered);
        let note =
            "    // error: expected `;`\n    // help: add `;` here\n    // the next line, broken: let a = w * h\n";
        assert!(prompt.rendered.contains(&format!("u32 {{\n{note}<|fim_suffix|>\n    a\n}}\n")), "{}", prompt.rendered);
        assert_eq!(region_answer(&doc, region.clone(), "    let a = w * h;\n    a\n"), "    let a = w * h;");
        assert_eq!(
            region_answer(&doc, region.clone(), "    // error: expected `;`\n    let a = w * h;"),
            "    let a = w * h;"
        );
        assert_eq!(region_answer(&doc, region, "\n    let a = w * h;\n"), "    let a = w * h;");
    }

    #[test]
    fn a_large_diagnosed_span_has_no_region() {
        let body: String = (0..10).map(|idx| format!("    let v{idx} = {idx};\n")).collect();
        let text = format!("fn f() {{\n{body}}}\n");
        let doc = document(&text);
        let target = TaskTarget { range: 0..text.len(), message: Some("mismatched types".to_owned()) };
        assert_eq!(fix_region(&doc, &target), None);
    }
}
