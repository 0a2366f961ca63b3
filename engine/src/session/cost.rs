//! What evaluation costs here, measured as it runs: `ChunkCost` sizes prompt chunks to a keystroke's deadline
//! (and background work's chunks to a short time), `StepCost` tells whether one more generation step fits.

use std::time::{Duration, Instant};

use crate::request::CompletionRequest;

/// Prompt tokens are evaluated in chunks so that a cancel lands within one chunk; what was evaluated stays
/// cached, so a cancelled cold prompt still warms the cache for the next keystroke. A keystroke's chunks are sized
/// to end before its deadline ([`ChunkCost`]); before anything was measured a chunk is `PROMPT_CHUNK` tokens, and
/// never more than `MAX_PROMPT_CHUNK`.
const PROMPT_CHUNK: usize = 64;
const MAX_PROMPT_CHUNK: usize = 512;
/// The share of the time left before a deadline that a keystroke's prompt chunk is sized to: the estimate is an
/// average, and tokens later in a long prompt cost more (attention).
const DEADLINE_SHARE: f64 = 0.8;
/// Chunks the cost estimate is fitted to (the most recent).
const COST_SAMPLES: usize = 8;
/// Background work evaluates smaller chunks: a keystroke arriving meanwhile waits for at most one of them. A chunk
/// is sized from the measured cost per prompt token to take about `BACKGROUND_CHUNK_TIME` (a bigger model gets
/// fewer tokens per chunk), and holds between `MIN_PROMPT_CHUNK` and `BACKGROUND_PROMPT_CHUNK` tokens: a chunk
/// pays a fixed cost (~60 ms for the 0.5B on 2 cores, the weights read once), so a 30 ms target sized chunks of
/// one token, and a cold 300-token prompt took ~300 decodes in the background.
const BACKGROUND_PROMPT_CHUNK: usize = 32;
const BACKGROUND_CHUNK_TIME: Duration = Duration::from_millis(150);
/// The biggest prompt chunk of a request that finishes a cut keystroke (`CompletionRequest::resume`): the user
/// waits for it, and a keystroke arriving meanwhile waits for at most this one chunk (~400 ms for the 0.5B on 2
/// cores).
const RESUME_PROMPT_CHUNK: usize = 64;
/// The smallest chunk worth starting before a deadline (smaller ones cost more per token).
pub(super) const MIN_PROMPT_CHUNK: usize = 16;

/// What evaluating a chunk of prompt tokens costs on this machine: a fixed part per chunk (the weights are read
/// once per batch) plus a part per token, fitted (least squares) to the chunks measured lately. Measured with
/// llama-server on 2 cores, Qwen2.5-Coder 0.5B: 16 tokens 137 ms, 32 211 ms, 64 370 ms, 128 748 ms (~60 ms + 5.5 ms a
/// token); Gemma 3 270M 54, 88, 144, 269 ms. A cost per token alone, measured on small chunks, rated small chunks
/// dear and so sized the next ones small again: a cold 550-token prompt took ~34 keystrokes of 16 tokens each.
#[derive(Debug, Clone, Default)]
pub(super) struct ChunkCost {
    /// (tokens, microseconds) of the most recent chunks, oldest first.
    samples: std::collections::VecDeque<(f64, f64)>,
}

impl ChunkCost {
    pub(super) fn record(&mut self, n_tokens: usize, elapsed: Duration) {
        if self.samples.len() == COST_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back((n_tokens as f64, elapsed.as_secs_f64() * 1e6));
    }

    /// How many prompt tokens the next chunk of `request` holds, `n_left` of them still to evaluate; `None` when
    /// the deadline leaves no time for one.
    pub(super) fn next_chunk(&self, request: &CompletionRequest, n_left: usize, n_decoded: usize) -> Option<usize> {
        // Past the deadline the answer is empty anyway; what was evaluated stays cached, so the next request
        // goes on from there instead of paying for all of a huge prompt at once. A chunk is sized to end
        // before the deadline (from the measured cost per token), so a keystroke's answer is not held up by
        // a chunk that started just before it.
        let left = request.deadline.saturating_duration_since(Instant::now());
        let fits = self.fits(left.mul_f64(DEADLINE_SHARE)).unwrap_or(PROMPT_CHUNK);
        let least = MIN_PROMPT_CHUNK.min(n_left);
        // A request that has evaluated nothing yet evaluates one small chunk all the same: the estimate may be
        // stale (the first chunk after loading a model pays for buffer set-up), and only a new measurement
        // corrects it. Without this, one slow chunk stalled every later keystroke at zero progress.
        if left.is_zero() || (fits < least && n_decoded > 0) {
            return None;
        }
        let chunk_cap = match (request.background, request.resume) {
            (true, true) => RESUME_PROMPT_CHUNK,
            (true, false) => self.background_chunk(),
            (false, _) => MAX_PROMPT_CHUNK,
        };
        Some(fits.max(least).min(chunk_cap).min(n_left))
    }

    /// Prompt tokens per background chunk: what fits `BACKGROUND_CHUNK_TIME` at the measured cost per token.
    fn background_chunk(&self) -> usize {
        self.fits(BACKGROUND_CHUNK_TIME)
            .unwrap_or(BACKGROUND_PROMPT_CHUNK)
            .clamp(MIN_PROMPT_CHUNK, BACKGROUND_PROMPT_CHUNK)
    }

    /// (fixed µs per chunk, µs per token), or `None` before any chunk was measured.
    pub(super) fn fit(&self) -> Option<(f64, f64)> {
        if self.samples.is_empty() {
            return None;
        }
        let count = self.samples.len() as f64;
        let mean_n = self.samples.iter().map(|(n, _)| n).sum::<f64>() / count;
        let mean_us = self.samples.iter().map(|(_, us)| us).sum::<f64>() / count;
        let spread: f64 = self.samples.iter().map(|(n, _)| (n - mean_n).powi(2)).sum();
        let covariance: f64 = self.samples.iter().map(|(n, us)| (n - mean_n) * (us - mean_us)).sum();
        if spread > 0.0 {
            let per_token = covariance / spread;
            let fixed = mean_us - per_token * mean_n;
            if per_token > 0.0 && fixed >= 0.0 {
                return Some((fixed, per_token));
            }
        }
        // Chunks of one size only, or a fit that noise bent out of shape: all of the cost per token.
        let tokens: f64 = self.samples.iter().map(|(n, _)| n).sum();
        Some((0.0, mean_us * count / tokens.max(1.0)))
    }

    /// The most tokens a chunk may hold to end within `budget`; `None` before anything was measured. At most twice
    /// the biggest chunk measured: the fitted line is not trusted far beyond its samples.
    pub(super) fn fits(&self, budget: Duration) -> Option<usize> {
        let (fixed, per_token) = self.fit()?;
        let tokens = (budget.as_secs_f64() * 1e6 - fixed) / per_token.max(1.0);
        let biggest = self.samples.iter().map(|(n, _)| *n).fold(0.0, f64::max);
        Some(if tokens.is_finite() && tokens > 0.0 { tokens.min(2.0 * biggest) as usize } else { 0 })
    }
}

/// What one generation step (sampling a token and evaluating it) costs here: the median of the last few plain
/// steps, robust to one step slowed by another process. A step that would end past a keystroke's deadline is not
/// started: the answer then comes at the deadline instead of up to a step after it (Qwen2.5-Coder 0.5B: ~32 ms
/// a step on 2 cores), and typing along continues the generation from there.
#[derive(Debug, Clone, Default)]
pub(super) struct StepCost {
    recent: std::collections::VecDeque<Duration>,
}

impl StepCost {
    pub(super) fn record(&mut self, elapsed: Duration) {
        if self.recent.len() == COST_SAMPLES {
            self.recent.pop_front();
        }
        self.recent.push_back(elapsed);
    }

    pub(super) fn median(&self) -> Option<Duration> {
        let mut sorted: Vec<Duration> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied()
    }
}

pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
