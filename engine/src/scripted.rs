//! A scripted model for testing what is built on the engine: each request "generates" the next text of a
//! script, one character per token. Everything around the model is the real engine: the queue, newest-wins,
//! stop strings, stop rules, deadlines and the suggestion cache.

use crate::error::EngineError;
use crate::language_model::{LanguageModel, Token};
use crate::request::Sampling;

const END: Token = -2;

pub struct ScriptedModel {
    outputs: Vec<String>,
    next_output: usize,
    current: Vec<char>,
    position: usize,
    cache_len: usize,
}

impl ScriptedModel {
    /// Requests get `outputs` in turn (cycling when they run out).
    pub fn new(outputs: Vec<String>) -> ScriptedModel {
        ScriptedModel { outputs, next_output: 0, current: Vec::new(), position: 0, cache_len: 0 }
    }
}

impl LanguageModel for ScriptedModel {
    fn tokenize(&self, text: &str, _parse_special: bool) -> Vec<Token> {
        text.chars().map(|ch| ch as Token).collect()
    }

    fn bos(&self) -> Option<Token> {
        None
    }

    fn piece(&self, token: Token) -> Vec<u8> {
        char::from_u32(token as u32).map(|ch| ch.to_string().into_bytes()).unwrap_or_default()
    }

    fn is_end_of_generation(&self, token: Token) -> bool {
        token == END
    }

    fn n_ctx(&self) -> usize {
        1 << 20
    }

    fn truncate_cache(&mut self, _seq: usize, n_keep: usize) -> Result<(), EngineError> {
        self.cache_len = self.cache_len.min(n_keep);
        Ok(())
    }

    fn copy_cache(&mut self, _src: usize, _dst: usize) -> Result<(), EngineError> {
        Ok(())
    }

    fn decode(&mut self, _seq: usize, tokens: &[Token], _first_pos: usize) -> Result<(), EngineError> {
        self.cache_len += tokens.len();
        Ok(())
    }

    /// The session sets the sampling once per request, before generating: the next script text starts.
    fn set_sampling(&mut self, _sampling: Sampling) {
        self.current = match self.outputs.is_empty() {
            true => Vec::new(),
            false => self.outputs[self.next_output % self.outputs.len()].chars().collect(),
        };
        self.next_output += 1;
        self.position = 0;
    }

    fn sample(&mut self) -> Token {
        let token = self.current.get(self.position).map(|ch| *ch as Token).unwrap_or(END);
        self.position += 1;
        token
    }
}
