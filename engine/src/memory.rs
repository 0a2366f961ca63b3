//! Whether a model fits the memory Spark may use, decided before llama.cpp allocates anything: an estimate from
//! the GGUF header (weights, the KV cache for the context size, llama.cpp's compute buffer) against a limit (the
//! `model.maxMemoryMb` setting, else the memory available when the model loads).

use std::fmt;

use crate::gguf::GgufSummary;

/// Tokens per batch the local backend creates its contexts with; the compute buffer grows with it.
pub const N_BATCH: u32 = 512;

const MIB: u64 = 1024 * 1024;

/// The most KV slots chosen from the memory limit: three recently used documents and the tasks.
pub const MAX_AUTO_SLOTS: u32 = 4;
/// The most KV slots a setting may ask for.
pub const MAX_SLOTS: u32 = 16;

/// How the KV cache stores keys (`model.kvCacheKeys`); values stay f16 (llama.cpp quantizes values only with
/// flash attention, which changes the CPU kernels' speed and rounding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvKeys {
    /// The default: in two ghost-text evaluation runs side by side, 8-bit keys showed about as many right first
    /// lines (36 against 34) and more wrong ones (Rust 199 against 172, TypeScript 42 against 22).
    #[default]
    F16,
    /// 8-bit blocks of 32 keys with an f16 scale (34 bytes per 32 keys): a quarter less KV memory than f16 keys
    /// (measured with 4 slots of the default model: RSS 550–566 MiB against 616).
    Q8_0,
}

impl KvKeys {
    /// Bytes per `n` keys.
    fn bytes(self, n: u64) -> u64 {
        match self {
            KvKeys::Q8_0 => n.div_ceil(32).saturating_mul(34),
            KvKeys::F16 => n.saturating_mul(2),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvKeys::Q8_0 => "q8_0",
            KvKeys::F16 => "f16",
        }
    }

    /// The setting's value: `q8_0` or `f16`.
    pub fn parse(value: &str) -> Option<KvKeys> {
        match value {
            "q8_0" => Some(KvKeys::Q8_0),
            "f16" => Some(KvKeys::F16),
            _ => None,
        }
    }
}

/// What a model with `n_slots` KV sequences of `n_ctx` tokens each will take, in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEstimate {
    pub n_ctx: u32,
    pub n_slots: u32,
    pub keys: KvKeys,
    pub weights_mib: u64,
    pub kv_cache_mib: u64,
    pub compute_mib: u64,
    /// llama.cpp's vocabulary tables (token texts, the tokenizer's maps, the sampler's candidate array).
    pub vocab_mib: u64,
}

/// Resident bytes per vocabulary entry beyond the weights, KV cache and compute buffer. Measured with
/// `spark-bench --engine` (4 slots, after a few hundred requests), the process held 70 MiB more than those for
/// Gemma 3 (262,144 entries) and 42 MiB more for Qwen2.5-Coder 0.5B (151,936); the server with one slot right after
/// loading Gemma held 29 MiB more. The part that grows with the vocabulary is counted.
const VOCAB_ENTRY_BYTES: u64 = 128;

impl MemoryEstimate {
    pub fn total_mib(&self) -> u64 {
        self.weights_mib + self.kv_cache_mib + self.compute_mib + self.vocab_mib
    }
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "~{} MiB with contextSize {} (weights {}, KV cache {} for {} slot{} with {} keys, compute {}, vocabulary {})",
            self.total_mib(),
            self.n_ctx,
            self.weights_mib,
            self.kv_cache_mib,
            self.n_slots,
            if self.n_slots == 1 { "" } else { "s" },
            self.keys.name(),
            self.compute_mib,
            self.vocab_mib
        )
    }
}

/// The context the backend will really create: the request, capped at what the model was trained for.
pub fn effective_n_ctx(requested: u32, n_ctx_train: u64) -> u32 {
    match u32::try_from(n_ctx_train) {
        Ok(0) => requested,
        Ok(trained) => requested.min(trained.max(512)),
        Err(_) => requested,
    }
}

/// Weights are the file (read into memory, repacked or not: the same size); the KV cache holds keys (`keys`) and f16 values for every layer and position
/// (llama.cpp keeps full-size caches for sliding-window layers too, and clears the whole buffer, so all of it is
/// resident); the compute buffer counts one layer's attention scores for a full batch and one row of logits. llama.cpp also reserves
/// logits for every token of a batch (512 x the vocabulary: 512 MiB for Gemma 3), but Spark asks for one row per
/// batch, so those pages are never touched and are left out: the estimate is what the process will hold.
/// Each KV slot has its own cache of `n_ctx` positions.
pub fn estimate(file_bytes: u64, summary: &GgufSummary, n_ctx: u32, n_slots: u32, keys: KvKeys) -> MemoryEstimate {
    let n_ctx_u64 = u64::from(n_ctx);
    // Per position and layer: each KV head's key row (quantized in blocks along the row) and value row.
    let per_head = keys.bytes(summary.key_length).saturating_add(summary.value_length.saturating_mul(2));
    let kv_bytes = n_ctx_u64
        .saturating_mul(u64::from(n_slots.max(1)))
        .saturating_mul(summary.n_layer)
        .saturating_mul(summary.n_head_kv)
        .saturating_mul(per_head);
    // One row of f32 logits, and f32 attention scores for a full batch against the whole context.
    let compute_bytes = u64::from(N_BATCH)
        .saturating_mul(n_ctx_u64)
        .saturating_mul(summary.n_head)
        .saturating_add(summary.n_vocab)
        .saturating_mul(4);
    MemoryEstimate {
        n_ctx,
        n_slots: n_slots.max(1),
        keys,
        weights_mib: file_bytes.div_ceil(MIB),
        kv_cache_mib: kv_bytes.div_ceil(MIB),
        compute_mib: compute_bytes.div_ceil(MIB),
        vocab_mib: summary.n_vocab.saturating_mul(VOCAB_ENTRY_BYTES).div_ceil(MIB),
    }
}

/// How many KV slots to create: the setting (capped at `MAX_SLOTS`), else the most (up to `MAX_AUTO_SLOTS`) whose
/// estimate fits `budget_mib` (`None`: no limit); one when not even two fit.
pub fn choose_slots(
    setting: Option<u32>,
    file_bytes: u64,
    summary: &GgufSummary,
    n_ctx: u32,
    keys: KvKeys,
    budget_mib: Option<u64>,
) -> u32 {
    if let Some(slots) = setting {
        return slots.clamp(1, MAX_SLOTS);
    }
    let Some(budget_mib) = budget_mib else { return MAX_AUTO_SLOTS };
    (1..=MAX_AUTO_SLOTS)
        .rev()
        .find(|slots| estimate(file_bytes, summary, n_ctx, *slots, keys).total_mib() <= budget_mib)
        .unwrap_or(1)
}

/// `MemAvailable` from `/proc/meminfo`, in MiB; `None` where there is no such file.
pub fn available_mib() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u64 = line.trim_start_matches("MemAvailable:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_model_at_4096_tokens() {
        let summary = crate::gguf::read_summary(&mut crate::gguf::tests::gemma_like().as_slice()).unwrap();
        let summary = GgufSummary { n_vocab: 262_144, ..summary };
        // llama.cpp reports 235 MiB of weights and a 72 MiB KV cache (12 + 60); the server measured 376 MiB RSS.
        let estimate = estimate(253_113_024, &summary, 4096, 1, KvKeys::F16);
        assert_eq!(
            (estimate.weights_mib, estimate.kv_cache_mib, estimate.compute_mib, estimate.vocab_mib),
            (242, 72, 33, 32)
        );
        assert_eq!(
            estimate.to_string(),
            "~379 MiB with contextSize 4096 (weights 242, KV cache 72 for 1 slot with f16 keys, compute 33, vocabulary 32)"
        );
        let four = super::estimate(253_113_024, &summary, 4096, 4, KvKeys::F16);
        assert_eq!((four.kv_cache_mib, four.total_mib()), (288, 595));
        // 8-bit keys: 34 bytes per 32 keys instead of 64 (llama.cpp reports 12 + 60 MiB for f16, and 8-bit keys
        // take 14,112 bytes per position instead of 18,432).
        let eight = super::estimate(253_113_024, &summary, 4096, 1, KvKeys::Q8_0);
        assert_eq!(eight.kv_cache_mib, 56);
        assert_eq!(super::estimate(253_113_024, &summary, 4096, 4, KvKeys::Q8_0).total_mib(), 528);
        // Slots from the limit: as many as fit, at most four; one when the limit is tight.
        let f16 = KvKeys::F16;
        assert_eq!(choose_slots(None, 253_113_024, &summary, 4096, f16, Some(600)), 4);
        assert_eq!(choose_slots(None, 253_113_024, &summary, 4096, f16, Some(530)), 3);
        assert_eq!(choose_slots(None, 253_113_024, &summary, 4096, f16, Some(100)), 1);
        assert_eq!(choose_slots(None, 253_113_024, &summary, 4096, f16, None), 4);
        assert_eq!(choose_slots(Some(2), 253_113_024, &summary, 4096, f16, Some(100)), 2);
        assert_eq!(choose_slots(None, 253_113_024, &summary, 4096, KvKeys::Q8_0, Some(530)), 4);
        assert_eq!(effective_n_ctx(131_072, summary.n_ctx_train), 32_768);
        assert_eq!(effective_n_ctx(4096, 0), 4096);
    }

    #[test]
    fn mem_available_in_mib() {
        let meminfo = "MemTotal:       24683520 kB\nMemFree:         1677312 kB\nMemAvailable:   24117248 kB\n";
        assert_eq!(parse_mem_available(meminfo), Some(23_552));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }
}
