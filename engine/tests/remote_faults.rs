//! The remote backend against loopback mocks: wiremock for whole responses, a scripted TCP server where a fault
//! needs control over the socket (a reset, a stall mid-stream, watching the client close). Every case must end in
//! its `RemoteError` (or answer) well before the hang guard fires; the API key must never leak.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_engine::remote::{
    RemoteAnswer, RemoteClient, RemoteConfig, RemoteError, RemoteHealth, RemoteRequest, RemoteStop, StreamRules,
};
use spark_engine::StopMode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Anything past this is a hang, not a slow answer: the deadlines below are far shorter.
const HANG_GUARD: Duration = Duration::from_secs(20);
const DEADLINE: Duration = Duration::from_millis(400);

fn config(url: &str) -> RemoteConfig {
    RemoteConfig {
        url: url.to_string(),
        model: "test-model".to_string(),
        api_key_env: None,
        timeout_ms: 10_000,
        chat: false,
        supports_suffix: false,
    }
}

fn request(stop: &[&str]) -> RemoteRequest {
    RemoteRequest {
        prompt: "fn add(a: i32, b: i32) -> i32 {\n    ".to_string(),
        suffix: Some("\n}\n".to_string()),
        system: None,
        stop: stop.iter().map(|stop| stop.to_string()).collect(),
        max_tokens: 16,
        temperature: 0.0,
        seed: Some(1),
        deadline: Instant::now() + Duration::from_secs(5),
        rules: None,
    }
}

/// The SSE body of a completions stream: one chunk per piece, then a finish reason and `[DONE]`.
fn sse_completion(pieces: &[&str], finish: &str) -> String {
    let mut body = String::new();
    for piece in pieces {
        body += &format!("data: {}\n\n", json!({"choices":[{"index":0,"text":piece,"finish_reason":null}]}));
    }
    body += &format!("data: {}\n\n", json!({"choices":[{"index":0,"text":"","finish_reason":finish}]}));
    body + "data: [DONE]\n\n"
}

fn sse_response(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn mock_completions(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/completions")).respond_with(response).mount(&server).await;
    server
}

async fn complete_bounded(client: &RemoteClient, request: RemoteRequest) -> Result<RemoteAnswer, RemoteError> {
    complete_with_cancel(client, request, CancellationToken::new()).await
}

async fn complete_with_cancel(
    client: &RemoteClient,
    request: RemoteRequest,
    cancel: CancellationToken,
) -> Result<RemoteAnswer, RemoteError> {
    tokio::time::timeout(HANG_GUARD, client.complete(request, cancel)).await.expect("complete hung")
}

async fn received_bodies(server: &MockServer) -> Vec<Value> {
    let requests = server.received_requests().await.expect("wiremock records requests");
    requests.iter().filter(|request| request.method.as_str() == "POST").map(|r| r.body_json().unwrap()).collect()
}

#[tokio::test]
async fn streamed_chunks_are_assembled() {
    let server = mock_completions(sse_response(sse_completion(&["a + ", "b"], "stop"))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let answer = complete_bounded(&client, request(&[])).await.unwrap();
    assert_eq!(answer.text, "a + b");
    assert_eq!(answer.stop, RemoteStop::Stop);
    assert_eq!(answer.n_chunks, 3);
    assert!(answer.first_token_ms <= answer.total_ms);
    assert_eq!(client.health(), RemoteHealth::Up);

    let bodies = received_bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["stream"], json!(true));
    assert_eq!(bodies[0]["model"], json!("test-model"));
    assert_eq!(bodies[0]["prompt"], json!("fn add(a: i32, b: i32) -> i32 {\n    "));
    assert_eq!(bodies[0]["max_tokens"], json!(16));
    assert_eq!(bodies[0]["seed"], json!(1));
}

#[tokio::test]
async fn finish_reason_length_is_reported() {
    let server = mock_completions(sse_response(sse_completion(&["x"], "length"))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let answer = complete_bounded(&client, request(&[])).await.unwrap();
    assert_eq!((answer.text.as_str(), answer.stop), ("x", RemoteStop::Length));
}

#[tokio::test]
async fn suffix_is_sent_only_when_supported() {
    for (supports_suffix, expected) in [(true, json!("\n}\n")), (false, Value::Null)] {
        let server = mock_completions(sse_response(sse_completion(&["a"], "stop"))).await;
        let client = RemoteClient::new(RemoteConfig { supports_suffix, ..config(&server.uri()) }).unwrap();
        complete_bounded(&client, request(&[])).await.unwrap();
        assert_eq!(received_bodies(&server).await[0]["suffix"], expected, "supports_suffix={supports_suffix}");
    }
}

#[tokio::test]
async fn chat_shape() {
    let server = MockServer::start().await;
    let mut body = String::new();
    for delta in [json!({"role":"assistant","content":null}), json!({"content":"let"}), json!({"content":" x"})] {
        body += &format!("data: {}\n\n", json!({"choices":[{"index":0,"delta":delta,"finish_reason":null}]}));
    }
    body +=
        &format!("data: {}\n\ndata: [DONE]\n\n", json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(sse_response(body)).mount(&server).await;
    // A trailing /v1 in the base URL is accepted.
    let url = format!("{}/v1", server.uri());
    let client = RemoteClient::new(RemoteConfig { chat: true, supports_suffix: true, ..config(&url) }).unwrap();
    let request = RemoteRequest { system: Some("You complete code.".to_string()), ..request(&[]) };
    let answer = complete_bounded(&client, request).await.unwrap();
    assert_eq!((answer.text.as_str(), answer.stop), ("let x", RemoteStop::Stop));

    let bodies = received_bodies(&server).await;
    assert_eq!(
        bodies[0]["messages"],
        json!([
            {"role": "system", "content": "You complete code."},
            {"role": "user", "content": "fn add(a: i32, b: i32) -> i32 {\n    "},
        ])
    );
    assert_eq!(bodies[0].get("prompt"), None);
    assert_eq!(bodies[0].get("suffix"), None, "chat has no suffix");
}

#[tokio::test]
async fn client_side_stops_beyond_the_four_sent() {
    let stops = ["<1>", "<2>", "<3>", "<4>", "<5>", "END"];
    // "END" is split across chunks; the server (a mock) does not apply it.
    let server = mock_completions(sse_response(sse_completion(&["a + b", " E", "ND more", " text"], "stop"))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let answer = complete_bounded(&client, request(&stops)).await.unwrap();
    assert_eq!((answer.text.as_str(), answer.stop), ("a + b ", RemoteStop::ClientStop));
    assert_eq!(received_bodies(&server).await[0]["stop"], json!(["<1>", "<2>", "<3>", "<4>"]));
}

#[tokio::test]
async fn http_500_is_status_and_marks_down_until_retry_at() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("{\"error\":\"boom\"}"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .respond_with(sse_response(sse_completion(&["ok"], "stop")))
        .mount(&server)
        .await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let before = Instant::now();
    assert_eq!(complete_bounded(&client, request(&[])).await, Err(RemoteError::Status(500)));
    let RemoteHealth::Down { since, last_error, retry_at } = client.health() else {
        panic!("a 500 must mark the backend down: {:?}", client.health());
    };
    assert!(since >= before && retry_at > since, "{since:?} {retry_at:?}");
    assert!(last_error.contains("500"), "{last_error}");
    assert!(matches!(client.health_at(retry_at - Duration::from_millis(1)), RemoteHealth::Down { .. }));
    assert_eq!(client.health_at(retry_at), RemoteHealth::Up, "Down ends at retry_at");
    let (_, reported, _) = client.last_failure().expect("the failure is reported until a request succeeds");
    assert_eq!(reported, last_error);

    // The probe after retry_at (callers skip it before; the client itself does not refuse) brings it back.
    let answer = complete_bounded(&client, request(&[])).await.unwrap();
    assert_eq!(answer.text, "ok");
    assert_eq!(client.health(), RemoteHealth::Up);
    assert_eq!(client.last_failure(), None, "a success clears the reported failure");
    assert_eq!(client.counters().n_failures, 1);
}

#[tokio::test]
async fn http_429_retry_after_sets_retry_at() {
    let server = mock_completions(ResponseTemplate::new(429).insert_header("retry-after", "7")).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let before = Instant::now();
    let error = complete_bounded(&client, request(&[])).await.unwrap_err();
    assert_eq!(error, RemoteError::RateLimited { retry_after_ms: Some(7000) });
    assert_eq!(error.to_string(), "remote server is rate limiting (retry after 7000 ms)");
    let RemoteHealth::Down { retry_at, .. } = client.health() else { panic!("429 must mark the backend down") };
    assert!(retry_at >= before + Duration::from_secs(7), "retry_at follows Retry-After");
    assert!(retry_at <= Instant::now() + Duration::from_secs(7));
}

#[tokio::test]
async fn http_400_is_status_but_not_down() {
    let server = mock_completions(ResponseTemplate::new(400).set_body_string("Unsupported param: suffix")).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    assert_eq!(complete_bounded(&client, request(&[])).await, Err(RemoteError::Status(400)));
    assert_eq!(client.health(), RemoteHealth::Up, "a request the server found malformed says nothing of its health");
}

#[tokio::test]
async fn slow_first_byte_hits_the_deadline() {
    let server =
        mock_completions(sse_response(sse_completion(&["late"], "stop")).set_delay(Duration::from_secs(60))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let request = RemoteRequest { deadline: Instant::now() + DEADLINE, ..request(&[]) };
    assert_eq!(complete_bounded(&client, request).await, Err(RemoteError::Timeout));
    // The request's own budget (shorter than timeout_ms) ran out: one slow answer for a keystroke is not an
    // outage, so ghost text keeps going to the endpoint.
    assert_eq!(client.health(), RemoteHealth::Up, "a missed request deadline leaves the backend up");
}

#[tokio::test]
async fn timeout_ms_caps_a_later_deadline() {
    let server =
        mock_completions(sse_response(sse_completion(&["late"], "stop")).set_delay(Duration::from_secs(60))).await;
    let client = RemoteClient::new(RemoteConfig { timeout_ms: 300, ..config(&server.uri()) }).unwrap();
    let request = RemoteRequest { deadline: Instant::now() + Duration::from_secs(3600), ..request(&[]) };
    assert_eq!(complete_bounded(&client, request).await, Err(RemoteError::Timeout));
    assert!(matches!(client.health(), RemoteHealth::Down { .. }), "running past timeout_ms marks the backend down");
}

#[tokio::test]
async fn ghost_text_stop_rules_close_the_stream_as_text_arrives() {
    let pieces = ["let sum = a + b;\n", "    sum\n", "}\n", "fn next() {}\n"];
    let server = mock_completions(sse_response(sse_completion(&pieces, "length"))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let rules = StreamRules { mode: StopMode::Block, indent: "    ".into(), suffix: "\n}\n".into(), max_lines: 8 };
    let request = RemoteRequest { rules: Some(rules), ..request(&[]) };
    let answer = complete_bounded(&client, request).await.unwrap();
    // The dedented `}` ends the block: nothing after it is read.
    assert_eq!((answer.text.as_str(), answer.stop), ("let sum = a + b;\n    sum", RemoteStop::ClientStop));
}

#[tokio::test]
async fn a_deadline_already_past_sends_nothing() {
    let server = mock_completions(sse_response(sse_completion(&["x"], "stop"))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let request = RemoteRequest { deadline: Instant::now(), ..request(&[]) };
    assert_eq!(complete_bounded(&client, request).await, Err(RemoteError::Timeout));
    assert!(received_bodies(&server).await.is_empty());
}

#[tokio::test]
async fn truncated_stream() {
    // Two chunks, then the body ends: no finish reason, no [DONE].
    let body = (0..2)
        .map(|_| format!("data: {}\n\n", json!({"choices":[{"text":"x","finish_reason":null}]})))
        .collect::<String>();
    let server = mock_completions(sse_response(body)).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    assert_eq!(complete_bounded(&client, request(&[])).await, Err(RemoteError::Truncated));
    assert!(matches!(client.health(), RemoteHealth::Down { .. }));
}

#[tokio::test]
async fn invalid_json() {
    let server = mock_completions(sse_response("data: {\"choices\": [oops\n\ndata: [DONE]\n\n".to_string())).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let error = complete_bounded(&client, request(&[])).await.unwrap_err();
    assert!(matches!(&error, RemoteError::BadResponse(message) if message.contains("invalid JSON")), "{error:?}");
}

#[tokio::test]
async fn error_event_mid_stream_is_bad_response() {
    let body = format!("data: {}\n\n", json!({"error":{"code":500,"message":"the slot crashed"}}));
    let server = mock_completions(sse_response(body)).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let error = complete_bounded(&client, request(&[])).await.unwrap_err();
    assert_eq!(error, RemoteError::BadResponse("the server reported an error mid-stream: the slot crashed".into()));
}

#[tokio::test]
async fn connection_refused() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client = RemoteClient::new(config(&format!("http://127.0.0.1:{port}"))).unwrap();
    let error = complete_bounded(&client, request(&[])).await.unwrap_err();
    assert!(matches!(&error, RemoteError::Unreachable(message) if message.contains("refused")), "{error:?}");
    assert!(matches!(client.health(), RemoteHealth::Down { .. }));
    assert_eq!(client.warm().await.map_err(|error| matches!(error, RemoteError::Unreachable(_))), Err(true));
}

#[tokio::test]
async fn malformed_configs() {
    let cases = [
        (RemoteConfig { url: "not a url".into(), ..config("") }, "is not a URL"),
        (RemoteConfig { url: "ftp://127.0.0.1".into(), ..config("") }, "not http or https"),
        (RemoteConfig { timeout_ms: 0, ..config("http://127.0.0.1:1") }, "timeout_ms is 0"),
        (
            RemoteConfig { api_key_env: Some("SPARK_TEST_REMOTE_KEY_UNSET".into()), ..config("http://127.0.0.1:1") },
            "SPARK_TEST_REMOTE_KEY_UNSET is not set",
        ),
    ];
    for (config, expected) in cases {
        let error = RemoteClient::new(config.clone()).unwrap_err();
        assert!(matches!(&error, RemoteError::Config(message) if message.contains(expected)), "{config:?}: {error}");
    }
}

#[tokio::test]
async fn warm_opens_the_connection_the_completion_reuses() {
    let server = mock_completions(sse_response(sse_completion(&["a"], "stop"))).await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data":[{"id":"test-model"}]})))
        .mount(&server)
        .await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    client.warm().await.unwrap();
    assert_eq!(client.counters().n_connects, 1);
    for _ in 0..3 {
        complete_bounded(&client, request(&[])).await.unwrap();
    }
    assert_eq!(client.counters().n_connects, 1, "the warm connection is reused by every request");

    let unpooled = RemoteClient::new_without_pool(config(&server.uri())).unwrap();
    for _ in 0..3 {
        complete_bounded(&unpooled, request(&[])).await.unwrap();
    }
    assert_eq!(unpooled.counters().n_connects, 3, "without a pool, one connection per request");
}

// ---- The API key never leaks ----

const CANARY: &str = "sk-canary-7f3a9c1e-DO-NOT-LEAK";

/// Captures every log line (all levels) written while `run` runs on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_key_is_sent_as_bearer_and_never_leaks() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // Unique to this test: no other test reads it.
    std::env::set_var("SPARK_TEST_REMOTE_KEY_CANARY", format!("  {CANARY}\n"));

    let server = MockServer::start().await;
    // The first answer echoes the key back in an error body (as a careless proxy might); the second is a 401.
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string(format!("bad key Bearer {CANARY}")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_string(format!("invalid key {CANARY}")))
        .mount(&server)
        .await;
    let keyed = |url: &str| RemoteConfig { api_key_env: Some("SPARK_TEST_REMOTE_KEY_CANARY".into()), ..config(url) };
    let client = RemoteClient::new(keyed(&server.uri())).unwrap();

    let mut errors = Vec::new();
    errors.push(complete_bounded(&client, request(&[])).await.unwrap_err());
    errors.push(complete_bounded(&client, request(&[])).await.unwrap_err());
    assert_eq!(errors, [RemoteError::Status(500), RemoteError::Unauthorized]);
    let refused = RemoteClient::new(keyed("http://127.0.0.1:9")).unwrap();
    errors.push(complete_bounded(&refused, request(&[])).await.unwrap_err());
    errors.push(refused.warm().await.unwrap_err());

    let requests = server.received_requests().await.unwrap();
    for request in &requests {
        let authorization = request.headers.get("authorization").expect("the key is sent").to_str().unwrap();
        assert_eq!(authorization, format!("Bearer {CANARY}"));
    }

    let mut seen = format!("{client:?} {refused:?} {:?} {:?}", client.health(), refused.health());
    for error in &errors {
        seen += &format!(" {error} {error:?}");
    }
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("remote server refused the request"), "the error body excerpt is logged: {logs}");
    assert!(logs.contains("[redacted]"), "and the key inside it is redacted: {logs}");
    assert!(!seen.contains(CANARY), "the key leaked into errors or Debug: {seen}");
    assert!(!logs.contains(CANARY), "the key leaked into the logs: {logs}");
    assert!(!seen.contains("7f3a9c1e") && !logs.contains("7f3a9c1e"));
}

// ---- Faults that need control over the socket: a scripted HTTP/1.1 server ----

/// Accepts one connection, reads one request, then hands the socket to `script`.
async fn scripted_server<F, Fut>(script: F) -> (String, tokio::task::JoinHandle<()>)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        script(socket).await;
    });
    (url, handle)
}

async fn read_request(socket: &mut TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n_read = socket.read(&mut chunk).await.unwrap();
        assert!(n_read > 0, "the client closed before sending a request");
        buffer.extend_from_slice(&chunk[..n_read]);
        let text = String::from_utf8_lossy(&buffer);
        if let Some(header_end) = text.find("\r\n\r\n") {
            let content_length = text[..header_end]
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                })
                .map_or(0, |value| value.parse::<usize>().unwrap());
            if buffer.len() >= header_end + 4 + content_length {
                return;
            }
        }
    }
}

const STREAM_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

fn http_chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

fn sse_text(text: &str) -> String {
    format!("data: {}\n\n", json!({"choices":[{"text":text,"finish_reason":null}]}))
}

/// Waits until the client closes the connection (reads EOF or an error), draining whatever it sends.
async fn wait_for_close(socket: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    while let Ok(n_read) = socket.read(&mut sink).await {
        if n_read == 0 {
            break;
        }
    }
}

#[tokio::test]
async fn connection_reset_before_the_response() {
    // Every connection is reset as soon as the request is in: the client's one retry meets the same fate.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        for _ in 0..2 {
            let (mut socket, _) = listener.accept().await.unwrap();
            read_request(&mut socket).await;
            socket.set_zero_linger().unwrap();
            drop(socket);
        }
    });
    let client = RemoteClient::new(config(&url)).unwrap();
    let error = complete_bounded(&client, request(&[])).await.unwrap_err();
    assert!(matches!(error, RemoteError::Unreachable(_)), "{error:?}");
    assert_eq!(client.counters().n_connects, 2, "one retry, on a new connection");
    server.await.unwrap();
}

#[tokio::test]
async fn connection_reset_mid_stream() {
    let (url, server) = scripted_server(|mut socket| async move {
        socket.write_all(STREAM_HEAD).await.unwrap();
        socket.write_all(&http_chunk(&sse_text("partial"))).await.unwrap();
        socket.flush().await.unwrap();
        socket.set_zero_linger().unwrap();
        drop(socket);
    })
    .await;
    let client = RemoteClient::new(config(&url)).unwrap();
    assert_eq!(complete_bounded(&client, request(&[])).await, Err(RemoteError::Truncated));
    server.await.unwrap();
}

#[tokio::test]
async fn a_client_stop_closes_the_stream() {
    let (closed_tx, closed_rx) = oneshot::channel();
    let (url, server) = scripted_server(|mut socket| async move {
        socket.write_all(STREAM_HEAD).await.unwrap();
        socket.write_all(&http_chunk(&sse_text("let total = a;\nmore"))).await.unwrap();
        // The server would go on generating; it stops when the client closes.
        wait_for_close(&mut socket).await;
        closed_tx.send(()).unwrap();
    })
    .await;
    let client = RemoteClient::new(config(&url)).unwrap();
    let answer = complete_bounded(&client, request(&["\n"])).await.unwrap();
    assert_eq!((answer.text.as_str(), answer.stop), ("let total = a;", RemoteStop::ClientStop));
    tokio::time::timeout(HANG_GUARD, closed_rx).await.expect("the client never closed the stream").unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn cancel_mid_stream_closes_the_connection() {
    let (first_sent_tx, first_sent_rx) = oneshot::channel();
    let (closed_tx, closed_rx) = oneshot::channel();
    let (url, server) = scripted_server(|mut socket| async move {
        socket.write_all(STREAM_HEAD).await.unwrap();
        socket.write_all(&http_chunk(&sse_text("let"))).await.unwrap();
        first_sent_tx.send(()).unwrap();
        wait_for_close(&mut socket).await;
        closed_tx.send(()).unwrap();
    })
    .await;
    let client = RemoteClient::new(config(&url)).unwrap();
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            first_sent_rx.await.unwrap();
            cancel.cancel();
        })
    };
    assert_eq!(complete_with_cancel(&client, request(&[]), cancel).await, Err(RemoteError::Cancelled));
    tokio::time::timeout(HANG_GUARD, closed_rx).await.expect("cancel did not close the connection").unwrap();
    assert_eq!(client.health(), RemoteHealth::Up, "a cancel is not a failure");
    canceller.await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn cancelled_before_start_sends_nothing() {
    let server = mock_completions(sse_response(sse_completion(&["x"], "stop"))).await;
    let client = RemoteClient::new(config(&server.uri())).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(complete_with_cancel(&client, request(&[]), cancel).await, Err(RemoteError::Cancelled));
    assert!(received_bodies(&server).await.is_empty());
}

#[tokio::test]
async fn a_stall_mid_stream_returns_the_text_so_far_at_the_deadline() {
    let (url, server) = scripted_server(|mut socket| async move {
        socket.write_all(STREAM_HEAD).await.unwrap();
        socket.write_all(&http_chunk(&sse_text("let total"))).await.unwrap();
        wait_for_close(&mut socket).await;
    })
    .await;
    let client = RemoteClient::new(config(&url)).unwrap();
    let request = RemoteRequest { deadline: Instant::now() + DEADLINE, ..request(&[]) };
    let answer = complete_bounded(&client, request).await.unwrap();
    assert_eq!((answer.text.as_str(), answer.stop), ("let total", RemoteStop::Deadline));
    assert_eq!(client.health(), RemoteHealth::Up, "an answer at the deadline is an answer");
    server.await.unwrap();
}

/// A pooled connection that the server closes after it was reused (llama-server closes every connection after a
/// streamed answer; the client may pick it before it sees the close): the request never got a response byte, so
/// it is sent once more on a new connection instead of failing.
#[tokio::test]
async fn a_stale_pooled_connection_is_retried_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.unwrap();
        read_request(&mut first).await;
        first.write_all(STREAM_HEAD).await.unwrap();
        first.write_all(&http_chunk(&sse_completion(&["one"], "stop"))).await.unwrap();
        first.write_all(b"0\r\n\r\n").await.unwrap();
        // The second request arrives on the kept-alive connection; the server closes it without an answer.
        read_request(&mut first).await;
        drop(first);
        let (mut second, _) = listener.accept().await.unwrap();
        read_request(&mut second).await;
        second.write_all(STREAM_HEAD).await.unwrap();
        second.write_all(&http_chunk(&sse_completion(&["two"], "stop"))).await.unwrap();
        second.write_all(b"0\r\n\r\n").await.unwrap();
        wait_for_close(&mut second).await;
    });
    let client = RemoteClient::new(config(&url)).unwrap();
    assert_eq!(complete_bounded(&client, request(&[])).await.unwrap().text, "one");
    assert_eq!(complete_bounded(&client, request(&[])).await.unwrap().text, "two");
    assert_eq!(client.counters().n_connects, 2, "the retry opened the second connection");
    assert_eq!(client.health(), RemoteHealth::Up);
    drop(client);
    server.await.unwrap();
}
