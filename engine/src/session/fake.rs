//! A scripted model: one token per character, a KV cache per sequence. After the prompt it "generates" a
//! fixed continuation, or with a `rule` the token the rule gives for the sequence so far.

use std::time::Duration;

use crate::error::EngineError;
use crate::language_model::{LanguageModel, Token, Verified};
use crate::request::Sampling;

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
