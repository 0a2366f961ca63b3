//! The GGUF header reader: whatever the bytes, it returns a summary or an error, never panics, and allocates
//! little (libFuzzer's malloc limit catches a length field trusted too far); the memory estimate of any summary
//! it returns never overflows.

#![no_main]

use libfuzzer_sys::fuzz_target;
use spark_engine::{gguf, memory};

fuzz_target!(|data: &[u8]| {
    if let Ok(summary) = gguf::read_summary(&mut &data[..]) {
        let n_ctx = memory::effective_n_ctx(131_072, summary.n_ctx_train);
        let estimate = memory::estimate(data.len() as u64, &summary, n_ctx);
        assert!(estimate.total_mib() >= estimate.kv_cache_mib);
    }
});
