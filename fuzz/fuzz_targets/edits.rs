//! Incremental edits with position conversion: any sequence of edits, with any positions in any encoding,
//! leaves the document equal to a plain-string reference, its tree equal to a fresh parse, and never panics.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ropey::Rope;
use spark_grammars::Lang;
use spark_ide::document::{Change, Document};
use spark_ide::parse;
use spark_ide::position::{self, LspPosition, PositionEncoding};

fuzz_target!(|data: &[u8]| {
    let Some((&header, rest)) = data.split_first() else { return };
    let encoding = [PositionEncoding::Utf8, PositionEncoding::Utf16, PositionEncoding::Utf32][usize::from(header % 3)];
    let lang = [Some(Lang::Rust), Some(Lang::TypeScript), None][usize::from(header / 3 % 3)];
    let text = String::from_utf8_lossy(rest);
    // The input is an initial text and edits separated by 0xff-free markers: split at '\u{1}'.
    let mut parts = text.split('\u{1}');
    let initial = parts.next().unwrap_or("");
    let mut reference = initial.to_owned();
    let mut document = Document::new(initial, "fuzz", lang, 0);
    for (version, part) in parts.enumerate() {
        let mut bytes = part.bytes();
        let (line, character, line2, character2) = (
            u32::from(bytes.next().unwrap_or(0) % 8),
            u32::from(bytes.next().unwrap_or(0) % 64),
            u32::from(bytes.next().unwrap_or(0) % 8),
            u32::from(bytes.next().unwrap_or(0) % 64),
        );
        let inserted: String = part.chars().skip(4).collect();
        let start = LspPosition { line, character };
        let end = LspPosition { line: line2, character: character2 };
        // The reference resolves positions the same way, then edits a plain String.
        let rope = Rope::from_str(&reference);
        let (a, b) = (position::to_byte(&rope, start, encoding).byte, position::to_byte(&rope, end, encoding).byte);
        assert!(reference.is_char_boundary(a) && reference.is_char_boundary(b));
        let (a, b) = (a.min(b), a.max(b));
        reference.replace_range(a..b, &inserted);
        document.apply_changes(&[Change { range: Some((start, end)), text: inserted }], encoding, version as i32 + 1);
        assert_eq!(document.text(), reference);
        // Round trip of every position the document can name.
        for (byte, _) in reference.char_indices().step_by(7) {
            let at = position::to_position(&document.rope, byte, encoding);
            let back = position::to_byte(&document.rope, at, encoding).byte;
            let between_cr_lf =
                byte > 0 && reference.as_bytes()[byte - 1] == b'\r' && reference.as_bytes()[byte] == b'\n';
            assert!(back == byte || between_cr_lf, "byte {byte} -> {at:?} -> {back}");
        }
    }
    if let (Some(lang), Some(tree)) = (lang, document.tree.as_ref()) {
        if let Some(fresh) = parse::rope(lang, &Rope::from_str(&reference), None) {
            assert_eq!(tree.root_node().to_sexp(), fresh.root_node().to_sexp());
        }
    }
});
