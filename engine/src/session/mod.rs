//! One model session: the KV slots and the tokens they hold, and `Session::complete`, which runs a request as a
//! sequence of phases — choose a slot, continue the lane's last generation or tokenize the prompt, evaluate the
//! prompt in chunks, generate (with prompt-lookup drafts for greedy requests), the confidence gate, and
//! post-processing. Generic over `LanguageModel` so that it is tested with a scripted fake. The mechanisms live
//! in the submodules, which know nothing of `Session`: `slots`, `cost`, `continuation`, `healing`, `draft` and
//! `rating`.

mod continuation;
mod cost;
mod draft;
#[cfg(test)]
pub(crate) mod fake;
mod healing;
mod rating;
mod slots;
#[cfg(test)]
mod tests;

use std::time::Instant;

use crate::error::EngineError;
use crate::model_info::FimTemplate;
use crate::postprocess::{self, StopContext, StopMode};
use crate::prompt::{self, PromptInput};

pub use crate::language_model::{LanguageModel, Token, Verified};
pub use crate::request::{Completion, CompletionRequest, CompletionStats, Sampling, StopReason};
pub use draft::draft_tokens;
pub use slots::common_prefix_len;

use continuation::Continuation;
use cost::{millis, ChunkCost, StepCost, MIN_PROMPT_CHUNK};
use draft::{verify_draft, DraftPolicy, Lookahead};
use healing::Healing;
use rating::Rating;
use slots::KvSlots;

pub struct Session<M> {
    pub model: M,
    pub fim: Option<FimTemplate>,
    /// Prompt-lookup speculative decoding for greedy requests.
    pub speculative: bool,
    kv: KvSlots,
    /// What prompt chunks cost here (measured), to size chunks to deadlines.
    prompt_cost: ChunkCost,
    drafts: DraftPolicy,
    step_cost: StepCost,
    /// The vocabulary by piece, for token healing.
    healing: Healing,
}

impl<M: LanguageModel> Session<M> {
    pub fn new(model: M, fim: Option<FimTemplate>) -> Self {
        let kv = KvSlots::new(model.n_seq());
        Session {
            model,
            fim,
            speculative: false,
            kv,
            prompt_cost: ChunkCost::default(),
            drafts: DraftPolicy::new(),
            step_cost: StepCost::default(),
            healing: Healing::default(),
        }
    }

    /// Tokens in the KV cache of slot 0, in order (the single-slot view).
    pub fn cached_tokens(&self) -> &[Token] {
        &self.kv.slot(0).tokens
    }

    /// Tokens each slot holds, in slot order.
    pub fn slot_tokens(&self) -> Vec<&[Token]> {
        self.kv.all_tokens()
    }

    /// Forgets every slot (after a failure left the cache in an unknown state, or with reuse off).
    pub fn reset(&mut self) {
        self.kv.reset_all(&mut self.model);
    }

    /// Builds the vocabulary index token healing uses, if it is not built yet (else it is built on first use).
    pub fn index_vocabulary(&mut self) {
        let _ = self.healing.vocab_index(&self.model);
    }

    pub fn complete(&mut self, request: &CompletionRequest, queued_at: Instant) -> Result<Completion, EngineError> {
        let started = Instant::now();
        let stats = CompletionStats { queue_ms: millis(started - queued_at), ..Default::default() };
        let rendered = self.render(request);
        let seq = self.kv.take_for(request);
        let mut run = Run { seq, started, stats: CompletionStats { slot: seq, ..stats } };
        let prepared = self.continue_or_tokenize(request, rendered, &mut run);
        if let Some(stop) = self.evaluate_prompt(request, &prepared.continuation.tokens, &mut run)? {
            return Ok(run.finish(String::new(), stop));
        }
        run.stats.prompt_ms = millis(started.elapsed());
        if request.max_tokens == 0 {
            return Ok(run.finish(String::new(), StopReason::WarmedUp));
        }
        let (mut text, stop, rating) = self.generate(request, prepared, &mut run)?;
        if stop == StopReason::Cancelled {
            return Ok(run.finish(String::new(), stop));
        }
        drop_unfinished(&mut text, stop, request.mode);
        rating.gate(&mut text, request.min_confidence, &mut run.stats);
        let text = if request.mode == StopMode::Free {
            text
        } else {
            postprocess::finalize(&text, &stop_context(request)).unwrap_or_default()
        };
        Ok(run.finish(text, stop))
    }

    /// The continuation phase: ghost text typed along the lane's last generation continues it; otherwise the
    /// prompt is tokenized, and for a greedy ghost-text request its end is taken back for token healing.
    fn continue_or_tokenize(&mut self, request: &CompletionRequest, rendered: String, run: &mut Run) -> Prepared {
        let seq = run.seq;
        let continues = request.sampling.temperature <= 0.0 && !request.raw_prompt;
        let n_ctx = self.model.n_ctx();
        let carried = self.kv.slot_mut(seq).continuation.take().filter(|_| continues);
        let carried = carried.and_then(|previous| previous.carry(&rendered, request, n_ctx));
        let mut heal: Vec<u8> = Vec::new();
        let (continuation, skip) = match carried {
            Some((previous, skip)) => (previous, skip),
            None => {
                let mut tokens = self.prompt_tokens(&rendered, request.max_tokens);
                // A warm-up heals too: it brings exactly the tokens the next request in this state evaluates
                // into the cache (unhealed, the next request would type along it and skip healing).
                if continues && request.heal {
                    let typed = prompt::split_at_line_start(&request.prefix).1;
                    heal = self.healing.take_back(&self.model, &mut tokens, typed.as_bytes());
                }
                let healed = heal.len();
                let continuation =
                    Continuation { lane: request.lane, rendered, tokens, bytes: Vec::new(), ends: Vec::new(), healed };
                (continuation, healed)
            }
        };
        run.stats.n_carried = continuation.ends.len();
        run.stats.n_prompt = continuation.tokens.len();
        if continues {
            // Kept through the prompt's evaluation: a keystroke cancelling it still finds the tokens.
            self.kv.slot_mut(seq).continuation = Some(continuation.clone());
        }
        Prepared { continues, continuation, skip, heal }
    }

    /// The prompt phase: the slot is filled from another one when that saves enough, keeps its common prefix with
    /// `tokens`, and the rest is evaluated in chunks sized to the deadline, checking the cancel token between them.
    /// Returns why the request ends before generating, if it does.
    fn evaluate_prompt(
        &mut self,
        request: &CompletionRequest,
        tokens: &[Token],
        run: &mut Run,
    ) -> Result<Option<StopReason>, EngineError> {
        let seq = run.seq;
        run.stats.n_copied = self.kv.fill_from_best(&mut self.model, seq, tokens);
        let n_common = common_prefix_len(&self.kv.slot(seq).tokens, tokens);
        // At least one token is decoded so that fresh logits exist for the first sample, unless the model's
        // logits are those after exactly this prompt.
        let logits_fresh = n_common == tokens.len()
            && self.kv.slot(seq).tokens.len() == tokens.len()
            && self.kv.logits_at == Some((seq, tokens.len()));
        let mut n_keep = if logits_fresh { tokens.len() } else { n_common.min(tokens.len().saturating_sub(1)) };
        if let Err(error) = self.kv.truncate_slot(&mut self.model, seq, n_keep) {
            // The model emptied the sequence: the record followed, and this prompt is evaluated cold.
            tracing::warn!(%error, "KV cache truncation failed; evaluating the prompt from the start");
            n_keep = 0;
        }
        run.stats.n_reused = n_keep;
        let mut next = n_keep;
        while next < tokens.len() {
            if request.cancel.is_cancelled() {
                return Ok(Some(StopReason::Cancelled));
            }
            let Some(n_chunk) = self.prompt_cost.next_chunk(request, tokens.len() - next, run.stats.n_decoded) else {
                return Ok(Some(StopReason::Deadline));
            };
            let chunk = &tokens[next..next + n_chunk];
            let first_pos = self.kv.slot(seq).tokens.len();
            let chunk_started = Instant::now();
            self.kv.decode(&mut self.model, seq, chunk, first_pos)?;
            // A window of recent chunks: one slow chunk (another process took the core) does not stall the next ones
            // for long. Chunks of a few tokens cost less than the line through bigger ones says (a single token:
            // 27 ms for the 0.5B against the line's 65), so they are left out of the fit.
            if chunk.len() >= MIN_PROMPT_CHUNK {
                self.prompt_cost.record(chunk.len(), chunk_started.elapsed());
            }
            run.stats.n_decoded += chunk.len();
            next += chunk.len();
        }
        Ok(None)
    }

    /// The generation phase: tokens until a stop rule, the end of generation, the token budget, the context's end,
    /// the deadline or a cancel — one at a time, or for greedy requests by verified prompt-lookup drafts, which give
    /// the same tokens. Returns the answer (what follows the bytes the prompt holds), why it stopped, and how the
    /// model rates it; the slot keeps the generation for a request typing along it.
    fn generate(
        &mut self,
        request: &CompletionRequest,
        prepared: Prepared,
        run: &mut Run,
    ) -> Result<(String, StopReason, Rating), EngineError> {
        let Prepared { continues, mut continuation, skip, mut heal } = prepared;
        let Run { seq, started, ref mut stats } = *run;
        let stop_context = stop_context(request);
        let model_stops: &[String] = match (&self.fim, request.raw_prompt) {
            (Some(fim), false) => fim.stop_strings.as_slice(),
            _ => &[],
        };
        let stop_strings: Vec<String> = model_stops.iter().chain(&request.stop_strings).cloned().collect();
        self.model.set_sampling(request.sampling);
        let constrained = request.grammar.is_some();
        if !self.model.set_grammar(request.grammar.as_deref())? {
            tracing::debug!("this model cannot follow a grammar; the request's grammar is ignored");
        }
        // Greedy requests are decoded speculatively: the output is the same token for token. Not under a grammar:
        // a draft's tokens would pass by the grammar's state.
        let speculate = (self.speculative || request.speculate)
            && request.sampling.temperature <= 0.0
            && !constrained
            && self.model.can_verify();
        let n_prompt_tokens = stats.n_prompt;
        let n_ctx = self.model.n_ctx();
        let mut lookahead = Lookahead::default();
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
            let (token, in_cache, may_draft) = if let Some(known) = lookahead.next() {
                known
            } else if let Some((token, allowed)) = self.healing.choice(&mut self.model, &heal) {
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
                    draft_tokens(&self.kv.slot(seq).tokens, token, room.min(self.drafts.len))
                } else {
                    Vec::new()
                };
                if !draft.is_empty() && !self.drafts.should_draft() {
                    draft.clear();
                }
                if draft.is_empty() {
                    // Timed for the draft policy.
                    let decode_started = speculate.then(Instant::now);
                    self.kv.decode(&mut self.model, seq, &[token], pos)?;
                    self.step_cost.record(step_started.elapsed());
                    if let Some(decode_started) = decode_started {
                        self.drafts.record_plain(decode_started.elapsed());
                    }
                } else {
                    let mut batch = Vec::with_capacity(draft.len() + 1);
                    batch.push(token);
                    batch.extend_from_slice(&draft);
                    let n_accepted = verify_draft(
                        &mut self.model,
                        &mut self.kv,
                        &mut self.drafts,
                        seq,
                        pos,
                        &batch,
                        &mut lookahead,
                    )?;
                    stats.n_drafted += draft.len();
                    stats.n_accepted += n_accepted;
                }
            }
            stats.n_generated += 1;
            continuation.ends.push((bytes.len(), prob));
        };
        // Accepted draft tokens past the stop were never generated: the cache holds what plain decoding holds.
        self.kv.truncate_slot(&mut self.model, seq, n_prompt_tokens + stats.n_generated)?;
        if continues {
            continuation.tokens.clone_from(&self.kv.slot(seq).tokens);
            bytes.truncate(continuation.ends.last().map_or(0, |(end, _)| *end));
            continuation.bytes = bytes;
            self.kv.slot_mut(seq).continuation = Some(continuation);
        }
        stats.generate_us = u64::try_from(generating.elapsed().as_micros()).unwrap_or(u64::MAX);
        Ok((text, stop, rating))
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

/// One request's run through the session: its slot, when it started and its counters, handed from phase to phase.
struct Run {
    seq: usize,
    started: Instant,
    stats: CompletionStats,
}

impl Run {
    fn finish(self, text: String, stop: StopReason) -> Completion {
        let mut stats = self.stats;
        stats.total_ms = millis(self.started.elapsed());
        Completion { text, stop, stats }
    }
}

/// What the continuation phase hands to generation: the prompt a request runs on.
struct Prepared {
    /// Greedy ghost text: it may type along the lane's last generation, and its own is kept for the next request.
    continues: bool,
    /// The prompt's tokens (and the generated ones carried over), and the generation so far.
    continuation: Continuation,
    /// Bytes of the generation that the prompt holds (healed and typed): the answer is what follows them.
    skip: usize,
    /// The bytes the first generated tokens must start with: the end of the prompt, taken back (token healing).
    heal: Vec<u8>,
}

fn stop_context(request: &CompletionRequest) -> StopContext<'_> {
    StopContext { mode: request.mode, indent: &request.indent, suffix: &request.suffix, max_lines: request.max_lines }
}

/// What the model had not finished is not an answer: a block cut by time or length keeps only its complete lines,
/// and a first line the deadline cut is dropped.
fn drop_unfinished(text: &mut String, stop: StopReason, mode: StopMode) {
    if stop == StopReason::Deadline || stop == StopReason::MaxTokens {
        // A block cut by time or length keeps only its complete lines.
        if mode == StopMode::Block {
            if let Some(last_newline) = text.rfind('\n') {
                text.truncate(last_newline);
            }
        }
    }
    // A first line the deadline cut is not an answer: the model had not finished it, so neither the checks nor
    // the user can tell whether it is right (measured: most cut lines were wrong or a prefix of the right
    // one, and typing along kept showing the stub). The caller finishes it in the background instead.
    if stop == StopReason::Deadline && mode != StopMode::Free && !text.contains('\n') {
        text.clear();
    }
}

/// The longest prefix of `bytes` that is valid UTF-8: a multi-byte character may span two tokens.
fn valid_utf8_prefix(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(error) if error.error_len().is_none() => &bytes[..error.valid_up_to()],
        Err(_) => bytes,
    }
}
