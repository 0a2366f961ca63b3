//! The KV slots: the sequences of one llama.cpp context, each with the tokens it holds (exactly what the model's
//! sequence holds), which lane it serves and when it was used; slot choice, filling a slot from another one, and
//! keeping the record equal to the cache through truncations, copies and failures. Also where the model's logits
//! are (`logits_at`), since only a change of a sequence makes them stale.

use crate::error::EngineError;
use crate::language_model::{LanguageModel, Token};
use crate::request::CompletionRequest;

use super::continuation::Continuation;

/// A slot is filled from another one (a copy of its sequence) when that saves at least this many prompt tokens.
const MIN_COPY_GAIN: usize = 32;

/// One KV sequence: the tokens it holds (exactly what the model's sequence holds), whose it is, when it was used.
#[derive(Debug, Clone, Default)]
pub(super) struct Slot {
    pub(super) tokens: Vec<Token>,
    /// The document lane it belongs to; `None` for the task slot or a slot never used.
    lane: Option<u64>,
    last_used: u64,
    /// The last ghost-text generation run in this slot, for typing along it.
    pub(super) continuation: Option<Continuation>,
}

/// Every slot of the context, and what the model's logits belong to. Each operation that touches the model's
/// cache keeps the records equal to it, also when the model fails.
#[derive(Debug)]
pub(super) struct KvSlots {
    slots: Vec<Slot>,
    clock: u64,
    /// (sequence, length) when the model's logits are those after that sequence's last token: the model's last
    /// evaluation ended there and the sequence has not changed since. A request whose prompt is exactly that
    /// sequence samples from them without evaluating its last token again (typing along a generation).
    pub(super) logits_at: Option<(usize, usize)>,
}

impl KvSlots {
    pub(super) fn new(n_seq: usize) -> Self {
        KvSlots { slots: vec![Slot::default(); n_seq.max(1)], clock: 0, logits_at: None }
    }

    pub(super) fn slot(&self, seq: usize) -> &Slot {
        &self.slots[seq]
    }

    pub(super) fn slot_mut(&mut self, seq: usize) -> &mut Slot {
        &mut self.slots[seq]
    }

    /// Tokens each slot holds, in slot order.
    pub(super) fn all_tokens(&self) -> Vec<&[Token]> {
        self.slots.iter().map(|slot| slot.tokens.as_slice()).collect()
    }

    /// Forgets every slot (after a failure left the cache in an unknown state, or with reuse off).
    pub(super) fn reset_all(&mut self, model: &mut impl LanguageModel) {
        for seq in 0..self.slots.len() {
            // A whole-sequence removal cannot fail; the record is empty either way.
            let _ = model.truncate_cache(seq, 0);
            self.slots[seq] = Slot::default();
        }
        self.logits_at = None;
    }

    /// Sequence `seq` is about to change other than by an evaluation: the logits after it no longer are.
    pub(super) fn forget_logits_of(&mut self, seq: usize) {
        if self.logits_at.is_some_and(|(at_seq, _)| at_seq == seq) {
            self.logits_at = None;
        }
    }

    pub(super) fn reset_slot(&mut self, model: &mut impl LanguageModel, seq: usize) {
        let _ = model.truncate_cache(seq, 0);
        self.slots[seq].tokens.clear();
        self.logits_at = None;
    }

    /// Sets slot `seq` to hold its first `n_keep` tokens; when the model fails, the slot is empty.
    pub(super) fn truncate_slot(
        &mut self,
        model: &mut impl LanguageModel,
        seq: usize,
        n_keep: usize,
    ) -> Result<(), EngineError> {
        if n_keep >= self.slots[seq].tokens.len() {
            return Ok(());
        }
        self.forget_logits_of(seq);
        match model.truncate_cache(seq, n_keep) {
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

    /// Evaluates `tokens` in slot `seq` at `first_pos` and records them; the model's logits are then those after
    /// the slot's last token. When the model fails, the slot is emptied (part of the batch may be in).
    pub(super) fn decode(
        &mut self,
        model: &mut impl LanguageModel,
        seq: usize,
        tokens: &[Token],
        first_pos: usize,
    ) -> Result<(), EngineError> {
        if let Err(error) = model.decode(seq, tokens, first_pos) {
            self.reset_slot(model, seq);
            return Err(error);
        }
        self.slots[seq].tokens.extend_from_slice(tokens);
        self.logits_at = Some((seq, self.slots[seq].tokens.len()));
        Ok(())
    }

    /// Takes the slot for a request and marks it used by the request's lane (none for a task).
    pub(super) fn take_for(&mut self, request: &CompletionRequest) -> usize {
        let seq = self.pick_slot(request);
        self.clock += 1;
        let slot = &mut self.slots[seq];
        slot.last_used = self.clock;
        slot.lane = (!request.raw_prompt).then_some(request.lane);
        seq
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
    pub(super) fn fill_from_best(&mut self, model: &mut impl LanguageModel, seq: usize, tokens: &[Token]) -> usize {
        let own = common_prefix_len(&self.slots[seq].tokens, tokens);
        let best = (0..self.slots.len())
            .filter(|other| *other != seq)
            .map(|other| (common_prefix_len(&self.slots[other].tokens, tokens), other))
            .max();
        let Some((shared, donor)) = best.filter(|(shared, _)| *shared >= own + MIN_COPY_GAIN) else {
            return 0;
        };
        self.forget_logits_of(seq);
        match model.copy_cache(donor, seq) {
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
}

/// Length of the longest common prefix of two token sequences.
pub fn common_prefix_len(a: &[Token], b: &[Token]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
