//! Suggestion post-processing: `stop_at` cuts on character boundaries and `finalize` never panics, never
//! grows the text and never returns whitespace, whatever the model generated and whatever follows the cursor.

#![no_main]

use libfuzzer_sys::fuzz_target;
use spark_engine::postprocess::{finalize, stop_at, StopContext};
use spark_engine::StopMode;

fuzz_target!(|data: &[u8]| {
    let Some((&header, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (generated, suffix) = text.split_once('\u{1}').unwrap_or((&text, ""));
    let (suffix, indent) = suffix.split_once('\u{1}').unwrap_or((suffix, "    "));
    let mode = [StopMode::Line, StopMode::Block, StopMode::Free][usize::from(header % 3)];
    let context = StopContext { mode, indent, suffix, max_lines: usize::from(header / 3 % 10) + 1 };
    if let Some(cut) = stop_at(generated, &context) {
        assert!(cut <= generated.len() && generated.is_char_boundary(cut));
    }
    if let Some(done) = finalize(generated, &context) {
        assert!(done.len() <= generated.len());
        assert!(!done.trim().is_empty());
        if mode == StopMode::Line {
            assert!(!done.contains('\n'));
        }
    }
});
