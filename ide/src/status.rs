//! The workspace's status as plain data (`spark/status` in the LSP server, which writes it as JSON): the model's
//! state, the last latency, the remote endpoint, the execution tier, the strong tier and the engine's counters.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use spark_engine::{CompletionStats, EngineCounters, EngineState, RemoteCounters};

use crate::exec_check::VerifySettings;

#[derive(Debug, Clone)]
pub struct Status {
    pub state: EngineState,
    /// `None` when no remote endpoint is configured.
    pub remote: Option<RemoteStatus>,
    pub verify: VerifySettings,
    /// The strong tier's model, when it is loaded.
    pub strong_tier: Option<PathBuf>,
    pub last_latency_ms: Option<u64>,
    pub totals: Totals,
    /// The last model call's counters.
    pub last: Option<CompletionStats>,
}

#[derive(Debug, Clone)]
pub struct RemoteStatus {
    pub url: String,
    pub model: String,
    /// Down from a failure until a request succeeds: the last error and the wait before the next probe (zero:
    /// the next request probes it).
    pub down: Option<(String, Duration)>,
    pub counters: RemoteCounters,
}

/// The engine's counters over its life.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub requests: u64,
    pub superseded: u64,
    pub cancelled: u64,
    pub n_prompt: u64,
    pub n_reused: u64,
    pub n_decoded: u64,
    pub n_generated: u64,
    pub cache_hits: u64,
    pub n_copied: u64,
    pub n_carried: u64,
    pub n_drafted: u64,
    pub n_accepted: u64,
}

impl Totals {
    pub fn of(counters: &EngineCounters) -> Totals {
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        Totals {
            requests: load(&counters.requests),
            superseded: load(&counters.superseded),
            cancelled: load(&counters.cancelled),
            n_prompt: load(&counters.n_prompt),
            n_reused: load(&counters.n_reused),
            n_decoded: load(&counters.n_decoded),
            n_generated: load(&counters.n_generated),
            cache_hits: load(&counters.cache_hits),
            n_copied: load(&counters.n_copied),
            n_carried: load(&counters.n_carried),
            n_drafted: load(&counters.n_drafted),
            n_accepted: load(&counters.n_accepted),
        }
    }
}
