//! The one loopback OpenAI-compatible endpoint of Spark's tests (spark-ide's and spark-tests'): every
//! `POST …/completions` is counted and answered after a delay, with a text streamed as server-sent events (fixed,
//! or computed from the request's JSON body) or with HTTP 500; any other request (`GET /v1/models`) gets an empty
//! model list. It depends on nothing of Spark's, so both crates can use it without a cycle.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

/// What the endpoint answers a completion request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// This text, streamed in one chunk, then the stop.
    Text(String),
    /// `500 Internal Server Error` with no body.
    ServerError,
}

/// A running endpoint: its base URL and the completion requests it has received.
pub struct Mock {
    pub url: String,
    pub completions: Arc<AtomicUsize>,
}

/// An endpoint whose completions all answer `answer`, at once.
pub fn mock(answer: &'static str) -> Mock {
    serve(move |_| Reply::Text(answer.to_owned()), Duration::ZERO)
}

/// An endpoint whose completions all fail with HTTP 500.
pub fn failing() -> Mock {
    serve(|_| Reply::ServerError, Duration::ZERO)
}

/// An endpoint whose answer is computed from the request's JSON body, sent after `delay`.
pub fn mock_with(answer: impl Fn(&str) -> String + Send + Sync + 'static, delay: Duration) -> Mock {
    serve(move |body| Reply::Text(answer(body)), delay)
}

/// An endpoint that answers each completion with `reply` of the request's JSON body, after `delay`; it serves
/// on its own threads for the rest of the test process.
pub fn serve(reply: impl Fn(&str) -> Reply + Send + Sync + 'static, delay: Duration) -> Mock {
    let reply = Arc::new(reply);
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("the bound address"));
    let completions = Arc::new(AtomicUsize::new(0));
    let counter = completions.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (counter, reply) = (counter.clone(), reply.clone());
            std::thread::spawn(move || answer(stream, &counter, reply.as_ref(), delay));
        }
    });
    Mock { url, completions }
}

/// Reads one HTTP request from `stream` and answers it (the connection closes after).
fn answer(
    mut stream: TcpStream,
    counter: &AtomicUsize,
    reply: &(dyn Fn(&str) -> Reply + Send + Sync),
    delay: Duration,
) {
    let Ok(clone) = stream.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let response = if request_line.starts_with("POST") && request_line.contains("completions") {
        counter.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(delay);
        match reply(&String::from_utf8_lossy(&body)) {
            Reply::Text(text) => {
                let chunk = json!({"choices": [{"index": 0, "text": text, "finish_reason": null}]});
                let done = json!({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]});
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
                     data: {chunk}\n\ndata: {done}\n\ndata: [DONE]\n\n"
                )
            }
            Reply::ServerError => {
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
            }
        }
    } else {
        let body = r#"{"object":"list","data":[]}"#;
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let _ = stream.write_all(response.as_bytes());
}
