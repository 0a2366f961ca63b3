//! What the session needs from a model backend (`LanguageModel`): tokens, the KV cache's sequences, evaluation,
//! draft verification and sampling. llama.cpp (`local.rs`), the scripted model and the tests' fake implement it.

use crate::error::EngineError;
use crate::request::Sampling;

/// Tokens are plain ids here; the backend maps them to its own type.
pub type Token = i32;

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
    /// Constrains `sample` to a GBNF grammar (start rule `root`) from its fresh start, or lifts the constraint
    /// (`None`). Returns whether the backend applies it: one that cannot leaves sampling as it is (`Ok(false)`);
    /// a grammar llama.cpp cannot parse is an error.
    fn set_grammar(&mut self, grammar: Option<&str>) -> Result<bool, EngineError> {
        Ok(grammar.is_none())
    }
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
