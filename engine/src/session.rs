//! One model session: the tokens in the KV cache, longest-common-prefix reuse, and the generation loop with its
//! stop rules, cancellation and deadline. Generic over `LanguageModel` so that it is tested with a scripted fake.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::model_info::FimTemplate;
use crate::postprocess::{self, StopContext};
use crate::prompt::{self, PromptInput};

/// Tokens are plain ids here; the backend maps them to its own type.
pub type Token = i32;

/// Where a suggestion should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// The cursor is mid-line: complete the rest of this line only.
    Line,
    /// The cursor is at the end of a line or on an empty one: complete up to the end of the block.
    Block,
    /// A task prompt (fix, tests, regex): only the request's stop strings, end of generation and the budget
    /// end it; the text is returned as generated.
    Free,
}

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
}

/// The answer: the text to insert at the cursor (empty when nothing worth showing was found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub stop: StopReason,
    pub stats: CompletionStats,
}

/// What the session needs from a model backend.
pub trait LanguageModel {
    /// Tokenizes without adding BOS; `parse_special` turns marker text into special tokens.
    fn tokenize(&self, text: &str, parse_special: bool) -> Vec<Token>;
    fn bos(&self) -> Option<Token>;
    fn piece(&self, token: Token) -> Vec<u8>;
    fn is_end_of_generation(&self, token: Token) -> bool;
    fn n_ctx(&self) -> usize;
    /// Drops every cached position at or after `n_keep`.
    fn truncate_cache(&mut self, n_keep: usize) -> Result<(), EngineError>;
    /// Evaluates `tokens` at positions `first_pos..`, leaving the logits of the last one ready to sample.
    fn decode(&mut self, tokens: &[Token], first_pos: usize) -> Result<(), EngineError>;
    fn sample(&mut self) -> Token;
    /// Chooses how `sample` picks tokens from now on.
    fn set_sampling(&mut self, sampling: Sampling);
}

/// Prompt tokens are evaluated in chunks so that a cancel lands within one chunk; what was evaluated stays
/// cached, so a cancelled cold prompt still warms the cache for the next keystroke. 64 tokens take ~0.2 s on
/// two cores with the default model: the longest a keystroke waits behind background work.
const PROMPT_CHUNK: usize = 64;
/// The smallest chunk worth starting before a deadline (smaller ones cost more per token).
const MIN_PROMPT_CHUNK: usize = 16;

pub struct Session<M> {
    pub model: M,
    pub fim: Option<FimTemplate>,
    cached: Vec<Token>,
    /// Measured time to evaluate one prompt token (a moving average over chunks), to size chunks to deadlines.
    prompt_cost: Option<Duration>,
}

impl<M: LanguageModel> Session<M> {
    pub fn new(model: M, fim: Option<FimTemplate>) -> Self {
        Session { model, fim, cached: Vec::new(), prompt_cost: None }
    }

    /// Tokens currently in the KV cache, in order.
    pub fn cached_tokens(&self) -> &[Token] {
        &self.cached
    }

    /// Forgets the cache (after a failure left it in an unknown state).
    pub fn reset(&mut self) {
        let _ = self.model.truncate_cache(0);
        self.cached.clear();
    }

    pub fn complete(&mut self, request: &CompletionRequest, queued_at: Instant) -> Result<Completion, EngineError> {
        let started = Instant::now();
        let mut stats = CompletionStats { queue_ms: millis(started - queued_at), ..Default::default() };
        let tokens = self.prompt_tokens(request);
        stats.n_prompt = tokens.len();

        let n_common = common_prefix_len(&self.cached, &tokens);
        // At least one token is decoded so that fresh logits exist for the first sample.
        let n_keep = n_common.min(tokens.len().saturating_sub(1));
        if n_keep < self.cached.len() {
            self.model.truncate_cache(n_keep)?;
            self.cached.truncate(n_keep);
        }
        stats.n_reused = n_keep;
        let mut next = n_keep;
        while next < tokens.len() {
            if request.cancel.is_cancelled() {
                return Ok(self.finish(String::new(), StopReason::Cancelled, stats, started));
            }
            // Past the deadline the answer is empty anyway; what was evaluated stays cached, so the next request
            // goes on from there instead of paying for all of a huge prompt at once. A chunk is sized to end
            // before the deadline (from the measured cost per token), so a keystroke's answer is not held up by
            // a chunk that started just before it.
            let left = request.deadline.saturating_duration_since(Instant::now());
            // With a margin: tokens later in a long prompt cost more (attention), and the average mixes them.
            let fits = self.prompt_cost.map_or(PROMPT_CHUNK, |per_token| {
                usize::try_from(left.as_micros() * 2 / (per_token.as_micros().max(1) * 3)).unwrap_or(usize::MAX)
            });
            if left.is_zero() || fits < MIN_PROMPT_CHUNK.min(tokens.len() - next) {
                return Ok(self.finish(String::new(), StopReason::Deadline, stats, started));
            }
            let chunk = &tokens[next..(next + fits.min(PROMPT_CHUNK)).min(tokens.len())];
            let first_pos = self.cached.len();
            let chunk_started = Instant::now();
            if let Err(error) = self.model.decode(chunk, first_pos) {
                self.reset();
                return Err(error);
            }
            if chunk.len() >= MIN_PROMPT_CHUNK {
                let per_token = chunk_started.elapsed() / u32::try_from(chunk.len()).unwrap_or(u32::MAX);
                // A moving average: one slow chunk (another process took the core) does not stall the next ones.
                self.prompt_cost = Some(self.prompt_cost.map_or(per_token, |old| (old * 3 + per_token) / 4));
            }
            self.cached.extend_from_slice(chunk);
            stats.n_decoded += chunk.len();
            next += chunk.len();
        }
        stats.prompt_ms = millis(started.elapsed());
        if request.max_tokens == 0 {
            return Ok(self.finish(String::new(), StopReason::WarmedUp, stats, started));
        }

        let stop_context = StopContext {
            mode: request.mode,
            indent: &request.indent,
            suffix: &request.suffix,
            max_lines: request.max_lines,
        };
        let model_stops: &[String] = match (&self.fim, request.raw_prompt) {
            (Some(fim), false) => fim.stop_strings.as_slice(),
            _ => &[],
        };
        let stop_strings: Vec<&str> = model_stops.iter().chain(&request.stop_strings).map(String::as_str).collect();
        self.model.set_sampling(request.sampling);
        let mut bytes: Vec<u8> = Vec::new();
        let mut text = String::new();
        let generating = Instant::now();
        let stop = loop {
            if request.cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            if stats.n_generated >= request.max_tokens {
                break StopReason::MaxTokens;
            }
            if Instant::now() >= request.deadline {
                break StopReason::Deadline;
            }
            let token = self.model.sample();
            if stats.first_token_ms == 0 {
                stats.first_token_ms = millis(started.elapsed()).max(1);
            }
            if self.model.is_end_of_generation(token) {
                break StopReason::EndOfGeneration;
            }
            bytes.extend_from_slice(&self.model.piece(token));
            text = String::from_utf8_lossy(valid_utf8_prefix(&bytes)).into_owned();
            if let Some(cut) = stop_strings.iter().filter_map(|stop| text.find(stop)).min() {
                text.truncate(cut);
                break StopReason::StopRule;
            }
            if let Some(cut) = postprocess::stop_at(&text, &stop_context) {
                text.truncate(cut);
                break StopReason::StopRule;
            }
            if self.cached.len() + 1 >= self.model.n_ctx() {
                break StopReason::ContextFull;
            }
            let pos = self.cached.len();
            if let Err(error) = self.model.decode(&[token], pos) {
                self.reset();
                return Err(error);
            }
            self.cached.push(token);
            stats.n_generated += 1;
        };
        stats.generate_us = u64::try_from(generating.elapsed().as_micros()).unwrap_or(u64::MAX);
        if stop == StopReason::Cancelled {
            return Ok(self.finish(String::new(), stop, stats, started));
        }
        if stop == StopReason::Deadline || stop == StopReason::MaxTokens {
            // A block cut by time or length keeps only its complete lines.
            if request.mode == StopMode::Block {
                if let Some(last_newline) = text.rfind('\n') {
                    text.truncate(last_newline);
                }
            }
        }
        let text = if request.mode == StopMode::Free {
            text
        } else {
            postprocess::finalize(&text, &stop_context).unwrap_or_default()
        };
        Ok(self.finish(text, stop, stats, started))
    }

    fn finish(&self, text: String, stop: StopReason, mut stats: CompletionStats, started: Instant) -> Completion {
        stats.total_ms = millis(started.elapsed());
        Completion { text, stop, stats }
    }

    /// BOS, then the rendered prompt; when it does not fit the context, the oldest prefix tokens go, in
    /// 256-token steps so that the start stays put while the user types.
    fn prompt_tokens(&self, request: &CompletionRequest) -> Vec<Token> {
        let rendered = if request.raw_prompt {
            request.prefix.clone()
        } else {
            prompt::render(
                self.fim.as_ref(),
                PromptInput { header: &request.header, prefix: &request.prefix, suffix: &request.suffix },
            )
        };
        let mut tokens: Vec<Token> = self.model.bos().into_iter().collect();
        let n_head = tokens.len();
        tokens.extend(self.model.tokenize(&rendered, self.fim.is_some()));
        let budget = self.model.n_ctx().saturating_sub(request.max_tokens + 8).max(16);
        if tokens.len() > budget {
            let excess = tokens.len() - budget;
            let n_drop = excess.div_ceil(256) * 256;
            let n_drop = n_drop.min(tokens.len() - n_head - 1);
            tokens.drain(n_head..n_head + n_drop);
        }
        tokens
    }
}

/// Length of the longest common prefix of two token sequences.
pub fn common_prefix_len(a: &[Token], b: &[Token]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The longest prefix of `bytes` that is valid UTF-8: a multi-byte character may span two tokens.
fn valid_utf8_prefix(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(error) if error.error_len().is_none() => &bytes[..error.valid_up_to()],
        Err(_) => bytes,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod fake {
    //! A scripted model: one token per character; after the prompt it "generates" a fixed continuation.

    use super::*;

    pub struct FakeModel {
        pub continuation: String,
        pub cache: Vec<Token>,
        pub prompt_len: usize,
        pub n_ctx: usize,
        pub decoded_total: usize,
        pub eog_after: bool,
    }

    pub const EOG: Token = -2;
    pub const BOS: Token = -1;

    impl FakeModel {
        pub fn new(continuation: &str) -> Self {
            FakeModel {
                continuation: continuation.to_owned(),
                cache: Vec::new(),
                prompt_len: 0,
                n_ctx: 4096,
                decoded_total: 0,
                eog_after: true,
            }
        }
    }

    impl LanguageModel for FakeModel {
        fn tokenize(&self, text: &str, _parse_special: bool) -> Vec<Token> {
            text.chars().map(|ch| ch as Token).collect()
        }
        fn bos(&self) -> Option<Token> {
            Some(BOS)
        }
        fn piece(&self, token: Token) -> Vec<u8> {
            char::from_u32(token as u32).map(|ch| ch.to_string().into_bytes()).unwrap_or_default()
        }
        fn is_end_of_generation(&self, token: Token) -> bool {
            token == EOG
        }
        fn n_ctx(&self) -> usize {
            self.n_ctx
        }
        fn truncate_cache(&mut self, n_keep: usize) -> Result<(), EngineError> {
            self.cache.truncate(n_keep);
            Ok(())
        }
        fn decode(&mut self, tokens: &[Token], first_pos: usize) -> Result<(), EngineError> {
            assert_eq!(first_pos, self.cache.len(), "decode must append at the end of the cache");
            self.cache.extend_from_slice(tokens);
            self.decoded_total += tokens.len();
            if tokens.len() > 1 || self.prompt_len == 0 {
                self.prompt_len = self.cache.len();
            }
            Ok(())
        }
        fn set_sampling(&mut self, _sampling: Sampling) {}
        fn sample(&mut self) -> Token {
            let n_generated = self.cache.len() - self.prompt_len;
            match self.continuation.chars().nth(n_generated) {
                Some(ch) => ch as Token,
                None if self.eog_after => EOG,
                None => ' ' as Token,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;

    fn request(prefix: &str, suffix: &str, mode: StopMode) -> CompletionRequest {
        CompletionRequest {
            lane: 1,
            header: String::new(),
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
            mode,
            indent: String::new(),
            max_tokens: 64,
            max_lines: 8,
            deadline: Instant::now() + Duration::from_secs(10),
            cancel: CancellationToken::new(),
            raw_prompt: false,
            stop_strings: Vec::new(),
            sampling: Sampling::default(),
            background: false,
        }
    }

    #[test]
    fn free_mode_stops_only_at_stop_strings() {
        let mut session = Session::new(FakeModel::new("a\n\n    b();\nEND more"), None);
        let mut req = request("prompt", "", StopMode::Free);
        req.raw_prompt = true;
        req.stop_strings = vec!["END".into()];
        let completion = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(completion.text, "a\n\n    b();\n");
        assert_eq!(completion.stop, StopReason::StopRule);
    }

    #[test]
    fn line_mode_completes_to_end_of_line_and_trims_suffix() {
        let mut session = Session::new(FakeModel::new("x + 1);\nnext line"), None);
        let completion = session.complete(&request("let y = f(", ");", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(completion.text, "x + 1");
        assert_eq!(completion.stop, StopReason::StopRule);
    }

    #[test]
    fn second_keystroke_reuses_the_cached_prefix() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        let first = session.complete(&request("fn main() {\n    let", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(first.stats.n_reused, 0);
        assert_eq!(first.stats.n_decoded, first.stats.n_prompt);
        let second = session.complete(&request("fn main() {\n    let x", "", StopMode::Line), Instant::now()).unwrap();
        // Everything up to the old prompt's end is reused; only " x" is new.
        assert_eq!(second.stats.n_reused, first.stats.n_prompt);
        assert_eq!(second.stats.n_decoded, 2);
    }

    #[test]
    fn typed_ahead_characters_that_match_generated_tokens_are_reused() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        let first = session.complete(&request("let x = ", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(first.text, "abc");
        // The user typed "ab": those tokens were generated and are in the cache.
        let second = session.complete(&request("let x = ab", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(second.stats.n_reused, first.stats.n_prompt + 1);
    }

    #[test]
    fn identical_prompt_decodes_one_token() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        let req = request("let x = ", "", StopMode::Line);
        session.complete(&req, Instant::now()).unwrap();
        let again = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(again.stats.n_decoded, 1);
        assert_eq!(again.text, "abc");
    }

    #[test]
    fn cancelled_request_returns_empty_and_keeps_the_cache_consistent() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        let req = request("let x = ", "", StopMode::Line);
        req.cancel.cancel();
        let completion = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(completion.stop, StopReason::Cancelled);
        assert!(completion.text.is_empty());
        assert_eq!(session.cached_tokens(), session.model.cache.as_slice());
    }

    #[test]
    fn deadline_in_block_mode_keeps_complete_lines() {
        let mut model = FakeModel::new("a();\nb();\nc(");
        model.eog_after = false;
        let mut session = Session::new(model, None);
        let mut req = request("fn f() {\n", "\n}", StopMode::Block);
        req.max_tokens = 12;
        let completion = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(completion.stop, StopReason::MaxTokens);
        assert_eq!(completion.text, "a();\nb();");
    }

    #[test]
    fn warm_up_generates_nothing() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        let mut req = request("let x = ", "", StopMode::Line);
        req.max_tokens = 0;
        let completion = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(completion.stop, StopReason::WarmedUp);
        assert_eq!(completion.stats.n_generated, 0);
        assert_eq!(session.cached_tokens().len(), completion.stats.n_prompt);
    }

    #[test]
    fn overlong_prompt_drops_oldest_prefix_in_steps() {
        let mut model = FakeModel::new("z");
        model.n_ctx = 600;
        let mut session = Session::new(model, None);
        let long = "a".repeat(1000);
        let completion = session.complete(&request(&long, "", StopMode::Line), Instant::now()).unwrap();
        assert!(completion.stats.n_prompt <= 600 - 64 - 8);
        assert_eq!(completion.text, "z");
    }

    proptest::proptest! {
        #[test]
        fn cache_mirrors_the_model_after_any_sequence_of_prompts(prompts in proptest::collection::vec("[ab\n]{0,12}", 1..8)) {
            let mut session = Session::new(FakeModel::new("ab"), None);
            for prefix in prompts {
                let completion = session.complete(&request(&prefix, "", StopMode::Line), Instant::now()).unwrap();
                proptest::prop_assert_eq!(session.cached_tokens(), session.model.cache.as_slice());
                proptest::prop_assert_eq!(completion.stats.n_reused + completion.stats.n_decoded, completion.stats.n_prompt);
            }
        }
    }
}
