//! The ghost-text path shared by the LSP handlers and the CLI: context → engine → verification.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use spark_engine::{Completion, CompletionRequest, Engine, EngineError, StopMode};
use tokio_util::sync::CancellationToken;

use crate::config::InlineSettings;
pub use crate::context::display_path;
use crate::context::{self, Budget, FillContext};
use crate::document::Document;

/// A one-shot suggestion (the CLI's `complete`, the MCP tool `complete`): the model's answer, what of it
/// passed the check (`None`: the model wrote nothing or every line added a syntax error), and the stop mode.
pub struct OneShot {
    pub completion: Completion,
    pub checked: Option<String>,
    pub mode: StopMode,
}

/// Ghost text at `byte` of `document` (a file outside any workspace: no other files in the prompt), checked
/// like the editor's: the longest prefix of lines that adds no syntax error.
pub async fn one_shot(
    engine: &Engine,
    document: &Document,
    byte: usize,
    path: &str,
    settings: &InlineSettings,
    cancel: CancellationToken,
) -> Result<OneShot, EngineError> {
    let prepared = prepare(document, byte, Some(&display_path(path)), "", 1, settings, cancel);
    let mode = prepared.context.mode;
    let completion = engine.complete(prepared.request).await?;
    let checked = if completion.text.is_empty() {
        None
    } else {
        crate::verify::check_insertion(document, byte, &completion.text)
    };
    Ok(OneShot { completion, checked, mode })
}

/// A request ready for the engine, and what is needed to check its answer.
pub struct Prepared {
    pub request: CompletionRequest,
    pub context: FillContext,
    pub byte: usize,
    pub version: i32,
    /// The document's revision: identifies the text even when a client's versions go backwards.
    pub revision: u64,
}

/// Builds the engine request for a cursor at `byte`; `extra` (chunks of other files, `ring::render`) goes first.
pub fn prepare(
    document: &Document,
    byte: usize,
    path: Option<&str>,
    extra: &str,
    lane: u64,
    settings: &InlineSettings,
    cancel: CancellationToken,
) -> Prepared {
    let (prefix_lines, suffix_lines) = settings.window_lines();
    let budget = Budget { max_lines: settings.max_lines.max(1), ..Budget::lines(prefix_lines, suffix_lines) };
    let context = context::gather(document, byte, path, &budget);
    let max_tokens = match context.mode {
        StopMode::Line => settings.max_tokens.min(48),
        StopMode::Block | StopMode::Free => settings.max_tokens,
    };
    let request = CompletionRequest {
        lane,
        header: format!("{extra}{}", context.header),
        prefix: context.prefix.clone(),
        suffix: context.suffix.clone(),
        mode: context.mode,
        indent: context.indent.clone(),
        max_tokens,
        max_lines: context.max_lines,
        deadline: Instant::now() + Duration::from_millis(settings.deadline_ms),
        cancel,
        min_confidence: settings.min_confidence(),
        heal: settings.token_healing,
        ..Default::default()
    };
    Prepared { request, context, byte, version: document.version, revision: document.revision }
}

/// A warm-up request: brings the top of the document into the KV cache, generates nothing.
pub fn warm_up(
    document: &Document,
    path: Option<&str>,
    extra: &str,
    lane: u64,
    settings: &InlineSettings,
    cancel: CancellationToken,
) -> CompletionRequest {
    let rope = &document.rope;
    let (prefix_lines, suffix_lines) = settings.window_lines();
    let budget = Budget::lines(prefix_lines, suffix_lines);
    let end_line = budget.prefix_lines.min(rope.len_lines().saturating_sub(1));
    let mut end = rope.line_to_byte(end_line).min(budget.prefix_bytes);
    end = rope.char_to_byte(rope.byte_to_char(end));
    let context = context::gather(document, end, path, &budget);
    CompletionRequest {
        lane,
        header: format!("{extra}{}", context.header),
        prefix: context.prefix,
        mode: StopMode::Block,
        max_tokens: 0,
        deadline: Instant::now() + Duration::from_secs(30),
        cancel,
        // Nobody waits for it: a keystroke anywhere takes the model first (what was evaluated stays cached).
        background: true,
        ..Default::default()
    }
}

/// The lane of a document: requests in one lane supersede each other.
pub fn lane_of(key: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// Start of the identifier that ends at `byte`, for clients that filter completion items by the typed word.
pub fn word_start(document: &Document, byte: usize) -> usize {
    let rope = &document.rope;
    let mut char_idx = rope.byte_to_char(byte);
    while char_idx > 0 {
        let ch = rope.char(char_idx - 1);
        if ch.is_alphanumeric() || ch == '_' || ch == '$' {
            char_idx -= 1;
        } else {
            break;
        }
    }
    rope.char_to_byte(char_idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_path_keeps_two_segments() {
        assert_eq!(display_path("file:///home/u/proj/src/lib.rs"), "src/lib.rs");
        assert_eq!(display_path("lib.rs"), "lib.rs");
        assert_eq!(display_path("untitled:Untitled-1"), "untitled:Untitled-1");
    }

    #[test]
    fn word_start_stops_at_non_identifier() {
        let document = Document::new("let abc_1", "rust", None, 1);
        assert_eq!(word_start(&document, 9), 4);
        assert_eq!(word_start(&document, 4), 4);
    }
}
