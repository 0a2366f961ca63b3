//! The GGUF header reader: whatever the bytes, it returns a summary or an error, never panics, and allocates
//! little (libFuzzer's malloc limit catches a length field trusted too far); the memory estimate of any summary
//! it returns never overflows.

#![no_main]

use libfuzzer_sys::fuzz_target;
use spark_engine::{gguf, memory};

fuzz_target!(|data: &[u8]| {
    if let Ok(summary) = gguf::read_summary(&mut &data[..]) {
        let n_ctx = memory::effective_n_ctx(131_072, summary.n_ctx_train);
        // Any slot count the settings allow (model.kvSlots) must not overflow either.
        let n_slots = data.first().map_or(1, |byte| u32::from(*byte % 16) + 1);
        let estimate = memory::estimate(data.len() as u64, &summary, n_ctx, n_slots, memory::KvKeys::Q8_0);
        assert!(estimate.total_mib() >= estimate.kv_cache_mib);
    }
});
