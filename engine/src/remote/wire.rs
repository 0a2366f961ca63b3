//! The remote backend's wire format as pure functions: endpoint URLs, request bodies (OpenAI-compatible
//! completions and chat), incremental SSE framing, stream chunks, client-side stop strings, Retry-After,
//! status classification, back-off and redaction. Nothing here does IO, so all of it is tested table-driven.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::{RemoteConfig, RemoteError, RemoteRequest, RemoteStop};

/// OpenAI's API takes at most 4 stop strings, and several compatible servers copy that limit; the rest are
/// applied client-side only (all of them are, in fact, so the order of the list is the priority).
pub(crate) const MAX_SERVER_STOPS: usize = 4;

/// Back-off after consecutive failures: 1 s, 2 s, 4 s, … up to a minute.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A rejected key does not fix itself: probe again once a minute.
const BACKOFF_UNAUTHORIZED: Duration = Duration::from_secs(60);
/// A server asking for more than this is capped, so that a bogus header does not disable the backend for a day.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(15 * 60);

/// `{base}/{path}` where `base` may end with `/` or `/v1` (the way OpenAI-style base URLs are often written).
pub(crate) fn endpoint(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/{}", path.trim_start_matches('/'))
}

/// The JSON body of a streamed completion (or chat completion) request.
pub(crate) fn request_body(config: &RemoteConfig, request: &RemoteRequest) -> Value {
    let mut body = json!({
        "model": config.model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": true,
    });
    if config.chat {
        let mut messages = Vec::new();
        if let Some(system) = &request.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.push(json!({ "role": "user", "content": request.prompt }));
        body["messages"] = Value::Array(messages);
    } else {
        body["prompt"] = Value::String(request.prompt.clone());
        if config.supports_suffix {
            if let Some(suffix) = &request.suffix {
                body["suffix"] = Value::String(suffix.clone());
            }
        }
    }
    if !request.stop.is_empty() {
        let server_stops: Vec<&String> = request.stop.iter().take(MAX_SERVER_STOPS).collect();
        body["stop"] = json!(server_stops);
    }
    if let Some(seed) = request.seed {
        body["seed"] = json!(seed);
    }
    body
}

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseEvent {
    Data(String),
    Done,
}

/// Incremental SSE framing: bytes in, events out. Lines may be split anywhere across network chunks (even inside
/// a UTF-8 sequence); `data:` lines accumulate until a blank line dispatches them, as the SSE spec says.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    pending: Vec<u8>,
    data: Option<String>,
}

impl SseDecoder {
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        self.pending.extend_from_slice(bytes);
        let mut line_start = 0;
        while let Some(newline) = self.pending[line_start..].iter().position(|&byte| byte == b'\n') {
            let line_end = line_start + newline;
            let line = &self.pending[line_start..line_end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = std::str::from_utf8(line).map_err(|_| "the event stream is not UTF-8".to_string())?;
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    out.push(if data == "[DONE]" { SseEvent::Done } else { SseEvent::Data(data) });
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                }
            }
            // Comments (`:` pings) and the `event:`, `id:`, `retry:` fields carry nothing we use.
            line_start = line_end + 1;
        }
        self.pending.drain(..line_start);
        Ok(())
    }
}

/// What one stream chunk contributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StreamChunk {
    pub(crate) text: String,
    pub(crate) finish_reason: Option<String>,
}

/// Parses one `data:` payload of a completions (`choices[0].text`) or chat (`choices[0].delta.content`) stream.
/// The error never quotes the payload: it is model output about the user's code.
pub(crate) fn parse_chunk(chat: bool, payload: &str) -> Result<StreamChunk, String> {
    let value: Value =
        serde_json::from_str(payload).map_err(|error| format!("invalid JSON in the event stream ({error})"))?;
    if let Some(error) = value.get("error") {
        let message = error.get("message").and_then(Value::as_str).or_else(|| error.as_str()).unwrap_or("no message");
        return Err(format!("the server reported an error mid-stream: {}", truncate_chars(message, 200)));
    }
    let choices = value
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| "a stream chunk has no `choices` array".to_string())?;
    let Some(choice) = choices.first() else {
        // Usage-only chunks have an empty `choices`.
        return Ok(StreamChunk::default());
    };
    let text = if chat {
        choice.get("delta").and_then(|delta| delta.get("content")).and_then(Value::as_str)
    } else {
        choice.get("text").and_then(Value::as_str)
    };
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_string);
    Ok(StreamChunk { text: text.unwrap_or_default().to_string(), finish_reason })
}

/// `length` means the token budget ran out; every other reason (`stop`, `eos`, `content_filter`, …) ends it.
pub(crate) fn stop_from_finish_reason(reason: &str) -> RemoteStop {
    match reason {
        "length" => RemoteStop::Length,
        _ => RemoteStop::Stop,
    }
}

/// The byte offset of the earliest stop string in `text` that ends after `n_checked` (the bytes already scanned
/// when the previous chunk arrived), so each chunk costs only its own length plus the longest stop.
pub(crate) fn find_stop(text: &str, n_checked: usize, stops: &[String]) -> Option<usize> {
    let longest = stops.iter().map(String::len).max()?;
    let mut from = n_checked.saturating_sub(longest.saturating_sub(1)).min(text.len());
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    stops
        .iter()
        .filter(|stop| !stop.is_empty())
        .filter_map(|stop| text[from..].find(stop.as_str()).map(|at| from + at))
        .min()
}

/// Milliseconds to wait, from `retry-after-ms` (OpenAI, Azure) or `Retry-After` (seconds or an HTTP date).
pub(crate) fn retry_after_ms(retry_after_ms: Option<&str>, retry_after: Option<&str>, now: SystemTime) -> Option<u64> {
    if let Some(ms) = retry_after_ms.and_then(|value| value.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms.ceil() as u64);
        }
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).ceil() as u64);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or_default().as_millis() as u64)
}

/// The error for a non-success HTTP status.
pub(crate) fn status_error(status: u16, retry_after_ms: Option<u64>) -> RemoteError {
    match status {
        401 | 403 => RemoteError::Unauthorized,
        429 => RemoteError::RateLimited { retry_after_ms },
        _ => RemoteError::Status(status),
    }
}

/// How long the backend is reported Down after `error`, the `n_failures`-th failure in a row; `None` when the
/// error says nothing about the server's health (a cancel, or a request the server found malformed).
pub(crate) fn backoff(error: &RemoteError, n_failures: u32) -> Option<Duration> {
    let exponential = || {
        let shift = n_failures.saturating_sub(1).min(16);
        (BACKOFF_BASE * (1u32 << shift)).min(BACKOFF_MAX)
    };
    match error {
        RemoteError::Cancelled | RemoteError::Config(_) => None,
        // 404 (wrong URL or endpoint) and 408 repeat on every request; other 4xx are about this request.
        RemoteError::Status(status) if (400..500).contains(status) && !matches!(status, 404 | 408) => None,
        RemoteError::Unauthorized => Some(BACKOFF_UNAUTHORIZED),
        RemoteError::RateLimited { retry_after_ms: Some(ms) } => Some(Duration::from_millis(*ms).min(RETRY_AFTER_MAX)),
        RemoteError::RateLimited { retry_after_ms: None }
        | RemoteError::Unreachable(_)
        | RemoteError::Timeout
        | RemoteError::Status(_)
        | RemoteError::BadResponse(_)
        | RemoteError::Truncated => Some(exponential()),
    }
}

/// `text` with every occurrence of `secret` replaced, for anything that may reach a log or an error message.
pub(crate) fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if !secret.is_empty() => text.replace(secret, "[redacted]"),
        _ => text.to_string(),
    }
}

/// At most `n_chars` characters of `text`, with `…` when cut.
pub(crate) fn truncate_chars(text: &str, n_chars: usize) -> String {
    match text.char_indices().nth(n_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn config(chat: bool, supports_suffix: bool) -> RemoteConfig {
        RemoteConfig {
            url: "http://127.0.0.1:8080".into(),
            model: "m".into(),
            api_key_env: None,
            timeout_ms: 1000,
            chat,
            supports_suffix,
        }
    }

    fn request(stop: &[&str]) -> RemoteRequest {
        RemoteRequest {
            prompt: "fn main() {".into(),
            suffix: Some("}".into()),
            system: Some("complete code".into()),
            stop: stop.iter().map(|stop| stop.to_string()).collect(),
            max_tokens: 16,
            temperature: 0.0,
            seed: Some(7),
            deadline: Instant::now(),
            rules: None,
        }
    }

    #[test]
    fn endpoints() {
        let cases = [
            ("http://127.0.0.1:8080", "v1/completions", "http://127.0.0.1:8080/v1/completions"),
            ("http://127.0.0.1:8080/", "v1/completions", "http://127.0.0.1:8080/v1/completions"),
            ("https://api.example.test/v1", "v1/models", "https://api.example.test/v1/models"),
            ("https://api.example.test/v1/", "/v1/chat/completions", "https://api.example.test/v1/chat/completions"),
            ("http://host/proxy", "v1/models", "http://host/proxy/v1/models"),
        ];
        for (base, path, expected) in cases {
            assert_eq!(endpoint(base, path), expected, "{base} + {path}");
        }
    }

    #[test]
    fn bodies() {
        let stops = ["\n", "a", "b", "c", "d", "e"];
        let cases = [
            (
                config(false, true),
                request(&stops),
                json!({"model":"m","max_tokens":16,"temperature":0.0,"stream":true,"prompt":"fn main() {",
                       "suffix":"}","stop":["\n","a","b","c"],"seed":7}),
            ),
            (
                config(false, false),
                request(&[]),
                json!({"model":"m","max_tokens":16,"temperature":0.0,"stream":true,"prompt":"fn main() {","seed":7}),
            ),
            (
                config(true, true),
                request(&["\n"]),
                json!({"model":"m","max_tokens":16,"temperature":0.0,"stream":true,
                       "messages":[{"role":"system","content":"complete code"},{"role":"user","content":"fn main() {"}],
                       "stop":["\n"],"seed":7}),
            ),
        ];
        for (config, request, expected) in cases {
            assert_eq!(request_body(&config, &request), expected, "{config:?}");
        }
    }

    /// Feeds `chunks` one by one and collects every event.
    fn decode(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, String> {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut events)?;
        }
        Ok(events)
    }

    #[test]
    fn sse_framing() {
        use SseEvent::{Data, Done};
        let data = |text: &str| Data(text.to_string());
        type Case<'a> = (Vec<&'a [u8]>, Result<Vec<SseEvent>, String>);
        let cases: Vec<Case> = vec![
            (vec![b"data: {\"a\":1}\n\ndata: [DONE]\n\n"], Ok(vec![data("{\"a\":1}"), Done])),
            (vec![b"data: {\"a\"", b":1}\n", b"\n"], Ok(vec![data("{\"a\":1}")])),
            (vec![b"data:x\r\n\r\n"], Ok(vec![data("x")])),
            (vec![b": ping\n\nevent: message\nid: 3\ndata: y\n\n"], Ok(vec![data("y")])),
            (vec![b"data: one\ndata: two\n\n"], Ok(vec![data("one\ntwo")])),
            // Not dispatched until the blank line comes.
            (vec![b"data: partial\n"], Ok(vec![])),
            // A UTF-8 sequence split across network chunks ("é" is C3 A9).
            (vec![b"data: caf\xC3", b"\xA9\n\n"], Ok(vec![data("café")])),
            (vec![b"data: \xFF\n\n"], Err("the event stream is not UTF-8".to_string())),
        ];
        for (chunks, expected) in cases {
            assert_eq!(decode(&chunks), expected, "{chunks:?}");
        }
    }

    #[test]
    fn chunks() {
        let ok = |text: &str, finish: Option<&str>| {
            Ok(StreamChunk { text: text.to_string(), finish_reason: finish.map(str::to_string) })
        };
        let cases = [
            (false, r#"{"choices":[{"text":"fn","finish_reason":null}]}"#, ok("fn", None)),
            (false, r#"{"choices":[{"text":"","finish_reason":"length"}]}"#, ok("", Some("length"))),
            (true, r#"{"choices":[{"delta":{"content":"x"},"finish_reason":null}]}"#, ok("x", None)),
            (true, r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#, ok("", Some("stop"))),
            (true, r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#, ok("", None)),
            (false, r#"{"choices":[],"usage":{"total_tokens":3}}"#, ok("", None)),
            (false, r#"{"object":"text_completion"}"#, Err("a stream chunk has no `choices` array".to_string())),
            (
                false,
                r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#,
                Err("the server reported an error mid-stream: boom".to_string()),
            ),
        ];
        for (chat, payload, expected) in cases {
            assert_eq!(parse_chunk(chat, payload), expected, "{payload}");
        }
        let invalid = parse_chunk(false, "{not json").unwrap_err();
        assert!(invalid.starts_with("invalid JSON in the event stream"), "{invalid}");
    }

    #[test]
    fn stops() {
        let stops = |list: &[&str]| list.iter().map(|stop| stop.to_string()).collect::<Vec<_>>();
        let cases = [
            ("let x = 1;\nlet", 0, stops(&["\n"]), Some(10)),
            ("abc", 0, stops(&[]), None),
            ("abc", 0, stops(&["", "c"]), Some(2)),
            // The earliest match wins, whatever the order of the list.
            ("a END b STOP", 0, stops(&["STOP", "END"]), Some(2)),
            // A stop split across chunks: "EN" was scanned before, "D" just arrived.
            ("xxEND", 4, stops(&["END"]), Some(2)),
            // Entirely inside already-scanned text that did not match then cannot match now.
            ("END xx", 6, stops(&["END"]), None),
            // The scan start snaps back to a char boundary.
            ("ééé\n", 3, stops(&["\n", "long stop"]), Some(6)),
        ];
        for (text, n_checked, stops, expected) in cases {
            assert_eq!(find_stop(text, n_checked, &stops), expected, "{text:?} from {n_checked} {stops:?}");
        }
    }

    #[test]
    fn retry_after() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let cases = [
            (None, Some("2"), Some(2000)),
            (None, Some(" 0 "), Some(0)),
            (None, Some("1.5"), Some(1500)),
            (Some("250"), Some("2"), Some(250)),
            (Some("junk"), Some("3"), Some(3000)),
            (None, Some("Sun, 06 Nov 1994 08:49:47 GMT"), Some(10_000)),
            (None, Some("Sun, 06 Nov 1994 08:49:00 GMT"), Some(0)),
            (None, Some("-4"), None),
            (None, Some("soon"), None),
            (None, None, None),
        ];
        for (ms, header, expected) in cases {
            assert_eq!(retry_after_ms(ms, header, now), expected, "{ms:?} {header:?}");
        }
    }

    #[test]
    fn statuses_and_backoff() {
        let cases = [
            (401, None, RemoteError::Unauthorized),
            (403, None, RemoteError::Unauthorized),
            (429, Some(1500), RemoteError::RateLimited { retry_after_ms: Some(1500) }),
            (500, None, RemoteError::Status(500)),
            (404, None, RemoteError::Status(404)),
        ];
        for (status, retry, expected) in cases {
            assert_eq!(status_error(status, retry), expected);
        }

        let seconds = |n: u64| Some(Duration::from_secs(n));
        let cases = [
            (RemoteError::Cancelled, 1, None),
            (RemoteError::Config("x".into()), 1, None),
            (RemoteError::Status(400), 1, None),
            (RemoteError::Status(404), 1, seconds(1)),
            (RemoteError::Status(503), 3, seconds(4)),
            (RemoteError::Timeout, 1, seconds(1)),
            (RemoteError::Unreachable("x".into()), 2, seconds(2)),
            (RemoteError::Truncated, 40, seconds(60)),
            (RemoteError::Unauthorized, 1, seconds(60)),
            (RemoteError::RateLimited { retry_after_ms: Some(2500) }, 1, Some(Duration::from_millis(2500))),
            (RemoteError::RateLimited { retry_after_ms: Some(u64::MAX) }, 1, seconds(900)),
            (RemoteError::RateLimited { retry_after_ms: None }, 2, seconds(2)),
        ];
        for (error, n_failures, expected) in cases {
            assert_eq!(backoff(&error, n_failures), expected, "{error:?} #{n_failures}");
        }
    }

    #[test]
    fn redaction_and_truncation() {
        assert_eq!(redact("Bearer sk-1 and sk-1", Some("sk-1")), "Bearer [redacted] and [redacted]");
        assert_eq!(redact("nothing", Some("")), "nothing");
        assert_eq!(redact("nothing", None), "nothing");
        assert_eq!(truncate_chars("héllo", 2), "hé…");
        assert_eq!(truncate_chars("hi", 2), "hi");
    }
}
