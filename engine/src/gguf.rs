//! The GGUF header, read without llama.cpp: the magic bytes, and the few metadata values that say how much
//! memory a context will need (layers, KV heads, head sizes, vocabulary, training context). Pure over a byte
//! reader and bounded, so a hostile file cannot make it allocate much or loop long (a fuzz target checks it).

use std::collections::HashMap;
use std::io::{self, Read};

/// What Spark reads from a GGUF file's metadata before loading it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GgufSummary {
    pub architecture: String,
    pub n_layer: u64,
    /// The largest KV head count of any layer (some models give one per layer).
    pub n_head_kv: u64,
    pub n_head: u64,
    pub n_embd: u64,
    pub key_length: u64,
    pub value_length: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
}

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GgufError {
    /// The first four bytes are not `GGUF`.
    NotGguf,
    /// The header ends early or holds impossible values.
    Malformed(String),
}

/// Metadata keys longer than this are refused; real keys are a few dozen bytes.
const MAX_KEY_LEN: u64 = 64 * 1024;
/// More metadata entries than this are refused; real files have a few dozen.
const MAX_KV_COUNT: u64 = 1 << 20;

/// Reads the header from `reader`. Values Spark does not use are skipped without being kept.
pub fn read_summary(reader: &mut impl Read) -> Result<GgufSummary, GgufError> {
    let mut magic = [0u8; 4];
    reader.read_exact(&mut magic).map_err(|_| GgufError::NotGguf)?;
    if &magic != b"GGUF" {
        return Err(GgufError::NotGguf);
    }
    let version = read_u32(reader)?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Malformed(format!("GGUF version {version} (Spark reads 2 and 3)")));
    }
    let _n_tensors = read_u64(reader)?;
    let n_kv = read_u64(reader)?;
    if n_kv > MAX_KV_COUNT {
        return Err(GgufError::Malformed(format!("{n_kv} metadata entries")));
    }
    let mut numbers: HashMap<String, u64> = HashMap::new();
    let mut architecture = String::new();
    for _ in 0..n_kv {
        let key = read_string(reader, MAX_KEY_LEN)?;
        let value_type = read_u32(reader)?;
        if key == "general.architecture" && value_type == TYPE_STRING {
            architecture = read_string(reader, MAX_KEY_LEN)?;
        } else if key == "tokenizer.ggml.tokens" && value_type == TYPE_ARRAY {
            let (_, n_items) = skip_array(reader)?;
            numbers.insert(key, n_items);
        } else if let Some(number) = read_value(reader, value_type)? {
            numbers.insert(key, number);
        }
    }
    let arch_key = |name: &str| numbers.get(&format!("{architecture}.{name}")).copied();
    let n_head = arch_key("attention.head_count").unwrap_or(0);
    let n_embd = arch_key("embedding_length").unwrap_or(0);
    let head_size = n_embd.checked_div(n_head).unwrap_or(0);
    Ok(GgufSummary {
        n_layer: arch_key("block_count").unwrap_or(0),
        n_head_kv: arch_key("attention.head_count_kv").unwrap_or(n_head),
        n_head,
        n_embd,
        key_length: arch_key("attention.key_length").unwrap_or(head_size),
        value_length: arch_key("attention.value_length").unwrap_or(head_size),
        n_vocab: numbers.get("tokenizer.ggml.tokens").copied().unwrap_or(0),
        n_ctx_train: arch_key("context_length").unwrap_or(0),
        architecture,
    })
}

const TYPE_BOOL: u32 = 7;
const TYPE_STRING: u32 = 8;
const TYPE_ARRAY: u32 = 9;

/// Reads one value: integers come back as numbers (an integer array as its largest element); everything else is
/// skipped.
fn read_value(reader: &mut impl Read, value_type: u32) -> Result<Option<u64>, GgufError> {
    match value_type {
        TYPE_STRING => {
            let len = read_u64(reader)?;
            skip(reader, len)?;
            Ok(None)
        }
        TYPE_ARRAY => Ok(skip_array(reader)?.0),
        scalar => {
            let size = scalar_size(scalar)?;
            let mut bytes = [0u8; 8];
            reader.read_exact(&mut bytes[..size]).map_err(eof)?;
            Ok(scalar_as_u64(scalar, bytes))
        }
    }
}

/// Skips an array; returns the largest element of an integer array, and the number of elements.
fn skip_array(reader: &mut impl Read) -> Result<(Option<u64>, u64), GgufError> {
    let item_type = read_u32(reader)?;
    let n_items = read_u64(reader)?;
    match item_type {
        TYPE_STRING => {
            for _ in 0..n_items {
                let len = read_u64(reader)?;
                skip(reader, len)?;
            }
            Ok((None, n_items))
        }
        TYPE_ARRAY => Err(GgufError::Malformed("nested metadata arrays".into())),
        scalar => {
            let size = scalar_size(scalar)?;
            // Floats and bools are not sizes: skipped whole.
            if scalar_as_u64(scalar, [0; 8]).is_none() {
                skip(reader, n_items.saturating_mul(size as u64))?;
                return Ok((None, n_items));
            }
            let mut largest = None;
            let mut bytes = [0u8; 8];
            for _ in 0..n_items {
                reader.read_exact(&mut bytes[..size]).map_err(eof)?;
                largest = largest.max(scalar_as_u64(scalar, bytes));
            }
            Ok((largest, n_items))
        }
    }
}

fn scalar_size(value_type: u32) -> Result<usize, GgufError> {
    match value_type {
        0 | 1 | TYPE_BOOL => Ok(1),
        2 | 3 => Ok(2),
        4..=6 => Ok(4),
        10..=12 => Ok(8),
        other => Err(GgufError::Malformed(format!("unknown metadata type {other}"))),
    }
}

/// Unsigned and non-negative signed integers as numbers; floats, bools and negative values are not sizes.
fn scalar_as_u64(value_type: u32, bytes: [u8; 8]) -> Option<u64> {
    let unsigned = u64::from_le_bytes(bytes);
    match value_type {
        0 | 2 | 4 | 10 => Some(unsigned),
        1 => u64::try_from(i8::from_le_bytes([bytes[0]])).ok(),
        3 => u64::try_from(i16::from_le_bytes([bytes[0], bytes[1]])).ok(),
        5 => u64::try_from(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])).ok(),
        11 => u64::try_from(i64::from_le_bytes(bytes)).ok(),
        _ => None,
    }
}

fn read_u32(reader: &mut impl Read) -> Result<u32, GgufError> {
    let mut bytes = [0u8; 4];
    reader.read_exact(&mut bytes).map_err(eof)?;
    Ok(u32::from_le_bytes(bytes))
}

fn read_u64(reader: &mut impl Read) -> Result<u64, GgufError> {
    let mut bytes = [0u8; 8];
    reader.read_exact(&mut bytes).map_err(eof)?;
    Ok(u64::from_le_bytes(bytes))
}

fn read_string(reader: &mut impl Read, max_len: u64) -> Result<String, GgufError> {
    let len = read_u64(reader)?;
    if len > max_len {
        return Err(GgufError::Malformed(format!("a metadata string of {len} bytes")));
    }
    let mut bytes = Vec::new();
    reader.take(len).read_to_end(&mut bytes).map_err(eof)?;
    if bytes.len() as u64 != len {
        return Err(eof(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn skip(reader: &mut impl Read, len: u64) -> Result<(), GgufError> {
    let skipped = io::copy(&mut reader.take(len), &mut io::sink()).map_err(eof)?;
    if skipped != len {
        return Err(eof(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(())
}

fn eof(error: io::Error) -> GgufError {
    GgufError::Malformed(format!("the header ends early ({error})"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A GGUF v3 header with these metadata entries (and no tensors).
    pub(crate) fn header(entries: &[(&str, Value)]) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend((entries.len() as u64).to_le_bytes());
        let string = |out: &mut Vec<u8>, text: &str| {
            out.extend((text.len() as u64).to_le_bytes());
            out.extend(text.as_bytes());
        };
        for (key, value) in entries {
            string(&mut out, key);
            match value {
                Value::U32(number) => {
                    out.extend(4u32.to_le_bytes());
                    out.extend(number.to_le_bytes());
                }
                Value::F32(number) => {
                    out.extend(6u32.to_le_bytes());
                    out.extend(number.to_le_bytes());
                }
                Value::Str(text) => {
                    out.extend(TYPE_STRING.to_le_bytes());
                    string(&mut out, text);
                }
                Value::Strings(texts) => {
                    out.extend(TYPE_ARRAY.to_le_bytes());
                    out.extend(TYPE_STRING.to_le_bytes());
                    out.extend((texts.len() as u64).to_le_bytes());
                    for text in texts {
                        string(&mut out, text);
                    }
                }
                Value::I32s(numbers) => {
                    out.extend(TYPE_ARRAY.to_le_bytes());
                    out.extend(5u32.to_le_bytes());
                    out.extend((numbers.len() as u64).to_le_bytes());
                    for number in numbers {
                        out.extend(number.to_le_bytes());
                    }
                }
            }
        }
        out
    }

    pub(crate) enum Value {
        U32(u32),
        F32(f32),
        Str(&'static str),
        Strings(Vec<&'static str>),
        I32s(Vec<i32>),
    }

    pub(crate) fn gemma_like() -> Vec<u8> {
        header(&[
            ("general.architecture", Value::Str("gemma3")),
            ("gemma3.context_length", Value::U32(32768)),
            ("gemma3.embedding_length", Value::U32(640)),
            ("gemma3.block_count", Value::U32(18)),
            ("gemma3.attention.head_count", Value::U32(4)),
            ("gemma3.attention.layer_norm_rms_epsilon", Value::F32(1e-6)),
            ("gemma3.attention.key_length", Value::U32(256)),
            ("gemma3.attention.value_length", Value::U32(256)),
            ("gemma3.attention.head_count_kv", Value::U32(1)),
            ("tokenizer.ggml.tokens", Value::Strings(vec!["<pad>", "<eos>", "<bos>"])),
        ])
    }

    #[test]
    fn reads_what_sizes_a_context_and_skips_the_rest() {
        let summary = read_summary(&mut gemma_like().as_slice()).unwrap();
        let expected = GgufSummary {
            architecture: "gemma3".into(),
            n_layer: 18,
            n_head_kv: 1,
            n_head: 4,
            n_embd: 640,
            key_length: 256,
            value_length: 256,
            n_vocab: 3,
            n_ctx_train: 32768,
        };
        assert_eq!(summary, expected);
    }

    #[test]
    fn head_sizes_default_from_the_embedding_and_per_layer_heads_take_the_largest() {
        let bytes = header(&[
            ("general.architecture", Value::Str("openelm")),
            ("openelm.embedding_length", Value::U32(1024)),
            ("openelm.attention.head_count", Value::U32(8)),
            ("openelm.attention.head_count_kv", Value::I32s(vec![2, 3, 5, 4])),
        ]);
        let summary = read_summary(&mut bytes.as_slice()).unwrap();
        assert_eq!((summary.n_head_kv, summary.key_length, summary.value_length), (5, 128, 128));
    }

    #[test]
    fn wrong_or_short_headers_are_errors_not_panics() {
        assert_eq!(read_summary(&mut &b"hello, this is text"[..]), Err(GgufError::NotGguf));
        assert_eq!(read_summary(&mut &b""[..]), Err(GgufError::NotGguf));
        let full = gemma_like();
        for len in 4..full.len() {
            assert!(matches!(read_summary(&mut &full[..len]), Err(GgufError::Malformed(_))), "cut at {len}");
        }
        let mut huge_string = header(&[]);
        huge_string[16..24].copy_from_slice(&1u64.to_le_bytes());
        huge_string.extend(u64::MAX.to_le_bytes());
        assert!(matches!(read_summary(&mut huge_string.as_slice()), Err(GgufError::Malformed(_))));
    }
}
