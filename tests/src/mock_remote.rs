//! A loopback OpenAI-compatible endpoint for the end-to-end tests: every completion is answered with a text (fixed,
//! or computed from the request), streamed, and counted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;

/// A loopback OpenAI-compatible endpoint whose completions all answer `answer`; counts them.
pub struct Mock {
    pub url: String,
    pub completions: Arc<AtomicUsize>,
}

pub fn mock(answer: &'static str) -> Mock {
    mock_with(move |_| answer.to_owned(), std::time::Duration::ZERO)
}

/// An endpoint whose answer is computed from the request's JSON body, sent after `delay`.
pub fn mock_with(answer: impl Fn(&str) -> String + Send + Sync + 'static, delay: std::time::Duration) -> Mock {
    let answer = Arc::new(answer);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let completions = Arc::new(AtomicUsize::new(0));
    let counter = completions.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = counter.clone();
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
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
                    let answer = answer(&String::from_utf8_lossy(&body));
                    let chunk = json!({"choices": [{"index": 0, "text": answer, "finish_reason": null}]});
                    let done = json!({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]});
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
                         data: {chunk}\n\ndata: {done}\n\ndata: [DONE]\n\n"
                    )
                } else {
                    let body = r#"{"object":"list","data":[]}"#;
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    Mock { url, completions }
}
