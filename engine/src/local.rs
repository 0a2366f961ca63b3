//! The local backend: llama.cpp through `llama-cpp-2`. Only this module touches llama.cpp.

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;

use crate::error::EngineError;
use crate::language_model::{LanguageModel, Token, Verified};
use crate::memory::{KvKeys, MemoryEstimate, N_BATCH};
use crate::model_info::{FimFamily, ModelInfo};
use crate::request::Sampling;

/// The least lead of the greedy choice over the runner-up, in logits, for a batched verification to decide it
/// (`Verified::sure`). Batched and single-token evaluations differ in the low bits of each logit (other matrix and
/// attention kernels), and the KV entries of a batch differ the same way: with a lead of 0.1 the default model's
/// output diverged from plain greedy decoding on a near tie (measured); a closer race is decided by a
/// single-token evaluation. The real-model test in `engine/tests/local_model.rs` checks that the output stays that
/// of plain greedy decoding; it is as exact as llama.cpp's kernels are batch-invariant, no more.
const SURE_MARGIN: f32 = 1.0;

/// llama.cpp's global state may be initialised once per process; models come and go, the backend stays.
fn backend() -> Result<&'static LlamaBackend, EngineError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(|reason| EngineError::Unavailable(format!("llama.cpp backend: {reason}")))
}

/// Loads a model file (`engine::check_model` has checked it) and reads what Spark needs to know about it.
///
/// The file is read, not memory-mapped: llama.cpp repacks most quantized weights (Q4_K among them) into a CPU
/// layout of its own, and with a mapping the file pages it read to make that copy stay resident beside it
/// (llama.cpp issue 16761). Measured here with the three installable models and 4 slots, peak RSS mapped / read:
/// Gemma 3 270M 612 / 599 MiB, Qwen2.5-Coder 0.5B 759 / 732, 1.5B 2,183 / 1,590 MiB; loading took ~0.1–0.6 s
/// longer. `n_ctx` is already capped at the model's training context.
pub fn load_model(
    path: &Path,
    size_bytes: u64,
    threads: usize,
    n_ctx: u32,
) -> Result<(LlamaModel, ModelInfo), EngineError> {
    let backend = backend()?;
    let started = Instant::now();
    let params = LlamaModelParams::default().with_use_mmap(false);
    let model = LlamaModel::load_from_file(backend, path, &params).map_err(|error| EngineError::LoadFailed {
        path: path.to_owned(),
        reason: format!("{error} (truncated or unsupported GGUF?)"),
    })?;
    let architecture = model.meta_val_str("general.architecture").unwrap_or_default();
    let name = model.meta_val_str("general.name").unwrap_or_default();
    let has_chat_template = model.meta_val_str("tokenizer.chat_template").is_ok();
    let chat = if has_chat_template { chat_frame(&model) } else { None };
    let vocab = model.vocab();
    let fim = fim_template(&vocab, &architecture);
    let info = ModelInfo {
        path: path.to_owned(),
        size_bytes,
        architecture,
        name,
        n_params: model.n_params(),
        n_vocab: usize::try_from(vocab.n_tokens()).unwrap_or(0),
        n_ctx_train: model.n_ctx_train(),
        n_ctx: crate::memory::effective_n_ctx(n_ctx, u64::from(model.n_ctx_train())),
        threads,
        fim,
        has_chat_template,
        chat,
        load_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        memory: None,
    };
    Ok((model, info))
}

/// Renders the GGUF's chat template around a marker message (with the assistant's turn opened) and splits it.
fn chat_frame(model: &LlamaModel) -> Option<crate::model_info::ChatFrame> {
    use llama_cpp_2::model::LlamaChatMessage;
    // Long enough that the bindings' output buffer (twice the messages' length) fits the template's text.
    let marker = format!("SPARK{}MESSAGE", "_".repeat(2048));
    let template = model.chat_template(None).ok()?;
    let message = LlamaChatMessage::new("user".to_owned(), marker.clone()).ok()?;
    let rendered = model.apply_chat_template(&template, &[message], true).ok()?;
    let frame = crate::model_info::ChatFrame::from_rendered(&rendered, &marker)?;
    // The same with a system message first, for task prompts that carry one.
    let system_marker = format!("SPARK{}SYSTEM", "_".repeat(2048));
    let with_system = [
        LlamaChatMessage::new("system".to_owned(), system_marker.clone()).ok()?,
        LlamaChatMessage::new("user".to_owned(), marker.clone()).ok()?,
    ];
    Some(match model.apply_chat_template(&template, &with_system, true) {
        Ok(rendered) => frame.with_system(&rendered, &system_marker, &marker),
        Err(_) => frame,
    })
}

fn fim_template(
    vocab: &llama_cpp_2::vocab::LlamaVocab<'_>,
    architecture: &str,
) -> Option<crate::model_info::FimTemplate> {
    let text_of = |token: LlamaToken| -> Option<String> {
        if token.0 < 0 {
            return None;
        }
        vocab.text(token).and_then(|text| text.to_str().ok()).map(str::to_owned)
    };
    let pre = text_of(vocab.fim_pre())?;
    let suf = text_of(vocab.fim_suf())?;
    let mid = text_of(vocab.fim_mid())?;
    let family = FimFamily::detect(architecture, &pre);
    Some(family.template(Some((&pre, &suf, &mid))))
}

/// A context over a loaded model, implementing the session's view of a model.
pub struct LlamaLm<'m> {
    model: &'m LlamaModel,
    context: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    batch_capacity: usize,
    sampler: LlamaSampler,
    sampling: Sampling,
    /// The request's GBNF grammar, kept apart from `sampler`: it is checked against the token `sampler` picks,
    /// and masks the whole vocabulary only when that token breaks it (as llama.cpp's own common sampler does),
    /// since masking 150k tokens costs more than a step of the model.
    grammar: Option<LlamaSampler>,
    last_logits_idx: i32,
    /// Positions of one sequence.
    n_ctx: usize,
    n_seq: usize,
}

impl<'m> LlamaLm<'m> {
    /// A context of `estimate.n_slots` sequences (KV slots) of `info.n_ctx` tokens each. Each sequence has its
    /// own KV stream (`kv_unified` off): attention in one slot never spans the others' cells, and a copy between
    /// slots is a buffer copy. Sliding-window layers keep full-size caches (`swa_full`), so that rolling a
    /// sequence back (prefix reuse, rejected draft tokens) stays exact. Its allocation is where a context too
    /// large for the machine fails: the error carries the estimate the memory check made.
    pub fn new(model: &'m LlamaModel, info: &ModelInfo, estimate: &MemoryEstimate) -> Result<Self, EngineError> {
        let backend = backend()?;
        let n_threads = i32::try_from(info.threads).unwrap_or(1);
        let batch_capacity = N_BATCH as usize;
        let n_seq = estimate.n_slots.max(1);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(info.n_ctx.saturating_mul(n_seq)))
            .with_n_seq_max(n_seq)
            .with_kv_unified(false)
            .with_swa_full(true)
            .with_n_batch(batch_capacity as u32)
            .with_n_ubatch(batch_capacity as u32)
            .with_n_threads(n_threads)
            .with_n_threads_batch(n_threads);
        let params = match estimate.keys {
            KvKeys::Q8_0 => params.with_type_k(KvCacheType::Q8_0),
            KvKeys::F16 => params.with_type_k(KvCacheType::F16),
        };
        let context = model.new_context(backend, params).map_err(|error| EngineError::ContextAllocation {
            path: info.path.clone(),
            estimate: *estimate,
            reason: error.to_string(),
        })?;
        let n_seq = usize::try_from(n_seq).unwrap_or(1);
        Ok(LlamaLm {
            model,
            n_ctx: context.n_ctx() as usize / n_seq,
            n_seq,
            context,
            batch: LlamaBatch::new(batch_capacity, 1),
            batch_capacity,
            sampler: LlamaSampler::greedy(),
            sampling: Sampling::default(),
            grammar: None,
            last_logits_idx: 0,
        })
    }
}

impl LlamaLm<'_> {
    /// Evaluates `tokens` in sequence `seq` in batches; logits for the last token, or for all with `all_logits`
    /// (then `tokens` fit one batch).
    fn decode_batches(
        &mut self,
        seq: usize,
        tokens: &[Token],
        first_pos: usize,
        all_logits: bool,
    ) -> Result<(), EngineError> {
        let seq_id = i32::try_from(seq).map_err(|error| EngineError::Decode(error.to_string()))?;
        for (chunk_idx, chunk) in tokens.chunks(self.batch_capacity).enumerate() {
            self.batch.clear();
            let chunk_pos = first_pos + chunk_idx * self.batch_capacity;
            for (tok_idx, token) in chunk.iter().enumerate() {
                let logits = all_logits || tok_idx + 1 == chunk.len();
                let pos = i32::try_from(chunk_pos + tok_idx).map_err(|error| EngineError::Decode(error.to_string()))?;
                self.batch
                    .add(LlamaToken(*token), pos, &[seq_id], logits)
                    .map_err(|error| EngineError::Decode(error.to_string()))?;
            }
            self.context.decode(&mut self.batch).map_err(|error| EngineError::Decode(error.to_string()))?;
            self.last_logits_idx = self.batch.n_tokens() - 1;
        }
        Ok(())
    }
}

impl LanguageModel for LlamaLm<'_> {
    fn tokenize(&self, text: &str, parse_special: bool) -> Vec<Token> {
        self.model.vocab().tokenize(text.as_bytes(), false, parse_special).into_iter().map(|token| token.0).collect()
    }

    fn bos(&self) -> Option<Token> {
        let vocab = self.model.vocab();
        (vocab.should_add_bos() && vocab.bos().0 >= 0).then(|| vocab.bos().0)
    }

    fn piece(&self, token: Token) -> Vec<u8> {
        self.model.vocab().token_to_piece(LlamaToken(token), false, None)
    }

    fn is_end_of_generation(&self, token: Token) -> bool {
        self.model.vocab().is_eog(LlamaToken(token))
    }

    fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    fn n_seq(&self) -> usize {
        self.n_seq
    }

    fn truncate_cache(&mut self, seq: usize, n_keep: usize) -> Result<(), EngineError> {
        let seq_id = u32::try_from(seq).map_err(|error| EngineError::Decode(error.to_string()))?;
        let n_keep = u32::try_from(n_keep).map_err(|error| EngineError::Decode(error.to_string()))?;
        match self.context.clear_kv_cache_seq(Some(seq_id), Some(n_keep), None) {
            Ok(true) => Ok(()),
            // A partial removal can fail for recurrent models: the sequence starts over empty (removing a whole
            // sequence cannot fail).
            Ok(false) | Err(_) => {
                let _ = self.context.clear_kv_cache_seq(Some(seq_id), None, None);
                Err(EngineError::Decode("the KV cache could not be truncated; the sequence was cleared".into()))
            }
        }
    }

    fn copy_cache(&mut self, src: usize, dst: usize) -> Result<(), EngineError> {
        let to_i32 = |seq: usize| i32::try_from(seq).map_err(|error| EngineError::Decode(error.to_string()));
        let (src_id, dst_id) = (to_i32(src)?, to_i32(dst)?);
        let _ = self.context.clear_kv_cache_seq(Some(dst_id as u32), None, None);
        // Between KV streams llama.cpp copies whole sequences only (no position range).
        self.context.copy_kv_cache_seq(src_id, dst_id, None, None).map_err(|error| {
            let _ = self.context.clear_kv_cache_seq(Some(dst_id as u32), None, None);
            EngineError::Decode(error.to_string())
        })
    }

    fn decode(&mut self, seq: usize, tokens: &[Token], first_pos: usize) -> Result<(), EngineError> {
        self.decode_batches(seq, tokens, first_pos, false)
    }

    fn can_verify(&self) -> bool {
        true
    }

    fn verify(&mut self, seq: usize, tokens: &[Token], first_pos: usize) -> Result<Vec<Verified>, EngineError> {
        if tokens.len() > self.batch_capacity {
            return Err(EngineError::Decode("a draft longer than a batch".into()));
        }
        self.decode_batches(seq, tokens, first_pos, true)?;
        // Greedy: the first highest logit, as llama.cpp's greedy sampler picks it.
        Ok((0..tokens.len())
            .map(|idx| {
                let logits = self.context.get_logits_ith(i32::try_from(idx).unwrap_or(0));
                let (mut best, mut first, mut second) = (0usize, f32::NEG_INFINITY, f32::NEG_INFINITY);
                for (token, logit) in logits.iter().enumerate() {
                    if *logit > first {
                        (best, second, first) = (token, first, *logit);
                    } else if *logit > second {
                        second = *logit;
                    }
                }
                Verified { token: i32::try_from(best).unwrap_or(0), sure: first - second >= SURE_MARGIN }
            })
            .collect())
    }

    fn set_sampling(&mut self, sampling: Sampling) {
        if sampling == self.sampling {
            return;
        }
        self.sampling = sampling;
        self.sampler = sampler_for(sampling);
    }

    fn set_grammar(&mut self, grammar: Option<&str>) -> Result<bool, EngineError> {
        // A new grammar sampler for every request: its state follows the tokens sampled so far.
        self.grammar = match grammar {
            Some(grammar) => Some(
                LlamaSampler::grammar(self.model, grammar, "root")
                    .map_err(|error| EngineError::Decode(format!("the grammar was refused: {error}")))?,
            ),
            None => None,
        };
        Ok(true)
    }

    fn sample(&mut self) -> Token {
        let Some(grammar) = self.grammar.as_mut() else {
            return self.sampler.sample(&self.context, self.last_logits_idx).0;
        };
        let mut candidates = self.context.token_data_array_ith(self.last_logits_idx);
        candidates.apply_sampler(&mut self.sampler);
        let mut token = candidates.selected_token();
        let allowed = token.is_some_and(|token| {
            let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
            single.apply_sampler(grammar);
            single.data.first().is_some_and(|data| data.logit().is_finite())
        });
        if !allowed {
            let mut candidates = self.context.token_data_array_ith(self.last_logits_idx);
            candidates.apply_sampler(grammar);
            candidates.apply_sampler(&mut self.sampler);
            token = candidates.selected_token();
        }
        // The sampler always selects one (greedy and dist do); the end of generation is the safe fallback.
        let token = token.unwrap_or_else(|| self.model.vocab().eos());
        grammar.accept(token);
        self.sampler.accept(token);
        token.0
    }

    fn probability(&self, token: Token) -> Option<f32> {
        let logits = self.context.get_logits_ith(self.last_logits_idx);
        softmax_of(logits, usize::try_from(token).ok()?)
    }

    fn n_vocab(&self) -> usize {
        usize::try_from(self.model.vocab().n_tokens()).unwrap_or(0)
    }

    fn sample_among(&mut self, allowed: &[Token]) -> Option<Token> {
        let logits = self.context.get_logits_ith(self.last_logits_idx);
        let logit = |token: &Token| usize::try_from(*token).ok().and_then(|idx| logits.get(idx)).copied();
        allowed
            .iter()
            .filter_map(|token| Some((logit(token)?, *token)))
            .filter(|(logit, _)| logit.is_finite())
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, token)| token)
    }

    fn probability_among(&self, token: Token, allowed: &[Token]) -> Option<f32> {
        let logits = self.context.get_logits_ith(self.last_logits_idx);
        let among: Vec<f32> = allowed
            .iter()
            .map(|allowed| {
                usize::try_from(*allowed).ok().and_then(|idx| logits.get(idx)).copied().unwrap_or(f32::NEG_INFINITY)
            })
            .collect();
        let idx = allowed.iter().position(|allowed| *allowed == token)?;
        softmax_of(&among, idx)
    }
}

/// The sampler of `sampling`: greedy at temperature zero, else top-k, top-p, temperature and a seeded draw.
fn sampler_for(sampling: Sampling) -> LlamaSampler {
    if sampling.temperature <= 0.0 {
        LlamaSampler::greedy()
    } else {
        LlamaSampler::chain_simple([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::temp(sampling.temperature),
            LlamaSampler::dist(sampling.seed),
        ])
    }
}

/// The softmax probability of entry `idx` of `logits`. Terms more than `NEGLIGIBLE` below the highest logit add
/// at most vocabulary × e^-20 (under 0.1% for 262k entries) and are skipped, so that only a few hundred `exp`
/// calls are made per token instead of one per vocabulary entry.
fn softmax_of(logits: &[f32], idx: usize) -> Option<f32> {
    const NEGLIGIBLE: f32 = 20.0;
    let chosen = *logits.get(idx)?;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() || !chosen.is_finite() {
        return None;
    }
    let floor = max - NEGLIGIBLE;
    let sum: f32 = logits.iter().filter(|logit| **logit > floor).map(|logit| (logit - max).exp()).sum();
    Some((chosen - max).exp() / sum)
}

#[cfg(test)]
mod tests {
    use super::softmax_of;

    #[test]
    fn softmax_of_matches_the_plain_formula() {
        let logits = [2.0f32, 1.0, 0.5, -3.0, -40.0];
        let sum: f32 = logits.iter().map(|logit| logit.exp()).sum();
        for (idx, logit) in logits.iter().enumerate() {
            let expected = logit.exp() / sum;
            let got = softmax_of(&logits, idx).unwrap();
            assert!((got - expected).abs() < 1e-6, "entry {idx}: {got} vs {expected}");
        }
        assert_eq!(softmax_of(&logits, 9), None);
        assert_eq!(softmax_of(&[f32::NAN, 1.0], 0), None);
    }
}
