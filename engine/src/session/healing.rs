//! Token healing: a prompt that ends inside a word gives back its last tokens, and the first generated tokens
//! must spell their bytes (`swit` is `sw`, `it`; the model's own `switch` is one token). `heal_span` chooses the
//! tokens, `VocabIndex` finds the tokens consistent with the bytes, `Healing` keeps the index for a session.

use std::time::Instant;

use crate::language_model::{LanguageModel, Token};

use super::cost::millis;

/// Token healing takes back at most this many prompt tokens, and at most this many bytes of them.
const MAX_HEAL_TOKENS: usize = 3;
const MAX_HEAL_BYTES: usize = 32;

/// A session's token healing: the vocabulary by piece, built on first use (`None` inside when the model has none).
#[derive(Default)]
pub(super) struct Healing {
    vocab: Option<Option<VocabIndex>>,
}

impl Healing {
    /// Token healing: a prompt that ends inside a word ends with tokens the model would not have chosen there
    /// (`swit` is `sw`, `it`; the model's own `switch` is one token), and after such a split it continues
    /// badly (measured: `swit` → `c (type) {`). The prompt's last tokens that lie on the cursor's line — the last
    /// one, and before it those of the same word — are taken off `tokens`, and the first generated tokens are
    /// restricted to those consistent with their bytes, which are returned. Nothing is taken back when the model
    /// cannot restrict its choice, or the tokens do not spell the end of `typed`.
    pub(super) fn take_back(&mut self, model: &impl LanguageModel, tokens: &mut Vec<Token>, typed: &[u8]) -> Vec<u8> {
        if typed.is_empty() || model.n_vocab() == 0 {
            return Vec::new();
        }
        let n_tail = tokens.len().saturating_sub(1).min(MAX_HEAL_TOKENS);
        let pieces: Vec<Vec<u8>> = tokens[tokens.len() - n_tail..].iter().map(|token| model.piece(*token)).collect();
        let (n_heal, healed) = heal_span(&pieces, typed);
        if n_heal == 0 || self.vocab_index(model).is_none() {
            return Vec::new();
        }
        tokens.truncate(tokens.len() - n_heal);
        healed
    }

    /// While healed bytes are left: the greedy choice among the tokens consistent with them, and those tokens.
    pub(super) fn choice(&mut self, model: &mut impl LanguageModel, heal: &[u8]) -> Option<(Token, Vec<Token>)> {
        if heal.is_empty() {
            return None;
        }
        let allowed = self.vocab_index(&*model)?.consistent_with(heal);
        let token = model.sample_among(&allowed)?;
        Some((token, allowed))
    }

    pub(super) fn vocab_index(&mut self, model: &impl LanguageModel) -> Option<&VocabIndex> {
        if self.vocab.is_none() {
            let started = Instant::now();
            let index = VocabIndex::build(model);
            if let Some(index) = &index {
                tracing::debug!(n_tokens = index.sorted.len(), ms = millis(started.elapsed()), "vocabulary indexed");
            }
            self.vocab = Some(index);
        }
        self.vocab.as_ref().and_then(Option::as_ref)
    }
}

/// Every token's piece, sorted by its bytes, so that the tokens starting with some bytes are one range of it.
/// Tokens without text (control tokens) and end-of-generation tokens are left out.
pub(super) struct VocabIndex {
    sorted: Vec<(Vec<u8>, Token)>,
}

impl VocabIndex {
    fn build(model: &impl LanguageModel) -> Option<VocabIndex> {
        let n_vocab = i32::try_from(model.n_vocab()).ok().filter(|n| *n > 0)?;
        let pieces =
            (0..n_vocab).filter(|token| !model.is_end_of_generation(*token)).map(|token| (model.piece(token), token));
        Some(VocabIndex::from_pieces(pieces))
    }

    pub(super) fn from_pieces(pieces: impl Iterator<Item = (Vec<u8>, Token)>) -> VocabIndex {
        let mut sorted: Vec<(Vec<u8>, Token)> = pieces.filter(|(piece, _)| !piece.is_empty()).collect();
        sorted.sort_unstable();
        VocabIndex { sorted }
    }

    /// The tokens a generation that must start with `bytes` may choose next: those whose piece starts with
    /// `bytes`, and those whose piece is a shorter start of it (more tokens then follow).
    pub(super) fn consistent_with(&self, bytes: &[u8]) -> Vec<Token> {
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
pub(super) fn heal_span(pieces: &[Vec<u8>], typed: &[u8]) -> (usize, Vec<u8>) {
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
