//! The plain data of a completion: the request (`CompletionRequest`, `Sampling`), and the answer (`Completion`,
//! `StopReason`, `CompletionStats`). No mechanism lives here; everything else in the engine builds on it.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::postprocess::StopMode;

/// How the next token is chosen: greedy at temperature zero, else sampled with a seed (reproducible).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    pub seed: u32,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling { temperature: 0.0, seed: 0 }
    }
}

/// A fill-in request, editor-neutral.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// Requests in one lane (one document) supersede each other: only the newest runs.
    pub lane: u64,
    pub header: String,
    pub prefix: String,
    pub suffix: String,
    pub mode: StopMode,
    /// Leading whitespace of the cursor's line.
    pub indent: String,
    /// Zero means: only bring the prompt into the KV cache (a warm-up), generate nothing.
    pub max_tokens: usize,
    pub max_lines: usize,
    pub deadline: Instant,
    pub cancel: CancellationToken,
    /// A task prompt is used as it is: no FIM layout, no header (`prefix` holds the whole prompt).
    pub raw_prompt: bool,
    /// Strings that end generation (cut before them), besides the model's own.
    pub stop_strings: Vec<String>,
    pub sampling: Sampling,
    /// A prefetch nobody waits for: it runs only when no interactive request is queued, and the engine cancels
    /// it when one arrives.
    pub background: bool,
    /// Ghost text is shown only when the model's probability of its first line (the product of its tokens'
    /// probabilities, the line's end included) is at least this; 0 shows everything. A guess the model itself
    /// rates unlikely is mostly wrong, and a wrong suggestion costs the user more than none.
    pub min_confidence: f32,
    /// Decode with prompt-lookup speculation even when `model.speculative` is off: for answers that mostly copy
    /// the prompt (a rewritten window), where an exact match with plain greedy decoding is not the point.
    pub speculate: bool,
    /// Token healing for a greedy ghost-text request: the prompt's last tokens on the cursor's line are taken back
    /// and the answer must start with their text ([`Session`]'s `take_back_for_healing`).
    pub heal: bool,
    /// Background work that finishes a keystroke's request the deadline cut (the user paused on it): it starts
    /// without waiting for a pause (there is one) and evaluates its prompt in bigger chunks than other background
    /// work, since someone is waiting for it. Any keystroke still cancels it.
    pub resume: bool,
    /// A GBNF grammar (llama.cpp's format, start rule `root`) every generated token must keep the answer inside:
    /// the local model samples only what the grammar allows and ends when it is complete; speculative drafting is
    /// off for such a request. A backend that cannot constrain its decoding ignores it (the caller checks the
    /// answer as always).
    pub grammar: Option<std::sync::Arc<str>>,
}

impl Default for CompletionRequest {
    /// A ghost-text request in lane 0 with nothing in it, due now: callers set what they need.
    fn default() -> Self {
        CompletionRequest {
            lane: 0,
            header: String::new(),
            prefix: String::new(),
            suffix: String::new(),
            mode: StopMode::Line,
            indent: String::new(),
            max_tokens: 0,
            max_lines: 1,
            deadline: Instant::now(),
            cancel: CancellationToken::new(),
            raw_prompt: false,
            stop_strings: Vec::new(),
            sampling: Sampling::default(),
            background: false,
            min_confidence: 0.0,
            speculate: false,
            heal: false,
            resume: false,
            grammar: None,
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndOfGeneration,
    StopRule,
    MaxTokens,
    ContextFull,
    Deadline,
    Cancelled,
    Superseded,
    WarmedUp,
    /// Answered from the suggestion cache, without the model.
    Cached,
}

/// Counters of one request: they show prefix reuse without relying on timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompletionStats {
    pub n_prompt: usize,
    pub n_reused: usize,
    pub n_decoded: usize,
    pub n_generated: usize,
    pub queue_ms: u64,
    pub prompt_ms: u64,
    /// From the start of the request to the first sampled token (prompt evaluation included); 0 when none was.
    pub first_token_ms: u64,
    /// Time spent generating (sampling and decoding generated tokens), in microseconds.
    pub generate_us: u64,
    pub total_ms: u64,
    /// The KV slot (sequence) the request ran in.
    pub slot: usize,
    /// Prompt tokens copied from another slot instead of evaluated (counted in `n_reused` too).
    pub n_copied: usize,
    /// Speculative decoding: tokens drafted by prompt lookup, and those the model confirmed.
    pub n_drafted: usize,
    pub n_accepted: usize,
    /// The model's probability of the answer's first line, in thousandths: 1000 when the backend gives no
    /// probabilities, 0 when the call generated nothing.
    pub confidence_permille: u32,
    /// The answer was dropped because `confidence_permille` fell below the request's `min_confidence`.
    pub below_confidence: bool,
    /// Generated tokens carried over from the lane's previous answer, which the user typed along
    /// ([`Continuation`]): neither evaluated again nor generated again.
    pub n_carried: usize,
}

/// The answer: the text to insert at the cursor (empty when nothing worth showing was found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub stop: StopReason,
    pub stats: CompletionStats,
}

/// A small ghost-text request for the engine's own unit tests (queue and handle): 8 tokens, 4 lines, 10 s.
#[cfg(test)]
pub(crate) fn test_ghost(lane: u64, prefix: &str) -> CompletionRequest {
    CompletionRequest {
        lane,
        prefix: prefix.to_owned(),
        max_tokens: 8,
        max_lines: 4,
        deadline: std::time::Instant::now() + std::time::Duration::from_secs(10),
        ..Default::default()
    }
}
