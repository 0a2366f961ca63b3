//! What the engine is told and what it tells: the configuration (`EngineConfig`, `ModelSource`), the model's
//! state (`EngineState`, watched by the server), and the counters of its calls (`EngineCounters`, `RecentCall`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::EngineError;
use crate::memory::KvKeys;
use crate::model_info::ModelInfo;
use crate::request::{Completion, CompletionStats, StopReason};

/// Which model to load and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    pub model: ModelSource,
    pub threads: usize,
    pub n_ctx: u32,
    /// The most memory the model may take, in MiB; `None` means the memory available when it loads, zero means
    /// no check.
    pub max_memory_mb: Option<u64>,
    /// KV-cache prefix reuse and the suggestion cache (`model.reuse`, default on). Off, every prompt is evaluated
    /// from an empty cache: the baseline the benchmark compares against.
    pub reuse: bool,
    /// KV slots (sequences in the one context); `None` derives the count from the memory limit.
    pub kv_slots: Option<u32>,
    /// Prompt-lookup speculative decoding for greedy requests (`model.speculative`, default off: llama.cpp
    /// evaluates a batch with other kernels than a single token, and on a near tie the output can differ from
    /// plain greedy decoding; see `local::SURE_MARGIN`).
    pub speculative: bool,
    /// How the KV cache stores keys (`model.kvCacheKeys`, default f16).
    pub kv_keys: KvKeys,
}

impl EngineConfig {
    /// A configuration with Spark's defaults for everything but the model and threads.
    pub fn new(model: ModelSource, threads: usize) -> EngineConfig {
        EngineConfig {
            model,
            threads,
            n_ctx: 4096,
            max_memory_mb: None,
            reuse: true,
            kv_slots: None,
            speculative: false,
            kv_keys: KvKeys::default(),
        }
    }
}

/// Where the model comes from; `None` when nothing is configured and the default is not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    Path(PathBuf),
    None,
}

/// The model's state, watched by the server (progress, status bar, `spark/status`).
#[derive(Debug, Clone, PartialEq)]
pub enum EngineState {
    Loading { path: PathBuf },
    Ready(Arc<ModelInfo>),
    Failed { error: EngineError },
}

/// How many recent model calls `EngineCounters::recent` keeps.
pub const RECENT_CAP: usize = 4096;

/// One model call, as a benchmark sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentCall {
    pub stats: CompletionStats,
    pub stop: StopReason,
    pub background: bool,
    /// Bytes of text the call answered with (after post-processing).
    pub produced: usize,
}

/// Totals over the engine's life, for `spark/status` and benchmarks.
#[derive(Debug, Default)]
pub struct EngineCounters {
    pub requests: AtomicU64,
    pub superseded: AtomicU64,
    pub cancelled: AtomicU64,
    pub n_prompt: AtomicU64,
    pub n_reused: AtomicU64,
    pub n_decoded: AtomicU64,
    pub n_generated: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Prompt tokens copied between KV slots instead of evaluated.
    pub n_copied: AtomicU64,
    /// Generated tokens carried over to a later request that typed along them.
    pub n_carried: AtomicU64,
    /// Speculative decoding: tokens drafted by prompt lookup, and those the model confirmed.
    pub n_drafted: AtomicU64,
    pub n_accepted: AtomicU64,
    pub last: Mutex<Option<CompletionStats>>,
    /// The most recent model calls (at most `RECENT_CAP`), oldest first: what a benchmark reads medians from.
    pub recent: Mutex<VecDeque<RecentCall>>,
}

impl EngineCounters {
    /// Counts one model call and keeps it among the recent ones.
    pub(crate) fn record(&self, completion: &Completion, background: bool) {
        let stats = completion.stats;
        if completion.stop == StopReason::Cancelled {
            self.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        self.n_prompt.fetch_add(stats.n_prompt as u64, Ordering::Relaxed);
        self.n_reused.fetch_add(stats.n_reused as u64, Ordering::Relaxed);
        self.n_decoded.fetch_add(stats.n_decoded as u64, Ordering::Relaxed);
        self.n_generated.fetch_add(stats.n_generated as u64, Ordering::Relaxed);
        self.n_copied.fetch_add(stats.n_copied as u64, Ordering::Relaxed);
        self.n_carried.fetch_add(stats.n_carried as u64, Ordering::Relaxed);
        self.n_drafted.fetch_add(stats.n_drafted as u64, Ordering::Relaxed);
        self.n_accepted.fetch_add(stats.n_accepted as u64, Ordering::Relaxed);
        if !background {
            *self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(stats);
        }
        let mut recent = self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if recent.len() >= RECENT_CAP {
            recent.pop_front();
        }
        recent.push_back(RecentCall { stats, stop: completion.stop, background, produced: completion.text.len() });
        drop(recent);
        tracing::debug!(
            n_prompt = stats.n_prompt,
            n_reused = stats.n_reused,
            n_decoded = stats.n_decoded,
            n_generated = stats.n_generated,
            slot = stats.slot,
            n_copied = stats.n_copied,
            n_carried = stats.n_carried,
            n_drafted = stats.n_drafted,
            n_accepted = stats.n_accepted,
            queue_ms = stats.queue_ms,
            prompt_ms = stats.prompt_ms,
            first_token_ms = stats.first_token_ms,
            generate_us = stats.generate_us,
            background,
            total_ms = stats.total_ms,
            stop = ?completion.stop,
            "completion"
        );
    }
}
