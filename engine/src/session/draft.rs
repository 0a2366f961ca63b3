//! Prompt-lookup speculative decoding: `draft_tokens` finds a draft in the tokens already seen, and
//! `DraftPolicy` decides from measured costs whether drafting pays and how long a draft is.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::EngineError;
use crate::language_model::{LanguageModel, Token};

use super::slots::KvSlots;

/// Speculative decoding: the longest and shortest draft, and the n-gram sizes looked up (longest first).
pub(super) const MAX_DRAFT: usize = 16;
pub(super) const MIN_DRAFT: usize = 2;
/// While drafting costs more per token than plain decoding, it is tried again after this many chances.
pub(super) const DRAFT_RETRY_AFTER: u32 = 16;
const NGRAM_MAX: usize = 4;
const NGRAM_MIN: usize = 2;

/// Whether prompt-lookup drafts pay on this machine and model, from what they cost: the time per generated token
/// of plain decoding and of verified drafts (moving averages, in microseconds). A draft is verified in one batch,
/// and a batch of n tokens costs far more than one token where a few cores are already busy with one (measured
/// on 2 cores: 9 tokens with their logits cost 3.7 single steps for Gemma 3 270M, 8.8 for Qwen2.5-Coder 1.5B), so
/// drafting stops while it is the slower way, is tried again now and then, and a draft's length follows how much
/// of the last one the model accepted.
#[derive(Debug, Clone, Copy)]
pub(super) struct DraftPolicy {
    plain_us: Option<f64>,
    drafted_us: Option<f64>,
    /// Drafting chances passed up since drafting last ran.
    skipped: u32,
    /// The next draft's length.
    pub(super) len: usize,
}

impl DraftPolicy {
    pub(super) fn new() -> Self {
        DraftPolicy { plain_us: None, drafted_us: None, skipped: 0, len: MAX_DRAFT / 2 }
    }

    /// Whether to verify a draft now (a draft was found).
    pub(super) fn should_draft(&mut self) -> bool {
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

    pub(super) fn record_plain(&mut self, elapsed: Duration) {
        self.plain_us = Self::average(self.plain_us, elapsed.as_secs_f64() * 1e6);
    }

    /// A verified draft: the batch took `elapsed` and put `1 + accepted` tokens of the answer in the cache.
    pub(super) fn record_draft(&mut self, elapsed: Duration, drafted: usize, accepted: usize) {
        let per_token = elapsed.as_secs_f64() * 1e6 / (1 + accepted) as f64;
        self.drafted_us = Self::average(self.drafted_us, per_token);
        if accepted == drafted {
            self.len = (self.len * 2).min(MAX_DRAFT);
        } else if accepted * 2 < drafted {
            self.len = (self.len / 2).max(MIN_DRAFT);
        }
    }
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

/// Tokens greedy decoding produces next, already known from a verified draft: `ahead` are in the KV cache
/// (accepted draft tokens), `pending` (the model's own choice after them) is not; `redecode` is an accepted token
/// taken out of the cache again, to be evaluated alone (the choice after it was a near tie).
#[derive(Debug, Default)]
pub(super) struct Lookahead {
    ahead: VecDeque<Token>,
    pending: Option<Token>,
    redecode: Option<Token>,
}

impl Lookahead {
    /// The next token known without sampling: (token, in the cache already, may start a draft).
    pub(super) fn next(&mut self) -> Option<(Token, bool, bool)> {
        if let Some(token) = self.ahead.pop_front() {
            Some((token, true, false))
        } else if let Some(token) = self.redecode.take() {
            Some((token, false, false))
        } else {
            self.pending.take().map(|token| (token, false, true))
        }
    }
}

/// Evaluates `batch` — the token just generated (at `pos`) and a draft after it — in one batch, keeps the prefix of
/// the draft the model confirms (surely: a near tie is decided by a plain evaluation) and removes the rejected tail
/// from the KV cache; what the model gives next goes to `lookahead`, the batch's cost per token to `drafts`.
/// Returns how many draft tokens were accepted.
pub(super) fn verify_draft(
    model: &mut impl LanguageModel,
    kv: &mut KvSlots,
    drafts: &mut DraftPolicy,
    seq: usize,
    pos: usize,
    batch: &[Token],
    lookahead: &mut Lookahead,
) -> Result<usize, EngineError> {
    let decode_started = Instant::now();
    let (token, draft) = (batch[0], &batch[1..]);
    kv.logits_at = None;
    let predicted = match model.verify(seq, batch, pos) {
        Ok(predicted) => predicted,
        Err(error) => {
            kv.reset_slot(model, seq);
            return Err(error);
        }
    };
    let n_accepted =
        draft.iter().zip(&predicted).take_while(|(drafted, said)| said.sure && **drafted == said.token).count();
    drafts.record_draft(decode_started.elapsed(), draft.len(), n_accepted);
    kv.slot_mut(seq).tokens.extend_from_slice(batch);
    // The rejected tail leaves the cache; the model's choice after the accepted prefix comes next.
    match predicted.get(n_accepted).filter(|next| next.sure) {
        Some(next) => {
            kv.truncate_slot(model, seq, pos + 1 + n_accepted)?;
            lookahead.ahead.extend(&draft[..n_accepted]);
            lookahead.pending = Some(next.token);
        }
        // A near tie after the last accepted token: that token is evaluated again, alone, and its logits decide
        // as in plain decoding.
        None => {
            kv.truncate_slot(model, seq, pos + n_accepted)?;
            if n_accepted == 0 {
                kv.decode(model, seq, &[token], pos)?;
            } else {
                lookahead.ahead.extend(&draft[..n_accepted - 1]);
                lookahead.redecode = Some(draft[n_accepted - 1]);
            }
        }
    }
    Ok(n_accepted)
}
