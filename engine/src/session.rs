//! One model session: the tokens in the KV cache, longest-common-prefix reuse, and the generation loop with its
//! stop rules, cancellation and deadline. Generic over `LanguageModel` so that it is tested with a scripted fake.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::model_info::FimTemplate;
use crate::postprocess::StopMode;
use crate::postprocess::{self, StopContext};
use crate::prompt::{self, PromptInput};

/// Tokens are plain ids here; the backend maps them to its own type.
pub type Token = i32;

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

/// What the session needs from a model backend. The context holds `n_seq` sequences (KV slots) of `n_ctx`
/// positions each; every cache operation names its sequence.
pub trait LanguageModel {
    /// Tokenizes without adding BOS; `parse_special` turns marker text into special tokens.
    fn tokenize(&self, text: &str, parse_special: bool) -> Vec<Token>;
    fn bos(&self) -> Option<Token>;
    fn piece(&self, token: Token) -> Vec<u8>;
    fn is_end_of_generation(&self, token: Token) -> bool;
    /// Positions of one sequence.
    fn n_ctx(&self) -> usize;
    /// Sequences (KV slots) in the context.
    fn n_seq(&self) -> usize {
        1
    }
    /// Drops every position of sequence `seq` at or after `n_keep`. On error the sequence is empty (llama.cpp
    /// clears it when a partial removal fails).
    fn truncate_cache(&mut self, seq: usize, n_keep: usize) -> Result<(), EngineError>;
    /// Replaces sequence `dst` with a copy of sequence `src`. On error `dst` is empty.
    fn copy_cache(&mut self, src: usize, dst: usize) -> Result<(), EngineError>;
    /// Evaluates `tokens` in sequence `seq` at positions `first_pos..`, leaving the logits of the last one ready
    /// to sample.
    fn decode(&mut self, seq: usize, tokens: &[Token], first_pos: usize) -> Result<(), EngineError>;
    /// Whether `verify` is available (speculative decoding).
    fn can_verify(&self) -> bool {
        false
    }
    /// Evaluates `tokens` like `decode`, with logits for every one, and returns the greedy choice after each: the
    /// check of a draft in one batch. Only called with greedy sampling and when `can_verify`.
    fn verify(&mut self, seq: usize, tokens: &[Token], first_pos: usize) -> Result<Vec<Verified>, EngineError> {
        let _ = (seq, tokens, first_pos);
        Err(EngineError::Decode("this model cannot verify drafts".into()))
    }
    fn sample(&mut self) -> Token;
    /// The model's probability of `token` at the position `sample` just chose it for (softmax of the logits at
    /// temperature one); `None` when the backend cannot tell (the scripted model), which gates nothing.
    fn probability(&self, token: Token) -> Option<f32> {
        let _ = token;
        None
    }
    /// Chooses how `sample` picks tokens from now on.
    fn set_sampling(&mut self, sampling: Sampling);
    /// Tokens in the vocabulary (ids `0..n_vocab`, each with its `piece`); 0 when the backend cannot restrict a
    /// choice to some of them ([`LanguageModel::sample_among`]), which turns token healing off.
    fn n_vocab(&self) -> usize {
        0
    }
    /// The greedy choice among `allowed` at the position `sample` would choose for; `None` when the backend cannot
    /// restrict it.
    fn sample_among(&mut self, allowed: &[Token]) -> Option<Token> {
        let _ = allowed;
        None
    }
    /// The probability of `token` among `allowed` (softmax at temperature one, renormalised over them).
    fn probability_among(&self, token: Token, allowed: &[Token]) -> Option<f32> {
        let _ = (token, allowed);
        None
    }
}

/// The greedy choice at one position of a verified batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub token: Token,
    /// The choice leads the runner-up by a margin that the rounding of a batched evaluation cannot overturn. A
    /// batch is computed with other kernels than a single token (llama.cpp's CPU matrix code), so its logits
    /// differ in the last bits: where two tokens nearly tie, only a plain one-token evaluation decides, so that
    /// the output stays that of plain greedy decoding.
    pub sure: bool,
}

/// Prompt tokens are evaluated in chunks so that a cancel lands within one chunk; what was evaluated stays
/// cached, so a cancelled cold prompt still warms the cache for the next keystroke. A keystroke's chunks are sized
/// to end before its deadline ([`ChunkCost`]); before anything was measured a chunk is `PROMPT_CHUNK` tokens, and
/// never more than `MAX_PROMPT_CHUNK`.
const PROMPT_CHUNK: usize = 64;
const MAX_PROMPT_CHUNK: usize = 512;
/// The share of the time left before a deadline that a keystroke's prompt chunk is sized to: the estimate is an
/// average, and tokens later in a long prompt cost more (attention).
const DEADLINE_SHARE: f64 = 0.8;
/// Chunks the cost estimate is fitted to (the most recent).
const COST_SAMPLES: usize = 8;
/// Background work evaluates smaller chunks: a keystroke arriving meanwhile waits for at most one of them. A chunk
/// is sized from the measured cost per prompt token to take about `BACKGROUND_CHUNK_TIME` (a bigger model gets
/// fewer tokens per chunk), and holds between `MIN_PROMPT_CHUNK` and `BACKGROUND_PROMPT_CHUNK` tokens: a chunk
/// pays a fixed cost (~60 ms for the 0.5B on 2 cores, the weights read once), so a 30 ms target sized chunks of
/// one token, and a cold 300-token prompt took ~300 decodes in the background.
const BACKGROUND_PROMPT_CHUNK: usize = 32;
const BACKGROUND_CHUNK_TIME: Duration = Duration::from_millis(150);
/// The biggest prompt chunk of a request that finishes a cut keystroke (`CompletionRequest::resume`): the user
/// waits for it, and a keystroke arriving meanwhile waits for at most this one chunk (~400 ms for the 0.5B on 2
/// cores).
const RESUME_PROMPT_CHUNK: usize = 64;
/// The smallest chunk worth starting before a deadline (smaller ones cost more per token).
const MIN_PROMPT_CHUNK: usize = 16;
/// A slot is filled from another one (a copy of its sequence) when that saves at least this many prompt tokens.
const MIN_COPY_GAIN: usize = 32;
/// Speculative decoding: the longest and shortest draft, and the n-gram sizes looked up (longest first).
const MAX_DRAFT: usize = 16;
const MIN_DRAFT: usize = 2;
/// While drafting costs more per token than plain decoding, it is tried again after this many chances.
const DRAFT_RETRY_AFTER: u32 = 16;
const NGRAM_MAX: usize = 4;
const NGRAM_MIN: usize = 2;
/// Token healing takes back at most this many prompt tokens, and at most this many bytes of them.
const MAX_HEAL_TOKENS: usize = 3;
const MAX_HEAL_BYTES: usize = 32;

/// Whether prompt-lookup drafts pay on this machine and model, from what they cost: the time per generated token
/// of plain decoding and of verified drafts (moving averages, in microseconds). A draft is verified in one batch,
/// and a batch of n tokens costs far more than one token where a few cores are already busy with one (measured
/// on 2 cores: 9 tokens with their logits cost 3.7 single steps for Gemma 3 270M, 8.8 for Qwen2.5-Coder 1.5B), so
/// drafting stops while it is the slower way, is tried again now and then, and a draft's length follows how much
/// of the last one the model accepted.
#[derive(Debug, Clone, Copy)]
struct DraftPolicy {
    plain_us: Option<f64>,
    drafted_us: Option<f64>,
    /// Drafting chances passed up since drafting last ran.
    skipped: u32,
    /// The next draft's length.
    len: usize,
}

impl DraftPolicy {
    fn new() -> Self {
        DraftPolicy { plain_us: None, drafted_us: None, skipped: 0, len: MAX_DRAFT / 2 }
    }

    /// Whether to verify a draft now (a draft was found).
    fn should_draft(&mut self) -> bool {
        match (self.plain_us, self.drafted_us) {
            (Some(plain), Some(drafted)) if drafted > plain => {
                self.skipped += 1;
                if self.skipped >= DRAFT_RETRY_AFTER {
                    self.skipped = 0;
                    true
                } else {
                    false
                }
            }
            _ => true,
        }
    }

    fn average(old: Option<f64>, new: f64) -> Option<f64> {
        Some(old.map_or(new, |old| (old * 3.0 + new) / 4.0))
    }

    fn record_plain(&mut self, elapsed: Duration) {
        self.plain_us = Self::average(self.plain_us, elapsed.as_secs_f64() * 1e6);
    }

    /// A verified draft: the batch took `elapsed` and put `1 + accepted` tokens of the answer in the cache.
    fn record_draft(&mut self, elapsed: Duration, drafted: usize, accepted: usize) {
        let per_token = elapsed.as_secs_f64() * 1e6 / (1 + accepted) as f64;
        self.drafted_us = Self::average(self.drafted_us, per_token);
        if accepted == drafted {
            self.len = (self.len * 2).min(MAX_DRAFT);
        } else if accepted * 2 < drafted {
            self.len = (self.len / 2).max(MIN_DRAFT);
        }
    }
}

/// What evaluating a chunk of prompt tokens costs on this machine: a fixed part per chunk (the weights are read
/// once per batch) plus a part per token, fitted (least squares) to the chunks measured lately. Measured with
/// llama-server on 2 cores, Qwen2.5-Coder 0.5B: 16 tokens 137 ms, 32 211 ms, 64 370 ms, 128 748 ms (~60 ms + 5.5 ms a
/// token); Gemma 3 270M 54, 88, 144, 269 ms. A cost per token alone, measured on small chunks, rated small chunks
/// dear and so sized the next ones small again: a cold 550-token prompt took ~34 keystrokes of 16 tokens each.
#[derive(Debug, Clone, Default)]
struct ChunkCost {
    /// (tokens, microseconds) of the most recent chunks, oldest first.
    samples: std::collections::VecDeque<(f64, f64)>,
}

impl ChunkCost {
    fn record(&mut self, n_tokens: usize, elapsed: Duration) {
        if self.samples.len() == COST_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back((n_tokens as f64, elapsed.as_secs_f64() * 1e6));
    }

    /// (fixed µs per chunk, µs per token), or `None` before any chunk was measured.
    fn fit(&self) -> Option<(f64, f64)> {
        if self.samples.is_empty() {
            return None;
        }
        let count = self.samples.len() as f64;
        let mean_n = self.samples.iter().map(|(n, _)| n).sum::<f64>() / count;
        let mean_us = self.samples.iter().map(|(_, us)| us).sum::<f64>() / count;
        let spread: f64 = self.samples.iter().map(|(n, _)| (n - mean_n).powi(2)).sum();
        let covariance: f64 = self.samples.iter().map(|(n, us)| (n - mean_n) * (us - mean_us)).sum();
        if spread > 0.0 {
            let per_token = covariance / spread;
            let fixed = mean_us - per_token * mean_n;
            if per_token > 0.0 && fixed >= 0.0 {
                return Some((fixed, per_token));
            }
        }
        // Chunks of one size only, or a fit that noise bent out of shape: all of the cost per token.
        let tokens: f64 = self.samples.iter().map(|(n, _)| n).sum();
        Some((0.0, mean_us * count / tokens.max(1.0)))
    }

    /// The most tokens a chunk may hold to end within `budget`; `None` before anything was measured. At most twice
    /// the biggest chunk measured: the fitted line is not trusted far beyond its samples.
    fn fits(&self, budget: Duration) -> Option<usize> {
        let (fixed, per_token) = self.fit()?;
        let tokens = (budget.as_secs_f64() * 1e6 - fixed) / per_token.max(1.0);
        let biggest = self.samples.iter().map(|(n, _)| *n).fold(0.0, f64::max);
        Some(if tokens.is_finite() && tokens > 0.0 { tokens.min(2.0 * biggest) as usize } else { 0 })
    }
}

/// What one generation step (sampling a token and evaluating it) costs here: the median of the last few plain
/// steps, robust to one step slowed by another process. A step that would end past a keystroke's deadline is not
/// started: the answer then comes at the deadline instead of up to a step after it (Qwen2.5-Coder 0.5B: ~32 ms
/// a step on 2 cores), and typing along continues the generation from there.
#[derive(Debug, Clone, Default)]
struct StepCost {
    recent: std::collections::VecDeque<Duration>,
}

impl StepCost {
    fn record(&mut self, elapsed: Duration) {
        if self.recent.len() == COST_SAMPLES {
            self.recent.pop_front();
        }
        self.recent.push_back(elapsed);
    }

    fn median(&self) -> Option<Duration> {
        let mut sorted: Vec<Duration> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied()
    }
}

/// One KV sequence: the tokens it holds (exactly what the model's sequence holds), whose it is, when it was used.
#[derive(Debug, Clone, Default)]
struct Slot {
    tokens: Vec<Token>,
    /// The document lane it belongs to; `None` for the task slot or a slot never used.
    lane: Option<u64>,
    last_used: u64,
    /// The last ghost-text generation run in this slot, for typing along it.
    continuation: Option<Continuation>,
}

/// A ghost-text generation and the tokens it ran on, kept so that typing along it continues it. When the user
/// types the characters the model generated, the new prompt is the old one plus those characters: it is taken
/// as the old prompt's tokens plus the generated ones (already in the KV cache), and generation goes on after
/// them. Tokenizing the new prompt afresh would split the typed characters differently from the model's own
/// tokens (`x.len` typed over a generated `.len()` is `.`, `len`, not `.len`), so the common prefix would end before
/// them and the rest of the line would be generated again on every keystroke; with a first line longer than a
/// keystroke's deadline allows, the answer never came. The tokens are a hint, not a record of the cache: the
/// usual common-prefix reuse decides what is evaluated.
#[derive(Debug, Clone)]
struct Continuation {
    lane: u64,
    /// The rendered prompt the generation followed.
    rendered: String,
    /// The prompt's tokens (BOS included) followed by the generated tokens counted in `ends`.
    tokens: Vec<Token>,
    /// The generated bytes.
    bytes: Vec<u8>,
    /// For each generated token: where its bytes end in `bytes`, and the model's probability of it.
    ends: Vec<(usize, f64)>,
    /// The first bytes of `bytes` that were prompt text, taken back from the prompt by token healing.
    healed: usize,
}

/// A generation's text and how likely the model rates it: the product of its tokens' probabilities, and after
/// each line (the line break's byte in the text, the probability of the text up to and including it).
struct Rating {
    sequence_prob: f64,
    line_ends: Vec<(usize, f64)>,
}

impl Rating {
    fn new() -> Self {
        Rating { sequence_prob: 1.0, line_ends: Vec::new() }
    }

    /// Takes in one more token of `text` (all of the text so far) with its probability.
    fn add(&mut self, text: &str, prob: f64) {
        self.sequence_prob *= prob;
        let rated_up_to = self.line_ends.last().map_or(0, |(at, _)| at + 1);
        for (idx, _) in text[rated_up_to.min(text.len())..].match_indices('\n') {
            let at = rated_up_to + idx;
            // Leading line breaks are not a line of the suggestion.
            if !text[..at].trim().is_empty() {
                self.line_ends.push((at, self.sequence_prob));
            }
        }
    }
}

pub struct Session<M> {
    pub model: M,
    pub fim: Option<FimTemplate>,
    /// Prompt-lookup speculative decoding for greedy requests.
    pub speculative: bool,
    slots: Vec<Slot>,
    clock: u64,
    /// What prompt chunks cost here (measured), to size chunks to deadlines.
    prompt_cost: ChunkCost,
    drafts: DraftPolicy,
    step_cost: StepCost,
    /// (sequence, length) when the model's logits are those after that sequence's last token: the model's last
    /// evaluation ended there and the sequence has not changed since. A request whose prompt is exactly that
    /// sequence samples from them without evaluating its last token again (typing along a generation).
    logits_at: Option<(usize, usize)>,
    /// The vocabulary by piece, for token healing: built on first use; `None` inside when the model has none.
    vocab: Option<Option<VocabIndex>>,
}

impl<M: LanguageModel> Session<M> {
    pub fn new(model: M, fim: Option<FimTemplate>) -> Self {
        let slots = vec![Slot::default(); model.n_seq().max(1)];
        Session {
            model,
            fim,
            speculative: false,
            slots,
            clock: 0,
            prompt_cost: ChunkCost::default(),
            drafts: DraftPolicy::new(),
            step_cost: StepCost::default(),
            logits_at: None,
            vocab: None,
        }
    }

    /// Prompt tokens per background chunk: what fits `BACKGROUND_CHUNK_TIME` at the measured cost per token.
    fn background_chunk(&self) -> usize {
        self.prompt_cost
            .fits(BACKGROUND_CHUNK_TIME)
            .unwrap_or(BACKGROUND_PROMPT_CHUNK)
            .clamp(MIN_PROMPT_CHUNK, BACKGROUND_PROMPT_CHUNK)
    }

    /// Tokens in the KV cache of slot 0, in order (the single-slot view).
    pub fn cached_tokens(&self) -> &[Token] {
        &self.slots[0].tokens
    }

    /// Tokens each slot holds, in slot order.
    pub fn slot_tokens(&self) -> Vec<&[Token]> {
        self.slots.iter().map(|slot| slot.tokens.as_slice()).collect()
    }

    /// Forgets every slot (after a failure left the cache in an unknown state, or with reuse off).
    pub fn reset(&mut self) {
        for seq in 0..self.slots.len() {
            // A whole-sequence removal cannot fail; the record is empty either way.
            let _ = self.model.truncate_cache(seq, 0);
            self.slots[seq] = Slot::default();
        }
        self.logits_at = None;
    }

    /// Sequence `seq` is about to change other than by an evaluation: the logits after it no longer are.
    fn forget_logits_of(&mut self, seq: usize) {
        if self.logits_at.is_some_and(|(at_seq, _)| at_seq == seq) {
            self.logits_at = None;
        }
    }

    fn reset_slot(&mut self, seq: usize) {
        let _ = self.model.truncate_cache(seq, 0);
        self.slots[seq].tokens.clear();
        self.logits_at = None;
    }

    /// Sets slot `seq` to hold its first `n_keep` tokens; when the model fails, the slot is empty.
    fn truncate_slot(&mut self, seq: usize, n_keep: usize) -> Result<(), EngineError> {
        if n_keep >= self.slots[seq].tokens.len() {
            return Ok(());
        }
        self.forget_logits_of(seq);
        match self.model.truncate_cache(seq, n_keep) {
            Ok(()) => {
                self.slots[seq].tokens.truncate(n_keep);
                Ok(())
            }
            Err(error) => {
                self.slots[seq].tokens.clear();
                Err(error)
            }
        }
    }

    /// The slot for a request: tasks have the last one (when there are two or more); a document keeps its lane's
    /// slot, else takes the least recently used document slot.
    fn pick_slot(&self, request: &CompletionRequest) -> usize {
        let n = self.slots.len();
        if n == 1 {
            return 0;
        }
        if request.raw_prompt {
            return n - 1;
        }
        let documents = 0..n - 1;
        if let Some(seq) = documents.clone().find(|seq| self.slots[*seq].lane == Some(request.lane)) {
            return seq;
        }
        documents.min_by_key(|seq| self.slots[*seq].last_used).unwrap_or(0)
    }

    /// Fills slot `seq` from the slot sharing the longest prefix with `tokens` (another file's prompt with the
    /// same header, the document before a task), when that saves enough prompt evaluation. Returns the tokens
    /// gained.
    fn fill_from_best(&mut self, seq: usize, tokens: &[Token]) -> usize {
        let own = common_prefix_len(&self.slots[seq].tokens, tokens);
        let best = (0..self.slots.len())
            .filter(|other| *other != seq)
            .map(|other| (common_prefix_len(&self.slots[other].tokens, tokens), other))
            .max();
        let Some((shared, donor)) = best.filter(|(shared, _)| *shared >= own + MIN_COPY_GAIN) else {
            return 0;
        };
        self.forget_logits_of(seq);
        match self.model.copy_cache(donor, seq) {
            Ok(()) => {
                self.slots[seq].tokens = self.slots[donor].tokens.clone();
                shared - own
            }
            Err(error) => {
                tracing::warn!(%error, "copying a KV slot failed; the slot starts empty");
                self.slots[seq].tokens.clear();
                0
            }
        }
    }

    pub fn complete(&mut self, request: &CompletionRequest, queued_at: Instant) -> Result<Completion, EngineError> {
        let started = Instant::now();
        let mut stats = CompletionStats { queue_ms: millis(started - queued_at), ..Default::default() };
        let rendered = self.render(request);
        let seq = self.pick_slot(request);
        self.clock += 1;
        let slot = &mut self.slots[seq];
        slot.last_used = self.clock;
        slot.lane = (!request.raw_prompt).then_some(request.lane);
        stats.slot = seq;
        // Ghost text typed along the lane's last generation continues it; otherwise the prompt is tokenized.
        let continues = request.sampling.temperature <= 0.0 && !request.raw_prompt;
        let carried = slot.continuation.take().filter(|_| continues).and_then(|previous| {
            let typed = rendered.strip_prefix(previous.rendered.as_str())?;
            let fits = previous.tokens.len() + request.max_tokens + 8 <= self.model.n_ctx();
            let generated = previous.bytes.get(previous.healed..)?;
            let skip = previous.healed + typed.len();
            (previous.lane == request.lane && fits && generated.starts_with(typed.as_bytes()))
                .then_some((previous, skip))
        });
        // The bytes the first generated tokens must start with: the end of the prompt, taken back (token healing).
        let mut heal: Vec<u8> = Vec::new();
        let (mut continuation, skip) = match carried {
            Some((previous, skip)) => (previous, skip),
            None => {
                let mut tokens = self.prompt_tokens(&rendered, request.max_tokens);
                // A warm-up heals too: it brings exactly the tokens the next request in this state evaluates
                // into the cache (unhealed, the next request would type along it and skip healing).
                if continues && request.heal {
                    let typed = prompt::split_at_line_start(&request.prefix).1;
                    heal = self.take_back_for_healing(&mut tokens, typed.as_bytes());
                }
                let healed = heal.len();
                let continuation =
                    Continuation { lane: request.lane, rendered, tokens, bytes: Vec::new(), ends: Vec::new(), healed };
                (continuation, healed)
            }
        };
        stats.n_carried = continuation.ends.len();
        let tokens = continuation.tokens.clone();
        stats.n_prompt = tokens.len();
        if continues {
            // Kept through the prompt's evaluation: a keystroke cancelling it still finds the tokens.
            self.slots[seq].continuation = Some(continuation.clone());
        }
        stats.n_copied = self.fill_from_best(seq, &tokens);

        let n_common = common_prefix_len(&self.slots[seq].tokens, &tokens);
        // At least one token is decoded so that fresh logits exist for the first sample, unless the model's
        // logits are those after exactly this prompt.
        let logits_fresh = n_common == tokens.len()
            && self.slots[seq].tokens.len() == tokens.len()
            && self.logits_at == Some((seq, tokens.len()));
        let mut n_keep = if logits_fresh { tokens.len() } else { n_common.min(tokens.len().saturating_sub(1)) };
        if let Err(error) = self.truncate_slot(seq, n_keep) {
            // The model emptied the sequence: the record followed, and this prompt is evaluated cold.
            tracing::warn!(%error, "KV cache truncation failed; evaluating the prompt from the start");
            n_keep = 0;
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
            let fits = self.prompt_cost.fits(left.mul_f64(DEADLINE_SHARE)).unwrap_or(PROMPT_CHUNK);
            let least = MIN_PROMPT_CHUNK.min(tokens.len() - next);
            // A request that has evaluated nothing yet evaluates one small chunk all the same: the estimate may be
            // stale (the first chunk after loading a model pays for buffer set-up), and only a new measurement
            // corrects it. Without this, one slow chunk stalled every later keystroke at zero progress.
            if left.is_zero() || (fits < least && stats.n_decoded > 0) {
                return Ok(self.finish(String::new(), StopReason::Deadline, stats, started));
            }
            let chunk_cap = match (request.background, request.resume) {
                (true, true) => RESUME_PROMPT_CHUNK,
                (true, false) => self.background_chunk(),
                (false, _) => MAX_PROMPT_CHUNK,
            };
            let chunk = &tokens[next..(next + fits.max(least).min(chunk_cap)).min(tokens.len())];
            let first_pos = self.slots[seq].tokens.len();
            let chunk_started = Instant::now();
            if let Err(error) = self.model.decode(seq, chunk, first_pos) {
                self.reset_slot(seq);
                return Err(error);
            }
            // A window of recent chunks: one slow chunk (another process took the core) does not stall the next ones
            // for long. Chunks of a few tokens cost less than the line through bigger ones says (a single token:
            // 27 ms for the 0.5B against the line's 65), so they are left out of the fit.
            if chunk.len() >= MIN_PROMPT_CHUNK {
                self.prompt_cost.record(chunk.len(), chunk_started.elapsed());
            }
            self.slots[seq].tokens.extend_from_slice(chunk);
            self.logits_at = Some((seq, self.slots[seq].tokens.len()));
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
        let stop_strings: Vec<String> = model_stops.iter().chain(&request.stop_strings).cloned().collect();
        self.model.set_sampling(request.sampling);
        // Greedy requests are decoded speculatively: the output is the same token for token.
        let speculate =
            (self.speculative || request.speculate) && request.sampling.temperature <= 0.0 && self.model.can_verify();
        let n_prompt_tokens = tokens.len();
        let n_ctx = self.model.n_ctx();
        // Tokens greedy decoding produces next, already known from a verified draft: `ahead` are in the KV cache
        // (accepted draft tokens), `pending` (the model's own choice after them) is not; `redecode` is an accepted
        // token taken out of the cache again, to be evaluated alone (the choice after it was a near tie).
        let mut ahead: std::collections::VecDeque<Token> = std::collections::VecDeque::new();
        let mut pending: Option<Token> = None;
        let mut redecode: Option<Token> = None;
        // The generated bytes (carried over ones included) and the answer: what follows the typed ones.
        let mut bytes: Vec<u8> = std::mem::take(&mut continuation.bytes);
        // (Healed bytes count as typed: a first token shorter than them shows nothing yet.)
        let visible =
            |bytes: &[u8]| String::from_utf8_lossy(valid_utf8_prefix(bytes.get(skip..).unwrap_or(&[]))).into_owned();
        let mut text = String::new();
        // Ghost text is rated by the model's own probabilities (task prompts are sampled and checked otherwise).
        let rate = !request.raw_prompt;
        let mut rating = Rating::new();
        // Carried tokens that end past the typed characters are part of the answer (a token the typed ones end
        // inside counts whole).
        for (end, prob) in continuation.ends.iter().filter(|(end, _)| *end > skip) {
            rating.add(&visible(&bytes[..*end]), *prob);
        }
        let check_stops = |text: &str| {
            let by_string = stop_strings.iter().filter_map(|stop| text.find(stop.as_str())).min();
            by_string.or_else(|| postprocess::stop_at(text, &stop_context))
        };
        let generating = Instant::now();
        let carried_stop = (!bytes.is_empty()).then(|| visible(&bytes)).and_then(|carried| {
            text = carried;
            check_stops(&text)
        });
        if let Some(cut) = carried_stop {
            text.truncate(cut);
        }
        let stop = loop {
            if carried_stop.is_some() {
                break StopReason::StopRule;
            }
            if request.cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            if stats.n_generated >= request.max_tokens {
                break StopReason::MaxTokens;
            }
            if Instant::now() >= request.deadline {
                break StopReason::Deadline;
            }
            let step_started = Instant::now();
            // (token, in the cache already, may start a draft)
            let mut prob = 1.0;
            let (token, in_cache, may_draft) = if let Some(token) = ahead.pop_front() {
                (token, true, false)
            } else if let Some(token) = redecode.take() {
                (token, false, false)
            } else if let Some(token) = pending.take() {
                (token, false, true)
            } else if let Some((token, allowed)) = self.healing_choice(&heal) {
                if rate {
                    prob = f64::from(self.model.probability_among(token, &allowed).unwrap_or(1.0));
                }
                let piece_len = self.model.piece(token).len();
                heal.drain(..piece_len.min(heal.len()));
                // A draft is the model's own choice: not while the healed text still constrains the next token.
                (token, false, heal.is_empty())
            } else {
                let token = self.model.sample();
                // Tokens a verified draft gave are not rated (speculation is off by default).
                if rate {
                    prob = f64::from(self.model.probability(token).unwrap_or(1.0));
                }
                (token, false, true)
            };
            if stats.first_token_ms == 0 {
                stats.first_token_ms = millis(started.elapsed()).max(1);
            }
            if self.model.is_end_of_generation(token) {
                break StopReason::EndOfGeneration;
            }
            bytes.extend_from_slice(&self.model.piece(token));
            text = visible(&bytes);
            rating.add(&text, prob);
            if let Some(cut) = check_stops(&text) {
                text.truncate(cut);
                break StopReason::StopRule;
            }
            // The length the cache has in plain decoding at this point.
            let pos = n_prompt_tokens + stats.n_generated;
            if pos + 1 >= n_ctx {
                break StopReason::ContextFull;
            }
            // Sampled, but evaluating it would end past the deadline: it is left for the next request (the
            // logits stay, so a request typing along samples it again without evaluating anything).
            if !in_cache && self.step_cost.median().is_some_and(|step| Instant::now() + step > request.deadline) {
                break StopReason::Deadline;
            }
            if !in_cache {
                let room = n_ctx.saturating_sub(pos + 2).min(request.max_tokens.saturating_sub(stats.n_generated + 1));
                let mut draft = if speculate && may_draft {
                    draft_tokens(&self.slots[seq].tokens, token, room.min(self.drafts.len))
                } else {
                    Vec::new()
                };
                if !draft.is_empty() && !self.drafts.should_draft() {
                    draft.clear();
                }
                // Timed for the draft policy.
                let decode_started = speculate.then(Instant::now);
                if draft.is_empty() {
                    if let Err(error) = self.model.decode(seq, &[token], pos) {
                        self.reset_slot(seq);
                        return Err(error);
                    }
                    self.slots[seq].tokens.push(token);
                    self.logits_at = Some((seq, self.slots[seq].tokens.len()));
                    self.step_cost.record(step_started.elapsed());
                    if let Some(decode_started) = decode_started {
                        self.drafts.record_plain(decode_started.elapsed());
                    }
                } else {
                    let mut batch = Vec::with_capacity(draft.len() + 1);
                    batch.push(token);
                    batch.extend_from_slice(&draft);
                    self.logits_at = None;
                    let predicted = match self.model.verify(seq, &batch, pos) {
                        Ok(predicted) => predicted,
                        Err(error) => {
                            self.reset_slot(seq);
                            return Err(error);
                        }
                    };
                    let n_accepted = draft
                        .iter()
                        .zip(&predicted)
                        .take_while(|(drafted, said)| said.sure && **drafted == said.token)
                        .count();
                    stats.n_drafted += draft.len();
                    stats.n_accepted += n_accepted;
                    if let Some(decode_started) = decode_started {
                        self.drafts.record_draft(decode_started.elapsed(), draft.len(), n_accepted);
                    }
                    self.slots[seq].tokens.extend_from_slice(&batch);
                    // The rejected tail leaves the cache; the model's choice after the accepted prefix comes next.
                    match predicted.get(n_accepted).filter(|next| next.sure) {
                        Some(next) => {
                            self.truncate_slot(seq, pos + 1 + n_accepted)?;
                            ahead.extend(&draft[..n_accepted]);
                            pending = Some(next.token);
                        }
                        // A near tie after the last accepted token: that token is evaluated again, alone, and
                        // its logits decide as in plain decoding.
                        None => {
                            self.truncate_slot(seq, pos + n_accepted)?;
                            if n_accepted == 0 {
                                if let Err(error) = self.model.decode(seq, &[token], pos) {
                                    self.reset_slot(seq);
                                    return Err(error);
                                }
                                self.slots[seq].tokens.push(token);
                                self.logits_at = Some((seq, self.slots[seq].tokens.len()));
                            } else {
                                ahead.extend(&draft[..n_accepted - 1]);
                                redecode = Some(draft[n_accepted - 1]);
                            }
                        }
                    }
                }
            }
            stats.n_generated += 1;
            continuation.ends.push((bytes.len(), prob));
        };
        // Accepted draft tokens past the stop were never generated: the cache holds what plain decoding holds.
        self.truncate_slot(seq, n_prompt_tokens + stats.n_generated)?;
        if continues {
            continuation.tokens.clone_from(&self.slots[seq].tokens);
            bytes.truncate(continuation.ends.last().map_or(0, |(end, _)| *end));
            continuation.bytes = bytes;
            self.slots[seq].continuation = Some(continuation);
        }
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
        // A first line the deadline cut is not an answer: the model had not finished it, so neither the checks nor
        // the user can tell whether it is right (measured: most cut lines were wrong or a prefix of the right
        // one, and typing along kept showing the stub). The caller finishes it in the background instead.
        if stop == StopReason::Deadline && request.mode != StopMode::Free && !text.contains('\n') {
            text.clear();
        }
        // Rated on the model's own text, before post-processing changes its lengths.
        let Rating { sequence_prob, line_ends } = rating;
        let first_line_prob = line_ends.first().map_or(sequence_prob, |(_, prob)| *prob);
        stats.confidence_permille = (first_line_prob * 1000.0).round().clamp(0.0, 1000.0) as u32;
        let min = f64::from(request.min_confidence);
        if !text.trim().is_empty() && first_line_prob < min {
            tracing::debug!(confidence = first_line_prob, min, "suggestion below confidence");
            stats.below_confidence = true;
            text.clear();
        } else if sequence_prob < min {
            // Later lines are kept while the whole suggestion up to them stays as likely as the threshold asks.
            if let Some((at, _)) = line_ends.iter().take_while(|(_, prob)| *prob >= min).last() {
                text.truncate(*at);
            }
        }
        let text = if request.mode == StopMode::Free {
            text
        } else {
            postprocess::finalize(&text, &stop_context).unwrap_or_default()
        };
        Ok(self.finish(text, stop, stats, started))
    }

    /// Token healing: a prompt that ends inside a word ends with tokens the model would not have chosen there
    /// (`swit` is `sw`, `it`; the model's own `switch` is one token), and after such a split it continues
    /// badly (measured: `swit` → `c (type) {`). The prompt's last tokens that lie on the cursor's line — the last
    /// one, and before it those of the same word — are taken off `tokens`, and the first generated tokens are
    /// restricted to those consistent with their bytes, which are returned. Nothing is taken back when the model
    /// cannot restrict its choice, or the tokens do not spell the end of `typed`.
    fn take_back_for_healing(&mut self, tokens: &mut Vec<Token>, typed: &[u8]) -> Vec<u8> {
        if typed.is_empty() || self.model.n_vocab() == 0 {
            return Vec::new();
        }
        let n_tail = tokens.len().saturating_sub(1).min(MAX_HEAL_TOKENS);
        let pieces: Vec<Vec<u8>> =
            tokens[tokens.len() - n_tail..].iter().map(|token| self.model.piece(*token)).collect();
        let (n_heal, healed) = heal_span(&pieces, typed);
        if n_heal == 0 || self.vocab_index().is_none() {
            return Vec::new();
        }
        tokens.truncate(tokens.len() - n_heal);
        healed
    }

    /// While healed bytes are left: the greedy choice among the tokens consistent with them, and those tokens.
    fn healing_choice(&mut self, heal: &[u8]) -> Option<(Token, Vec<Token>)> {
        if heal.is_empty() {
            return None;
        }
        let allowed = self.vocab_index()?.consistent_with(heal);
        let token = self.model.sample_among(&allowed)?;
        Some((token, allowed))
    }

    /// Builds the vocabulary index token healing uses, if it is not built yet (else it is built on first use).
    pub fn index_vocabulary(&mut self) {
        let _ = self.vocab_index();
    }

    fn vocab_index(&mut self) -> Option<&VocabIndex> {
        if self.vocab.is_none() {
            let started = Instant::now();
            let index = VocabIndex::build(&self.model);
            if let Some(index) = &index {
                tracing::debug!(n_tokens = index.sorted.len(), ms = millis(started.elapsed()), "vocabulary indexed");
            }
            self.vocab = Some(index);
        }
        self.vocab.as_ref().and_then(Option::as_ref)
    }

    fn finish(&self, text: String, stop: StopReason, mut stats: CompletionStats, started: Instant) -> Completion {
        stats.total_ms = millis(started.elapsed());
        Completion { text, stop, stats }
    }

    /// The prompt as text: the model's FIM layout of the request, or a task's prompt as it is.
    fn render(&self, request: &CompletionRequest) -> String {
        if request.raw_prompt {
            request.prefix.clone()
        } else {
            prompt::render(
                self.fim.as_ref(),
                PromptInput { header: &request.header, prefix: &request.prefix, suffix: &request.suffix },
            )
        }
    }

    /// BOS, then the rendered prompt; when it does not fit the context, the oldest prefix tokens go, in
    /// 256-token steps so that the start stays put while the user types.
    fn prompt_tokens(&self, rendered: &str, max_tokens: usize) -> Vec<Token> {
        let mut tokens: Vec<Token> = self.model.bos().into_iter().collect();
        let n_head = tokens.len();
        tokens.extend(self.model.tokenize(rendered, self.fim.is_some()));
        let budget = self.model.n_ctx().saturating_sub(max_tokens + 8).max(16);
        if tokens.len() > budget {
            let excess = tokens.len() - budget;
            let n_drop = excess.div_ceil(256) * 256;
            let n_drop = n_drop.min(tokens.len() - n_head - 1);
            tokens.drain(n_head..n_head + n_drop);
        }
        tokens
    }
}

/// Every token's piece, sorted by its bytes, so that the tokens starting with some bytes are one range of it.
/// Tokens without text (control tokens) and end-of-generation tokens are left out.
struct VocabIndex {
    sorted: Vec<(Vec<u8>, Token)>,
}

impl VocabIndex {
    fn build(model: &impl LanguageModel) -> Option<VocabIndex> {
        let n_vocab = i32::try_from(model.n_vocab()).ok().filter(|n| *n > 0)?;
        let pieces =
            (0..n_vocab).filter(|token| !model.is_end_of_generation(*token)).map(|token| (model.piece(token), token));
        Some(VocabIndex::from_pieces(pieces))
    }

    fn from_pieces(pieces: impl Iterator<Item = (Vec<u8>, Token)>) -> VocabIndex {
        let mut sorted: Vec<(Vec<u8>, Token)> = pieces.filter(|(piece, _)| !piece.is_empty()).collect();
        sorted.sort_unstable();
        VocabIndex { sorted }
    }

    /// The tokens a generation that must start with `bytes` may choose next: those whose piece starts with
    /// `bytes`, and those whose piece is a shorter start of it (more tokens then follow).
    fn consistent_with(&self, bytes: &[u8]) -> Vec<Token> {
        let from = self.sorted.partition_point(|(piece, _)| piece.as_slice() < bytes);
        let mut allowed: Vec<Token> = self.sorted[from..]
            .iter()
            .take_while(|(piece, _)| piece.starts_with(bytes))
            .map(|(_, token)| *token)
            .collect();
        for len in 1..bytes.len() {
            let start = &bytes[..len];
            let at = self.sorted.partition_point(|(piece, _)| piece.as_slice() < start);
            allowed.extend(self.sorted[at..].iter().take_while(|(piece, _)| piece == start).map(|(_, token)| *token));
        }
        allowed
    }
}

/// Which of a prompt's last tokens token healing takes back, given their pieces (in prompt order) and the text
/// typed on the cursor's line (the prompt's end): the last token, and before it those of the same word, all within
/// the typed text. Returns how many, and their bytes; none when the pieces do not spell the end of `typed`.
fn heal_span(pieces: &[Vec<u8>], typed: &[u8]) -> (usize, Vec<u8>) {
    let is_word = |byte: &u8| byte.is_ascii_alphanumeric() || *byte == b'_' || *byte >= 0x80;
    let mut healed: Vec<u8> = Vec::new();
    let mut n_heal = 0;
    for piece in pieces.iter().rev() {
        let longer = piece.len() + healed.len();
        let same_word = healed.is_empty()
            || (healed.first().is_some_and(is_word) && !piece.is_empty() && piece.iter().all(is_word));
        if piece.is_empty() || longer > typed.len() || longer > MAX_HEAL_BYTES || !same_word {
            break;
        }
        healed.splice(0..0, piece.iter().copied());
        n_heal += 1;
    }
    if !typed.ends_with(&healed) {
        return (0, Vec::new());
    }
    (n_heal, healed)
}

/// Prompt-lookup drafting: the tokens that followed the latest earlier occurrence of the last n-gram of
/// `history` + `last` (n from `NGRAM_MAX` down to `NGRAM_MIN`), at most `max`. Code repeats names and lines: the
/// prompt (document, suffix, other files) and what was generated so far are where a continuation is found.
pub fn draft_tokens(history: &[Token], last: Token, max: usize) -> Vec<Token> {
    if max == 0 {
        return Vec::new();
    }
    let len = history.len() + 1;
    let at = |idx: usize| if idx == history.len() { last } else { history[idx] };
    for n in (NGRAM_MIN..=NGRAM_MAX).rev() {
        if len <= n {
            continue;
        }
        let gram_start = len - n;
        // Candidate starts, latest first; a match must be followed by at least one token.
        for start in (0..gram_start).rev() {
            if (0..n).all(|k| at(start + k) == at(gram_start + k)) {
                let from = start + n;
                let to = (from + max).min(len);
                if from < to {
                    return (from..to).map(at).collect();
                }
            }
        }
    }
    Vec::new()
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
    //! A scripted model: one token per character, a KV cache per sequence. After the prompt it "generates" a
    //! fixed continuation, or with a `rule` the token the rule gives for the sequence so far.

    use super::*;

    pub struct FakeModel {
        pub continuation: String,
        /// The tokens of each sequence.
        pub caches: Vec<Vec<Token>>,
        prompt_lens: Vec<usize>,
        last_seq: usize,
        pub n_ctx: usize,
        pub decoded_total: usize,
        pub eog_after: bool,
        /// The next truncation fails the way llama.cpp's can: the sequence is cleared and an error returned.
        pub fail_truncate: bool,
        /// The next copy between sequences fails (the destination ends up empty).
        pub fail_copy: bool,
        /// The next decode fails after evaluating half of its tokens.
        pub fail_decode: bool,
        /// Greedy choice as a function of the sequence so far (instead of `continuation`).
        pub rule: Option<fn(&[Token]) -> Token>,
        pub verifies: bool,
        /// Verification calls every position whose index is a multiple of this a near tie (0: none).
        pub unsure_every: usize,
        /// The probability the model gives each sampled token (`None`: it cannot tell).
        pub token_probability: Option<f32>,
        /// Time each generated token's evaluation takes (a slow model, to meet deadlines mid-line).
        pub token_time: Duration,
        /// (sequence, length) the logits belong to, as llama.cpp's: the last evaluation's, until that sequence is
        /// cut below it or overwritten. Sampling asserts that they are those after the sequence's last token.
        logits: Option<(usize, usize)>,
        /// It can restrict its choice to some tokens (token healing), over a vocabulary of the ASCII characters.
        pub heals: bool,
    }

    pub const EOG: Token = -2;
    pub const BOS: Token = -1;

    impl FakeModel {
        pub fn new(continuation: &str) -> Self {
            FakeModel::with_slots(continuation, 1)
        }

        pub fn with_slots(continuation: &str, n_seq: usize) -> Self {
            FakeModel {
                continuation: continuation.to_owned(),
                caches: vec![Vec::new(); n_seq],
                prompt_lens: vec![0; n_seq],
                last_seq: 0,
                n_ctx: 4096,
                decoded_total: 0,
                eog_after: true,
                fail_truncate: false,
                fail_copy: false,
                fail_decode: false,
                rule: None,
                verifies: true,
                unsure_every: 0,
                token_probability: None,
                token_time: Duration::ZERO,
                logits: None,
                heals: false,
            }
        }

        /// What greedy decoding picks after the first `len` tokens of sequence `seq`.
        fn choice(&self, seq: usize, len: usize) -> Token {
            if let Some(rule) = self.rule {
                return rule(&self.caches[seq][..len]);
            }
            let n_generated = len.saturating_sub(self.prompt_lens[seq]);
            match self.continuation.chars().nth(n_generated) {
                Some(ch) => ch as Token,
                None if self.eog_after => EOG,
                None => ' ' as Token,
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
        fn n_seq(&self) -> usize {
            self.caches.len()
        }
        fn truncate_cache(&mut self, seq: usize, n_keep: usize) -> Result<(), EngineError> {
            if std::mem::take(&mut self.fail_truncate) {
                self.caches[seq].clear();
                return Err(EngineError::Decode("truncation failed; cache cleared".into()));
            }
            self.caches[seq].truncate(n_keep);
            if self.logits.is_some_and(|(at_seq, len)| at_seq == seq && n_keep < len) {
                self.logits = None;
            }
            Ok(())
        }
        fn copy_cache(&mut self, src: usize, dst: usize) -> Result<(), EngineError> {
            if std::mem::take(&mut self.fail_copy) {
                self.caches[dst].clear();
                return Err(EngineError::Decode("copy failed".into()));
            }
            self.caches[dst] = self.caches[src].clone();
            self.prompt_lens[dst] = self.prompt_lens[src];
            if self.logits.is_some_and(|(at_seq, _)| at_seq == dst) {
                self.logits = None;
            }
            Ok(())
        }
        fn decode(&mut self, seq: usize, tokens: &[Token], first_pos: usize) -> Result<(), EngineError> {
            assert_eq!(first_pos, self.caches[seq].len(), "decode must append at the end of the cache");
            if std::mem::take(&mut self.fail_decode) {
                // Part of the batch went in before the failure: the session must not trust this sequence.
                self.caches[seq].extend_from_slice(&tokens[..tokens.len() / 2]);
                return Err(EngineError::Decode("decode failed".into()));
            }
            if tokens.len() == 1 {
                std::thread::sleep(self.token_time);
            }
            self.caches[seq].extend_from_slice(tokens);
            self.decoded_total += tokens.len();
            if tokens.len() > 1 || self.prompt_lens[seq] == 0 {
                self.prompt_lens[seq] = self.caches[seq].len();
            }
            self.last_seq = seq;
            self.logits = Some((seq, self.caches[seq].len()));
            Ok(())
        }
        fn can_verify(&self) -> bool {
            self.verifies
        }
        fn verify(&mut self, seq: usize, tokens: &[Token], first_pos: usize) -> Result<Vec<Verified>, EngineError> {
            assert_eq!(first_pos, self.caches[seq].len(), "verify must append at the end of the cache");
            self.caches[seq].extend_from_slice(tokens);
            self.decoded_total += tokens.len();
            self.last_seq = seq;
            // Logits for every position: the session goes on from a verified prefix without sampling them.
            self.logits = None;
            let sure = |len: usize| self.unsure_every == 0 || !len.is_multiple_of(self.unsure_every);
            Ok((1..=tokens.len())
                .map(|k| Verified { token: self.choice(seq, first_pos + k), sure: sure(first_pos + k) })
                .collect())
        }
        fn set_sampling(&mut self, _sampling: Sampling) {}
        fn sample(&mut self) -> Token {
            let len = self.caches[self.last_seq].len();
            assert_eq!(self.logits, Some((self.last_seq, len)), "sampled from logits that are not the sequence's last");
            self.choice(self.last_seq, len)
        }
        fn probability(&self, _token: Token) -> Option<f32> {
            self.token_probability
        }
        fn n_vocab(&self) -> usize {
            if self.heals {
                0x80
            } else {
                0
            }
        }
        fn sample_among(&mut self, allowed: &[Token]) -> Option<Token> {
            if !self.heals {
                return None;
            }
            let choice = self.sample();
            Some(if allowed.contains(&choice) { choice } else { *allowed.first()? })
        }
        fn probability_among(&self, _token: Token, _allowed: &[Token]) -> Option<f32> {
            self.token_probability
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
            min_confidence: 0.0,
            speculate: false,
            heal: true,
            resume: false,
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
    fn chunk_cost_has_a_fixed_part_and_sizes_chunks_to_the_budget() {
        let mut cost = ChunkCost::default();
        assert_eq!(cost.fits(Duration::from_millis(200)), None, "nothing measured yet");
        // One size only: all of it per token (137 ms / 16 tokens), so a 180 ms budget fits 21.
        cost.record(16, Duration::from_millis(137));
        assert_eq!(cost.fits(Duration::from_millis(180)), Some(21));
        // Qwen2.5-Coder 0.5B's measured chunks: ~60 ms fixed and ~5 ms a token, so 180 ms fit ~24 tokens where the
        // per-token rate of a 16-token chunk alone said 21, and 400 ms fit ~70 (not 47).
        cost.record(32, Duration::from_millis(211));
        cost.record(64, Duration::from_millis(370));
        let (fixed, per_token) = cost.fit().unwrap();
        assert!(
            (40_000.0..80_000.0).contains(&fixed) && (4_000.0..6_000.0).contains(&per_token),
            "{fixed} {per_token}"
        );
        assert!((60..=80).contains(&cost.fits(Duration::from_millis(400)).unwrap()));
        // Not trusted beyond twice the biggest chunk measured, nor below the fixed part.
        assert_eq!(cost.fits(Duration::from_secs(10)), Some(128));
        assert_eq!(cost.fits(Duration::from_millis(10)), Some(0));
    }

    #[test]
    fn a_stale_cost_estimate_does_not_stall_prompt_evaluation() {
        // One slow chunk (the first after loading pays for buffer set-up) made the estimate say that nothing fits
        // before any deadline: no keystroke evaluated a token again and the estimate was never corrected.
        let mut session = Session::new(FakeModel::new(" = 1;"), None);
        session.prompt_cost.record(16, Duration::from_millis(800));
        let mut req = request(&"let a = 1;\n".repeat(40), "", StopMode::Line);
        req.deadline = Instant::now() + Duration::from_millis(225);
        let first = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(first.stop, StopReason::Deadline);
        assert!(first.stats.n_decoded >= MIN_PROMPT_CHUNK, "no progress: {:?}", first.stats);
        let (fixed, per_token) = session.prompt_cost.fit().unwrap();
        assert!(fixed + 16.0 * per_token < 800_000.0, "the estimate is measured again");
        // Each following keystroke goes on from there until the prompt is in and an answer comes.
        let answered = (0..20).find_map(|_| {
            req.deadline = Instant::now() + Duration::from_millis(225);
            let answer = session.complete(&req, Instant::now()).unwrap();
            (answer.stop != StopReason::Deadline).then_some(answer)
        });
        assert_eq!(answered.expect("the prompt is evaluated in the end").text, " = 1;");
    }

    #[test]
    fn a_first_line_the_model_rates_unlikely_is_not_shown() {
        // " = 1;" then the line's end: six sampled tokens at 0.8 each, 0.8^6 = 0.262 for the line.
        let mut model = FakeModel::new(" = 1;\n    next();");
        model.token_probability = Some(0.8);
        let mut session = Session::new(model, None);
        let mut req = request("fn main() {\n    let x", "\n}", StopMode::Line);
        req.min_confidence = 0.3;
        let below = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(below.text, "");
        assert!(below.stats.below_confidence);
        assert_eq!(below.stats.confidence_permille, 262);

        req.min_confidence = 0.25;
        let above = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(above.text, " = 1;");
        assert!(!above.stats.below_confidence);
        assert_eq!(above.stats.confidence_permille, 262, "only the first line is rated");
    }

    #[test]
    fn a_block_keeps_the_lines_whose_running_probability_stays_above_the_threshold() {
        // One token per character at 0.95: after "a();\n" 0.774, after "    b();\n" 0.488, after "    c();" and
        // the end of generation 0.307.
        let mut model = FakeModel::new("a();\n    b();\n    c();");
        model.token_probability = Some(0.95);
        let mut session = Session::new(model, None);
        let mut req = request("fn f() {\n    ", "\n}", StopMode::Block);
        req.indent = "    ".into();
        req.min_confidence = 0.4;
        let answer = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(answer.text, "a();\n    b();");
        assert_eq!(answer.stats.confidence_permille, 774);
        assert!(!answer.stats.below_confidence);
    }

    #[test]
    fn a_backend_without_probabilities_gates_nothing() {
        let mut session = Session::new(FakeModel::new(" = 1;\n"), None);
        let mut req = request("fn main() {\n    let x", "\n}", StopMode::Line);
        req.min_confidence = 0.99;
        let answer = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(answer.text, " = 1;");
        assert_eq!(answer.stats.confidence_permille, 1000);
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
        // The user typed "ab": the generated tokens stay in the cache, and the answer is the rest of them.
        let second = session.complete(&request("let x = ab", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(second.stats.n_reused, first.stats.n_prompt + 3);
        assert_eq!((second.stats.n_carried, second.stats.n_decoded, second.text.as_str()), (3, 0, "c"));
    }

    #[test]
    fn identical_prompt_evaluates_nothing_again() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        let req = request("let x = ", "", StopMode::Line);
        session.complete(&req, Instant::now()).unwrap();
        let again = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(again.stats.n_decoded, 0);
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
        assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
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
    fn a_first_line_cut_by_the_deadline_is_not_shown() {
        let mut model = FakeModel::new("value.to_string();\nnext();");
        model.token_time = Duration::from_millis(15);
        let mut session = Session::new(model, None);
        let mut line = request("fn f() {\n    let s = ", "\n}", StopMode::Line);
        line.deadline = Instant::now() + Duration::from_millis(60);
        let cut = session.complete(&line, Instant::now()).unwrap();
        assert_eq!(cut.stop, StopReason::Deadline);
        assert!(cut.stats.n_generated > 0 && cut.stats.n_generated < 18, "{:?}", cut.stats);
        assert_eq!(cut.text, "", "a stub of the line is not shown");

        // Given the time, the whole line is the answer.
        line.deadline = Instant::now() + Duration::from_secs(5);
        let whole = session.complete(&line, Instant::now()).unwrap();
        assert_eq!(whole.text, "value.to_string();");
    }

    #[test]
    fn typing_along_a_line_the_deadline_cut_continues_its_generation() {
        let line = "value.to_string();";
        let mut model = FakeModel::new(&format!("{line}\nnext();"));
        model.token_time = Duration::from_millis(15);
        let mut session = Session::new(model, None);
        let mut req = request("fn f() {\n    let s = ", "\n}", StopMode::Line);
        req.deadline = Instant::now() + Duration::from_millis(60);
        let cut = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(cut.stop, StopReason::Deadline);
        let n_cut = cut.stats.n_generated;
        assert!(n_cut > 2 && n_cut < line.len(), "{:?}", cut.stats);

        // The user types the first two generated characters: the rest of the line comes from where the cut
        // generation stopped, not from the start again.
        let mut typed = request("fn f() {\n    let s = va", "\n}", StopMode::Line);
        typed.deadline = Instant::now() + Duration::from_secs(5);
        let rest = session.complete(&typed, Instant::now()).unwrap();
        assert_eq!(rest.text, "lue.to_string();");
        assert_eq!(rest.stats.n_carried, n_cut);
        assert_eq!(rest.stats.n_generated, line.len() - n_cut, "{:?}", rest.stats);
        assert_eq!(rest.stats.n_decoded, 0, "the logits after the carried tokens are still there: {:?}", rest.stats);
        assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());

        // Typing along the finished line continues it too; typing something else does not.
        let along = session.complete(&request("fn f() {\n    let s = value.to", "\n}", StopMode::Line), Instant::now());
        assert_eq!(along.unwrap().text, "_string();");
        let other = session.complete(&request("fn f() {\n    let s = vax", "\n}", StopMode::Line), Instant::now());
        let other = other.unwrap();
        assert_eq!(other.stats.n_carried, 0);
        assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
    }

    #[test]
    fn token_healing_takes_back_the_word_at_the_prompt_end_and_shows_only_what_follows_it() {
        // A vocabulary of characters: `wit` (three tokens of one word) is taken back and spelled again, then the
        // model goes on; the answer is what follows the typed text.
        let mut model = FakeModel::new("witch (type) {\nnext");
        model.heals = true;
        let mut session = Session::new(model, None);
        let first = session.complete(&request("  swit", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(first.text, "ch (type) {");
        assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
        assert_eq!(
            session.cached_tokens().len(),
            "  s".len() + 1 + "witch (type) {".len(),
            "BOS, the prompt less `wit`"
        );

        // Typing along: the generation is continued past the healed bytes.
        let along = session.complete(&request("  switc", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(along.text, "h (type) {");
        assert!(along.stats.n_carried > 0 && along.stats.n_decoded == 0, "{:?}", along.stats);

        // Typing something else: a fresh prompt, healed again, the cache still what the model holds.
        let other = session.complete(&request("  swix", "", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(other.stats.n_carried, 0);
        assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
    }

    #[test]
    fn heal_span_takes_the_last_token_and_the_rest_of_its_word() {
        let pieces = |list: &[&str]| list.iter().map(|piece| piece.as_bytes().to_vec()).collect::<Vec<_>>();
        let cases: &[(&[&str], &str, usize, &str)] = &[
            (&["  ", "sw", "it"], "  swit", 2, "swit"),
            (&["foo", "("], "foo(", 1, "("),
            (&["x", ".", "len"], "x.len", 1, "len"),
            (&["   ", " "], "    ", 1, " "),
            (&["let", " x"], "let x", 1, " x"),
            // The tokens do not spell the typed text (the prompt's end is elsewhere): nothing is healed.
            (&["ab"], "b", 0, ""),
            (&["q"], "abc", 0, ""),
        ];
        for (list, typed, n, healed) in cases {
            let got = heal_span(&pieces(list), typed.as_bytes());
            assert_eq!(got, (*n, healed.as_bytes().to_vec()), "{list:?} typed {typed:?}");
        }
    }

    #[test]
    fn the_vocabulary_index_finds_tokens_consistent_with_healed_bytes() {
        let vocab = ["i", "it", "itch", "item", "x", "iterate", "t", ""];
        let index = VocabIndex::from_pieces(
            vocab.iter().enumerate().map(|(id, piece)| (piece.as_bytes().to_vec(), id as Token)),
        );
        let mut got = index.consistent_with(b"it");
        got.sort_unstable();
        // `it`, `itch`, `item`, `iterate` start with it; `i` is a shorter start (a `t` follows).
        assert_eq!(got, vec![0, 1, 2, 3, 5]);
        assert_eq!(index.consistent_with(b"zz"), Vec::<Token>::new());
    }

    #[test]
    fn a_generation_step_that_would_end_past_the_deadline_is_not_started() {
        let line = "value.to_string();";
        let mut model = FakeModel::new(&format!("{line}\n"));
        model.token_time = Duration::from_millis(30);
        let mut session = Session::new(model, None);
        // A first answer measures what a step costs (at least the 30 ms each evaluation sleeps).
        let warm = session.complete(&request("fn f() {\n    let s = ", "\n}", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(warm.text, line);
        let mut req = request("fn f() {\n    let t = ", "\n}", StopMode::Line);
        req.deadline = Instant::now() + Duration::from_millis(100);
        let cut = session.complete(&req, Instant::now()).unwrap();
        assert_eq!(cut.stop, StopReason::Deadline);
        // Without the rule a fourth step would start at ~90 ms and end at ~120 ms.
        assert!(cut.stats.n_generated <= 3, "{:?}", cut.stats);
        // The token sampled but not evaluated is sampled again by a request typing along.
        let along =
            session.complete(&request("fn f() {\n    let t = v", "\n}", StopMode::Line), Instant::now()).unwrap();
        assert_eq!(along.text, "alue.to_string();");
        assert_eq!(along.stats.n_decoded, 0);
    }

    #[test]
    fn carried_text_past_a_line_break_ends_a_line_answer() {
        let mut model = FakeModel::new("a();\nb();\nc();");
        model.eog_after = false;
        let mut session = Session::new(model, None);
        let mut block = request("fn f() {\n    ", "\n}", StopMode::Block);
        block.max_tokens = 7;
        let first = session.complete(&block, Instant::now()).unwrap();
        assert_eq!((first.stop, first.text.as_str()), (StopReason::MaxTokens, "a();"));
        let line = session.complete(&request("fn f() {\n    a", "\n}", StopMode::Line), Instant::now()).unwrap();
        assert_eq!((line.stop, line.text.as_str()), (StopReason::StopRule, "();"));
        assert_eq!((line.stats.n_carried, line.stats.n_generated), (7, 0));
    }

    #[test]
    fn sampled_and_task_requests_do_not_continue() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        session.complete(&request("let x = ", "", StopMode::Line), Instant::now()).unwrap();
        let mut sampled = request("let x = a", "", StopMode::Line);
        sampled.sampling.temperature = 0.7;
        assert_eq!(session.complete(&sampled, Instant::now()).unwrap().stats.n_carried, 0);
        session.complete(&request("let x = ", "", StopMode::Line), Instant::now()).unwrap();
        let mut task = request("let x = a", "", StopMode::Free);
        task.raw_prompt = true;
        assert_eq!(session.complete(&task, Instant::now()).unwrap().stats.n_carried, 0);
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

    #[test]
    fn a_failed_truncation_leaves_the_record_equal_to_the_emptied_cache() {
        let mut session = Session::new(FakeModel::new("abc"), None);
        session.complete(&request("let x = 1;", "", StopMode::Line), Instant::now()).unwrap();
        session.model.fail_truncate = true;
        let second = session.complete(&request("let y = 2;", "", StopMode::Line), Instant::now());
        assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
        // The request still gets its answer, from a cold prompt.
        let second = second.unwrap();
        assert_eq!((second.text.as_str(), second.stats.n_reused), ("abc", 0));
    }

    fn task(prompt: &str) -> CompletionRequest {
        let mut req = request(prompt, "", StopMode::Free);
        req.raw_prompt = true;
        req.lane = u64::MAX;
        req
    }

    #[test]
    fn switching_back_to_a_recent_document_finds_its_prompt_cached() {
        let mut session = Session::new(FakeModel::with_slots("abc", 3), None);
        let mut a = request("fn alpha() {\n    let", "", StopMode::Line);
        a.lane = 1;
        let mut b = request("struct Beta {\n    field", "", StopMode::Line);
        b.lane = 2;
        session.complete(&a, Instant::now()).unwrap();
        session.complete(&b, Instant::now()).unwrap();
        // A task runs in its own slot: neither document loses its prompt.
        session.complete(&task("Fix this code"), Instant::now()).unwrap();
        let back = session.complete(&a, Instant::now()).unwrap();
        assert_eq!((back.stats.n_decoded, back.stats.slot), (1, 0));
        let back = session.complete(&b, Instant::now()).unwrap();
        assert_eq!((back.stats.n_decoded, back.stats.slot), (1, 1));
        // A third document takes the least recently used document slot.
        let mut c = request("impl Gamma", "", StopMode::Line);
        c.lane = 3;
        assert_eq!(session.complete(&c, Instant::now()).unwrap().stats.slot, 0);
        for (seq, tokens) in session.slot_tokens().into_iter().enumerate() {
            assert_eq!(tokens, session.model.caches[seq].as_slice());
        }
    }

    #[test]
    fn a_new_document_starts_from_the_slot_sharing_its_header() {
        let header = "// other file\nfn shared_helper(x: i32) -> i32 { x * 2 }\n".repeat(3);
        let mut session = Session::new(FakeModel::with_slots("z", 3), None);
        let mut a = request(&format!("{header}fn a() {{"), "", StopMode::Line);
        a.lane = 1;
        session.complete(&a, Instant::now()).unwrap();
        let mut b = request(&format!("{header}fn b() {{"), "", StopMode::Line);
        b.lane = 2;
        let second = session.complete(&b, Instant::now()).unwrap();
        assert_eq!(second.stats.slot, 1);
        assert!(second.stats.n_copied >= header.len(), "{:?}", second.stats);
        assert_eq!(second.stats.n_decoded, "b() {".len(), "only what differs from the other slot is evaluated");
        assert_eq!(session.slot_tokens()[1], session.model.caches[1].as_slice());
    }

    /// A deterministic "model" whose greedy choice depends on the last three tokens: repetitive enough that
    /// prompt lookup drafts are often right, and often wrong.
    fn rule(tokens: &[Token]) -> Token {
        let tail = &tokens[tokens.len().saturating_sub(3)..];
        let hash = tail.iter().fold(7u32, |acc, token| acc.wrapping_mul(31).wrapping_add(*token as u32));
        if hash % 29 == 0 {
            EOG
        } else {
            ['a', 'b', 'c', 'd'][(hash / 7 % 4) as usize] as Token
        }
    }

    #[test]
    fn speculative_decoding_drafts_and_keeps_what_the_model_confirms() {
        let model = || {
            let mut model = FakeModel::new("");
            model.rule = Some(rule);
            model
        };
        let mut plain = Session::new(model(), None);
        plain.speculative = false;
        let mut fast = Session::new(model(), None);
        fast.speculative = true;
        let mut req = task("abcdabcdabcadbcabdcab");
        req.max_tokens = 40;
        let slow = plain.complete(&req, Instant::now()).unwrap();
        let quick = fast.complete(&req, Instant::now()).unwrap();
        assert_eq!((quick.text.as_str(), quick.stop), (slow.text.as_str(), slow.stop));
        assert!(quick.stats.n_drafted > 0 && quick.stats.n_accepted > 0, "{:?}", quick.stats);
        assert_eq!(fast.cached_tokens(), plain.cached_tokens());
        assert_eq!(fast.cached_tokens(), fast.model.caches[0].as_slice());
    }

    #[test]
    fn drafting_stops_while_it_costs_more_per_token_and_is_tried_again() {
        let mut policy = DraftPolicy::new();
        assert!(policy.should_draft(), "nothing measured yet: try");
        policy.record_plain(Duration::from_millis(10));
        // A draft of 8 with 1 accepted: 40 ms for 2 tokens is 20 ms a token, twice plain decoding.
        policy.record_draft(Duration::from_millis(40), 8, 1);
        let chances: Vec<bool> = (0..DRAFT_RETRY_AFTER).map(|_| policy.should_draft()).collect();
        assert_eq!(chances.iter().filter(|draft| **draft).count(), 1, "one retry in {DRAFT_RETRY_AFTER} chances");
        assert!(chances.last().copied().unwrap_or(false), "the retry comes after the chances passed up");
        // Drafts that are cheaper per token than plain decoding are used every time.
        for _ in 0..8 {
            policy.record_draft(Duration::from_millis(30), 8, 8);
        }
        assert!((0..4).all(|_| policy.should_draft()));
    }

    #[test]
    fn a_draft_grows_while_accepted_whole_and_shrinks_when_mostly_rejected() {
        let mut policy = DraftPolicy::new();
        assert_eq!(policy.len, MAX_DRAFT / 2);
        policy.record_draft(Duration::from_millis(1), policy.len, policy.len);
        assert_eq!(policy.len, MAX_DRAFT);
        policy.record_draft(Duration::from_millis(1), MAX_DRAFT, MAX_DRAFT);
        assert_eq!(policy.len, MAX_DRAFT, "capped");
        policy.record_draft(Duration::from_millis(1), MAX_DRAFT, 10);
        assert_eq!(policy.len, MAX_DRAFT, "more than half accepted: kept");
        for _ in 0..8 {
            policy.record_draft(Duration::from_millis(1), policy.len, 0);
        }
        assert_eq!(policy.len, MIN_DRAFT, "floored");
    }

    #[test]
    fn prompt_lookup_drafts_what_followed_the_last_ngram() {
        let history: Vec<Token> = "let total = a + b;\nlet".chars().map(|ch| ch as Token).collect();
        let draft: String =
            draft_tokens(&history, ' ' as Token, 6).into_iter().map(|t| char::from_u32(t as u32).unwrap()).collect();
        assert_eq!(draft, "total ");
        assert!(draft_tokens(&history, 'Q' as Token, 6).is_empty());
        assert!(draft_tokens(&history, ' ' as Token, 0).is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Ghost { lane: u64, prefix: String, max_tokens: usize },
        Task { prompt: String },
        FailTruncate,
        FailCopy,
        FailDecode,
        Reset,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0u64..5, "[abc\n]{0,40}", 0usize..12).prop_map(|(lane, prefix, max_tokens)| Op::Ghost { lane, prefix, max_tokens }),
            2 => "[abcd ]{1,30}".prop_map(|prompt| Op::Task { prompt }),
            1 => Just(Op::FailTruncate),
            1 => Just(Op::FailCopy),
            1 => Just(Op::FailDecode),
            1 => Just(Op::Reset),
        ]
    }

    proptest::proptest! {
        #[test]
        fn every_slot_records_exactly_what_its_sequence_holds(
            ops in proptest::collection::vec(op(), 1..40),
            n_seq in 1usize..5,
            speculative: bool,
        ) {
            let mut model = FakeModel::with_slots("", n_seq);
            model.rule = Some(rule);
            model.n_ctx = 64;
            model.unsure_every = 3;
            let mut session = Session::new(model, None);
            session.speculative = speculative;
            // A shared header makes copies between slots worth it.
            let header = "shared header line\n".repeat(2);
            for op in ops {
                match op {
                    Op::Ghost { lane, prefix, max_tokens } => {
                        let mut req = request(&format!("{header}{prefix}"), "", StopMode::Block);
                        req.lane = lane;
                        req.max_tokens = max_tokens;
                        let _ = session.complete(&req, Instant::now());
                    }
                    Op::Task { prompt } => {
                        let mut req = task(&prompt);
                        req.max_tokens = 10;
                        let _ = session.complete(&req, Instant::now());
                    }
                    Op::FailTruncate => session.model.fail_truncate = true,
                    Op::FailCopy => session.model.fail_copy = true,
                    Op::FailDecode => session.model.fail_decode = true,
                    Op::Reset => session.reset(),
                }
                for (seq, tokens) in session.slot_tokens().into_iter().enumerate() {
                    proptest::prop_assert_eq!(tokens, session.model.caches[seq].as_slice(), "slot {}", seq);
                }
            }
        }

        #[test]
        fn speculative_output_equals_greedy_token_for_token(
            prompts in proptest::collection::vec("[abcd]{0,30}", 1..6),
            max_tokens in 1usize..40,
            unsure_every in 0usize..4,
        ) {
            let model = || {
                let mut model = FakeModel::with_slots("", 2);
                model.rule = Some(rule);
                model.unsure_every = unsure_every;
                model
            };
            let mut plain = Session::new(model(), None);
            plain.speculative = false;
            let mut fast = Session::new(model(), None);
            fast.speculative = true;
            for prompt in prompts {
                let mut req = task(&prompt);
                req.max_tokens = max_tokens;
                let slow = plain.complete(&req, Instant::now()).unwrap();
                let quick = fast.complete(&req, Instant::now()).unwrap();
                proptest::prop_assert_eq!(&quick.text, &slow.text);
                proptest::prop_assert_eq!(quick.stop, slow.stop);
                proptest::prop_assert_eq!(quick.stats.n_generated, slow.stats.n_generated);
                proptest::prop_assert_eq!(fast.slot_tokens(), plain.slot_tokens());
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn cache_mirrors_the_model_after_any_sequence_of_prompts(prompts in proptest::collection::vec("[ab\n]{0,12}", 1..8)) {
            let mut session = Session::new(FakeModel::new("ab"), None);
            for prefix in prompts {
                let completion = session.complete(&request(&prefix, "", StopMode::Line), Instant::now()).unwrap();
                proptest::prop_assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
                proptest::prop_assert_eq!(completion.stats.n_reused + completion.stats.n_decoded, completion.stats.n_prompt);
            }
        }
    }
}
