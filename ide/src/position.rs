//! The one place where LSP positions meet byte offsets. Positions count code units of the negotiated encoding
//! (UTF-8, UTF-16 or UTF-32); lines end at `\n`, `\r\n` or `\r`. A position past the end of its line or of the
//! document, or inside a character, is clamped (and reported as clamped so the caller can log it), never a panic.

use ropey::Rope;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PositionEncoding {
    Utf8,
    #[default]
    Utf16,
    Utf32,
}

impl PositionEncoding {
    pub fn as_lsp_str(self) -> &'static str {
        match self {
            PositionEncoding::Utf8 => "utf-8",
            PositionEncoding::Utf16 => "utf-16",
            PositionEncoding::Utf32 => "utf-32",
        }
    }

    /// Picks what the client offers, preferring UTF-8 (no conversion), then UTF-32; UTF-16 when it offers none.
    pub fn negotiate(offered: &[String]) -> PositionEncoding {
        if offered.iter().any(|kind| kind == "utf-8") {
            PositionEncoding::Utf8
        } else if offered.iter().any(|kind| kind == "utf-32") {
            PositionEncoding::Utf32
        } else {
            PositionEncoding::Utf16
        }
    }
}

/// A position as LSP has it: zero-based line and a column in code units of the encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LspPosition {
    pub line: u32,
    pub character: u32,
}

/// A byte offset into the document and whether the position had to be clamped to get it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub byte: usize,
    pub clamped: bool,
}

/// Byte offset of a position; clamped to the line's end (before its line break) and the document's end.
pub fn to_byte(rope: &Rope, position: LspPosition, encoding: PositionEncoding) -> Resolved {
    let line = position.line as usize;
    if line >= rope.len_lines() {
        return Resolved { byte: rope.len_bytes(), clamped: true };
    }
    let line_start_char = rope.line_to_char(line);
    let line_slice = rope.line(line);
    let line_len_chars = line_slice.len_chars() - line_break_chars(line_slice);
    let line_end_char = line_start_char + line_len_chars;
    let want = position.character as usize;
    let (char_idx, clamped) = match encoding {
        PositionEncoding::Utf32 => clamp(line_start_char + want, line_end_char),
        PositionEncoding::Utf8 => {
            let line_start_byte = rope.char_to_byte(line_start_char);
            let line_end_byte = rope.char_to_byte(line_end_char);
            let target = line_start_byte + want;
            if target > line_end_byte {
                (line_end_char, true)
            } else {
                let char_idx = rope.byte_to_char(target);
                (char_idx, rope.char_to_byte(char_idx) != target)
            }
        }
        PositionEncoding::Utf16 => {
            let line_start_cu = rope.char_to_utf16_cu(line_start_char);
            let line_end_cu = rope.char_to_utf16_cu(line_end_char);
            let target = line_start_cu + want;
            if target > line_end_cu {
                (line_end_char, true)
            } else {
                let char_idx = rope.utf16_cu_to_char(target);
                (char_idx, rope.char_to_utf16_cu(char_idx) != target)
            }
        }
    };
    Resolved { byte: rope.char_to_byte(char_idx), clamped }
}

/// Position of a byte offset (rounded down to a character boundary; clamped to the document).
pub fn to_position(rope: &Rope, byte: usize, encoding: PositionEncoding) -> LspPosition {
    let byte = byte.min(rope.len_bytes());
    let char_idx = rope.byte_to_char(byte);
    let line = rope.char_to_line(char_idx);
    let line_start_char = rope.line_to_char(line);
    let character = match encoding {
        PositionEncoding::Utf32 => char_idx - line_start_char,
        PositionEncoding::Utf8 => rope.char_to_byte(char_idx) - rope.char_to_byte(line_start_char),
        PositionEncoding::Utf16 => rope.char_to_utf16_cu(char_idx) - rope.char_to_utf16_cu(line_start_char),
    };
    LspPosition { line: line as u32, character: character as u32 }
}

/// Length in code units of `text` in `encoding`.
pub fn text_len(text: &str, encoding: PositionEncoding) -> usize {
    match encoding {
        PositionEncoding::Utf8 => text.len(),
        PositionEncoding::Utf16 => text.encode_utf16().count(),
        PositionEncoding::Utf32 => text.chars().count(),
    }
}

fn clamp(want: usize, max: usize) -> (usize, bool) {
    if want > max {
        (max, true)
    } else {
        (want, false)
    }
}

fn line_break_chars(line: ropey::RopeSlice<'_>) -> usize {
    let n_chars = line.len_chars();
    if n_chars == 0 {
        return 0;
    }
    match line.char(n_chars - 1) {
        '\n' if n_chars >= 2 && line.char(n_chars - 2) == '\r' => 2,
        '\n' | '\r' => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte(text: &str, line: u32, character: u32, encoding: PositionEncoding) -> (usize, bool) {
        let resolved = to_byte(&Rope::from_str(text), LspPosition { line, character }, encoding);
        (resolved.byte, resolved.clamped)
    }

    #[test]
    fn conversions_table() {
        use PositionEncoding::*;
        let text = "a😀b\nxé\r\nlast";
        let cases = [
            // (line, character, encoding, byte, clamped)
            (0, 0, Utf16, 0, false),
            (0, 1, Utf16, 1, false),
            (0, 2, Utf16, 1, true), // inside the surrogate pair: rounded down
            (0, 3, Utf16, 5, false),
            (0, 2, Utf32, 5, false),
            (0, 5, Utf8, 5, false),
            (0, 3, Utf8, 1, true),
            (0, 99, Utf16, 6, true), // past the line's end: before the line break
            (1, 2, Utf16, 10, false),
            (1, 3, Utf16, 10, true), // never between \r and \n
            (2, 4, Utf16, 16, false),
            (9, 0, Utf16, 16, true), // past the document's end
        ];
        for (line, character, encoding, want_byte, want_clamped) in cases {
            assert_eq!(
                byte(text, line, character, encoding),
                (want_byte, want_clamped),
                "{line}:{character} {encoding:?}"
            );
        }
    }

    #[test]
    fn round_trip_at_every_char_boundary() {
        let text = "fn 测试() {\n    let s = \"e\u{301}🦀\";\r\n}\n";
        let rope = Rope::from_str(text);
        for encoding in [PositionEncoding::Utf8, PositionEncoding::Utf16, PositionEncoding::Utf32] {
            for (byte, _) in text.char_indices() {
                let position = to_position(&rope, byte, encoding);
                let back = to_byte(&rope, position, encoding);
                if text[byte..].starts_with('\n') && byte > 0 && text.as_bytes()[byte - 1] == b'\r' {
                    continue; // between \r and \n is not a position a client can name
                }
                assert_eq!(back, Resolved { byte, clamped: false }, "{encoding:?} byte {byte}");
            }
        }
    }

    fn arb_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        proptest::collection::vec(
            proptest::sample::select(&["a", "é", "😀", "测", "\n", "\r\n", "\r", " ", "\u{301}"][..]),
            0..40,
        )
        .prop_map(|pieces| pieces.concat())
    }

    proptest::proptest! {
        /// Any position a client may send resolves without a panic to a character boundary inside the
        /// document; positions that name a character boundary come back unclamped.
        #[test]
        fn any_position_resolves_to_a_boundary(text in arb_text(), line in 0u32..12, character in 0u32..40, encoding_idx in 0usize..3) {
            let encoding = [PositionEncoding::Utf8, PositionEncoding::Utf16, PositionEncoding::Utf32][encoding_idx];
            let rope = Rope::from_str(&text);
            let resolved = to_byte(&rope, LspPosition { line, character }, encoding);
            proptest::prop_assert!(resolved.byte <= text.len());
            proptest::prop_assert!(text.is_char_boundary(resolved.byte));
            let back = to_position(&rope, resolved.byte, encoding);
            if !resolved.clamped {
                proptest::prop_assert_eq!(back, LspPosition { line, character });
            }
            proptest::prop_assert_eq!(to_byte(&rope, back, encoding).byte, resolved.byte);
        }
    }

    #[test]
    fn negotiation_prefers_utf8_and_defaults_to_utf16() {
        assert_eq!(PositionEncoding::negotiate(&["utf-16".into(), "utf-8".into()]), PositionEncoding::Utf8);
        assert_eq!(PositionEncoding::negotiate(&["utf-32".into()]), PositionEncoding::Utf32);
        assert_eq!(PositionEncoding::negotiate(&[]), PositionEncoding::Utf16);
    }
}
