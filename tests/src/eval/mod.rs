//! The evaluation ("the ruler"): real code nobody on Spark wrote ([`corpus`]), cases generated from it with a
//! fixed seed ([`cases`]), Spark driven over stdio as an editor drives it ([`drive`]), and every answer scored by
//! independent checks — the real compilers, the crates' and packages' own code under test, the `regex` crate and
//! node's `RegExp` ([`check`]) — never by Spark's own verifier. Next-edit cases come from consecutive releases
//! and are scored against the real next version ([`history`]). [`report`] turns the results into the table,
//! JSON and a plot under `target/eval/`.

pub mod cases;
pub mod check;
pub mod corpus;
pub mod drive;
pub mod history;
pub mod llama_vim;
pub mod report;
pub mod run;

use std::path::PathBuf;

/// The seed every case is drawn with: the same corpus gives the same cases on every machine.
pub const SEED: u64 = 0x5eed_2026_1201;

/// Where everything the evaluation fetches, builds and writes lives (never committed).
pub fn eval_dir() -> PathBuf {
    let root = crate::workspace_root();
    root.canonicalize().unwrap_or(root).join("target/eval")
}

/// A small deterministic generator (splitmix64): no dependency, same sequence everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for idx in (1..items.len()).rev() {
            let other = self.below(idx + 1);
            items.swap(idx, other);
        }
    }
}

/// FNV-1a, for cache keys.
pub fn fingerprint(parts: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= byte as u64;
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}
