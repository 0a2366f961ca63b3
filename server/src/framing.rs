//! A guard in front of the LSP transport: it reads framed JSON-RPC from the client and passes on only
//! messages the transport can decode. tower-lsp's reader stops for good at the first frame it cannot decode
//! (tokio-util's `FramedRead` ends its stream after a decoder error), so one malformed message — bad JSON, a
//! wrong `Content-Length`, bytes that are not UTF-8, a lone UTF-16 surrogate, nesting deeper than serde_json
//! allows — would end the whole server. Here such a frame is logged and dropped, or repaired where the repair
//! is the lossy one everybody expects (invalid UTF-8 and lone surrogates become U+FFFD), and reading resumes
//! at the next `Content-Length` header.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tower_lsp_server::jsonrpc::{Request, Response};

/// Bodies larger than this are skipped unread: no editor sends a message this large.
pub const MAX_MESSAGE_BYTES: usize = 512 * 1024 * 1024;
/// A header line longer than this is garbage.
const MAX_HEADER_LINE_BYTES: u64 = 8 * 1024;

/// Copies well-formed messages from `input` to `output` until `input` ends; returns how many frames were
/// dropped. `output` is closed at the end so that the transport sees the end of input too.
pub async fn pump(input: impl AsyncRead + Unpin, mut output: impl AsyncWrite + Unpin) -> std::io::Result<usize> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut n_dropped = 0;
    loop {
        let content_length = match read_headers(&mut input).await? {
            Headers::End => break,
            Headers::Garbage(reason) => {
                tracing::warn!(%reason, "malformed message header; skipped to the next Content-Length");
                n_dropped += 1;
                continue;
            }
            Headers::ContentLength(content_length) => content_length,
        };
        if content_length > MAX_MESSAGE_BYTES {
            tracing::warn!(content_length, max = MAX_MESSAGE_BYTES, "message too large; skipped");
            let skipped =
                tokio::io::copy(&mut (&mut input).take(content_length as u64), &mut tokio::io::sink()).await?;
            n_dropped += 1;
            if skipped < content_length as u64 {
                break;
            }
            continue;
        }
        let mut body = vec![0; content_length];
        if input.read_exact(&mut body).await.is_err() {
            tracing::warn!(content_length, "input ended inside a message; dropped");
            n_dropped += 1;
            break;
        }
        match checked_message(body) {
            Ok(message) => {
                output.write_all(format!("Content-Length: {}\r\n\r\n", message.len()).as_bytes()).await?;
                output.write_all(&message).await?;
                output.flush().await?;
            }
            Err(reason) => {
                tracing::warn!(%reason, content_length, "malformed message dropped");
                n_dropped += 1;
            }
        }
    }
    output.shutdown().await?;
    Ok(n_dropped)
}

/// A message body as the transport will decode it, or why it cannot be.
pub fn checked_message(body: Vec<u8>) -> Result<Vec<u8>, String> {
    let text = match String::from_utf8(body) {
        Ok(text) => text,
        Err(error) => {
            tracing::warn!("message is not valid UTF-8; invalid bytes replaced");
            String::from_utf8_lossy(error.as_bytes()).into_owned()
        }
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => {
            // serde_json refuses unpaired surrogates (with several messages); JavaScript clients send them.
            let repaired = replace_lone_surrogates(&text);
            if repaired == text {
                return Err(format!("invalid JSON: {error}"));
            }
            tracing::warn!("message has a lone UTF-16 surrogate; replaced");
            serde_json::from_str(&repaired).map_err(|error| format!("invalid JSON: {error}"))?
        }
    };
    // Re-serialized from the parsed message: what goes on is exactly what the transport accepts. Responses
    // first, as the transport tries them: a response also reads as a request with an empty method.
    if let Ok(response) = serde_json::from_value::<Response>(value.clone()) {
        return serde_json::to_vec(&response).map_err(|error| error.to_string());
    }
    match serde_json::from_value::<Request>(value) {
        Ok(request) => serde_json::to_vec(&request).map_err(|error| error.to_string()),
        Err(error) => Err(format!("not a JSON-RPC 2.0 request or response: {error}")),
    }
}

enum Headers {
    ContentLength(usize),
    Garbage(String),
    End,
}

async fn read_headers(input: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> std::io::Result<Headers> {
    let mut content_length: Option<Result<usize, String>> = None;
    let mut garbage = false;
    loop {
        let mut line = Vec::new();
        let n_read = (&mut *input).take(MAX_HEADER_LINE_BYTES).read_until(b'\n', &mut line).await?;
        if n_read == 0 {
            return Ok(Headers::End);
        }
        // Bytes left over from a wrong Content-Length may run straight into the next header.
        let start = find(&line, b"Content-Length").unwrap_or(0);
        if start > 0 {
            garbage = true;
        }
        let line = String::from_utf8_lossy(&line[start..]);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            if content_length.is_none() && !garbage {
                // Blank lines between messages are harmless.
                continue;
            }
            return Ok(match content_length {
                Some(Ok(length)) if !garbage => Headers::ContentLength(length),
                Some(Ok(length)) => {
                    tracing::warn!("garbage before a message header; skipped");
                    Headers::ContentLength(length)
                }
                Some(Err(reason)) => Headers::Garbage(reason),
                None => Headers::Garbage("a header block without Content-Length".to_owned()),
            });
        }
        match line.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                content_length = Some(
                    value
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| format!("Content-Length {:?} is not a number", value.trim())),
                );
            }
            // Content-Type and other headers: the guard re-frames every message as UTF-8 JSON.
            Some(_) => {}
            None => garbage = true,
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Replaces `\uXXXX` escapes of unpaired UTF-16 surrogates with `\uFFFD`.
pub fn replace_lone_surrogates(json: &str) -> String {
    let bytes = json.as_bytes();
    let escape_at = |idx: usize| -> Option<u32> {
        let digits = json.get(idx + 2..idx + 6)?;
        (bytes.get(idx) == Some(&b'\\') && bytes.get(idx + 1) == Some(&b'u'))
            .then(|| u32::from_str_radix(digits, 16).ok())
            .flatten()
    };
    let mut out = String::with_capacity(json.len());
    let mut idx = 0;
    while idx < bytes.len() {
        if bytes[idx] != b'\\' {
            let ch_len = json[idx..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&json[idx..idx + ch_len]);
            idx += ch_len;
            continue;
        }
        match escape_at(idx) {
            Some(0xD800..=0xDBFF) => {
                if let Some(0xDC00..=0xDFFF) = escape_at(idx + 6) {
                    out.push_str(&json[idx..idx + 12]);
                    idx += 12;
                } else {
                    out.push_str("\\uFFFD");
                    idx += 6;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                out.push_str("\\uFFFD");
                idx += 6;
            }
            Some(_) => {
                out.push_str(&json[idx..idx + 6]);
                idx += 6;
            }
            None => {
                // Any other escape: copy the backslash and the escaped character together.
                let next_len = json[idx + 1..].chars().next().map_or(0, char::len_utf8);
                out.push_str(&json[idx..idx + 1 + next_len]);
                idx += 1 + next_len;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        framed.extend_from_slice(body);
        framed
    }

    async fn run(input: Vec<u8>) -> (Vec<serde_json::Value>, usize) {
        let mut output = Vec::new();
        let n_dropped = pump(&input[..], &mut output).await.unwrap();
        let mut messages = Vec::new();
        let mut rest = &output[..];
        while !rest.is_empty() {
            let header_end = find(rest, b"\r\n\r\n").unwrap();
            let header = std::str::from_utf8(&rest[..header_end]).unwrap();
            let length: usize = header.strip_prefix("Content-Length: ").unwrap().parse().unwrap();
            let body = &rest[header_end + 4..header_end + 4 + length];
            messages.push(serde_json::from_slice(body).unwrap());
            rest = &rest[header_end + 4 + length..];
        }
        (messages, n_dropped)
    }

    fn status(id: i64) -> Vec<u8> {
        frame(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"spark/status"}}"#).as_bytes())
    }

    #[tokio::test]
    async fn bad_frames_are_dropped_and_the_next_message_gets_through() {
        let good = r#"{"jsonrpc":"2.0","id":9,"method":"spark/status"}"#;
        let cases: Vec<(&str, Vec<u8>, usize)> = vec![
            ("malformed JSON", frame(b"{not json}"), 1),
            ("not JSON-RPC", frame(br#"{"id": 1}"#), 1),
            ("garbage without headers", b"garbage\r\n\r\n".to_vec(), 1),
            ("Content-Length not a number", b"Content-Length: abc\r\n\r\n".to_vec(), 1),
            ("Content-Length too short", format!("Content-Length: {}\r\n\r\n{good}", good.len() - 5).into_bytes(), 1),
            (
                "deep nesting",
                frame(
                    format!(
                        r#"{{"jsonrpc":"2.0","method":"x","params":{}{}}}"#,
                        "[".repeat(100_000),
                        "]".repeat(100_000)
                    )
                    .as_bytes(),
                ),
                1,
            ),
            (
                "other charset",
                [b"Content-Type: application/vscode-jsonrpc; charset=latin1\r\n".to_vec(), status(8)].concat(),
                0,
            ),
        ];
        for (name, bad, want_dropped) in cases {
            let (messages, n_dropped) = run([bad, status(1)].concat()).await;
            assert_eq!(n_dropped, want_dropped, "{name}");
            assert_eq!(messages.last().unwrap()["id"], 1, "{name}: the next message gets through: {messages:?}");
        }
    }

    #[tokio::test]
    async fn too_long_content_length_loses_at_most_the_next_message() {
        let good = r#"{"jsonrpc":"2.0","id":7,"method":"spark/status"}"#;
        let input =
            [format!("Content-Length: {}\r\n\r\n{good}", good.len() + 20).into_bytes(), status(2), status(3)].concat();
        let (messages, _) = run(input).await;
        assert_eq!(messages.last().unwrap()["id"], 3, "{messages:?}");
    }

    #[tokio::test]
    async fn responses_stay_responses() {
        let (messages, n_dropped) = run(frame(br#"{"jsonrpc":"2.0","id":0,"result":null}"#)).await;
        assert_eq!(n_dropped, 0);
        assert_eq!(messages[0], serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": null}));
    }

    #[tokio::test]
    async fn lossy_repairs() {
        let surrogate = frame(br#"{"jsonrpc":"2.0","method":"m","params":{"text":"a\ud800b\udc00c\ud83d\ude00"}}"#);
        let (messages, n_dropped) = run(surrogate).await;
        assert_eq!(n_dropped, 0);
        assert_eq!(messages[0]["params"]["text"], "a\u{fffd}b\u{fffd}c😀");
        let (messages, _) =
            run(frame(b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"text\":\"a\xffb\"}}")).await;
        assert_eq!(messages[0]["params"]["text"], "a\u{fffd}b");
    }

    #[test]
    fn surrogate_repair_leaves_escaped_backslashes_alone() {
        assert_eq!(replace_lone_surrogates(r#""\\ud800""#), r#""\\ud800""#);
        assert_eq!(replace_lone_surrogates(r#""x\ud800""#), r#""x\uFFFD""#);
    }
}
