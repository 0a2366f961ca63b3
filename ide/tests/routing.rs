//! `route::Generator` branch by branch: the real engine around a scripted model on the local side, a loopback
//! OpenAI-compatible endpoint on the remote side (answering text, nothing, an error, or late).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spark_engine::{CompletionRequest, Engine, EngineConfig, EngineError, ModelSource, RemoteClient, RemoteConfig};
use spark_ide::config::Route;
use spark_ide::route::{Generator, Served};

/// What the loopback endpoint does with a completion request.
#[derive(Clone, Copy)]
enum Answer {
    Text(&'static str, Duration),
    Error500,
}

struct Endpoint {
    client: RemoteClient,
    completions: Arc<AtomicUsize>,
}

fn endpoint(answer: Answer) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let completions = Arc::new(AtomicUsize::new(0));
    let counter = completions.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = counter.clone();
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
                if !request_line.contains("completions") {
                    let body = r#"{"object":"list","data":[]}"#;
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n";
                    let _ = write!(stream, "{head}Content-Length: {}\r\n\r\n{body}", body.len());
                    return;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let response = match answer {
                    Answer::Text(text, delay) => {
                        std::thread::sleep(delay);
                        let chunk = serde_json::json!({"choices": [{"index": 0, "text": text, "finish_reason": null}]});
                        let done = serde_json::json!({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]});
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
                             data: {chunk}\n\ndata: {done}\n\ndata: [DONE]\n\n"
                        )
                    }
                    Answer::Error500 => {
                        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_owned()
                    }
                };
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    let config = RemoteConfig {
        url,
        model: "loopback".into(),
        api_key_env: None,
        timeout_ms: 10_000,
        chat: false,
        supports_suffix: false,
    };
    Endpoint { client: RemoteClient::new(config).unwrap(), completions }
}

/// A ghost-text request (one line) with its own prefix, so that no answer comes from another test's cache.
fn ghost_text(prefix: &str) -> CompletionRequest {
    CompletionRequest {
        lane: 1,
        prefix: format!("fn main() {{\n    let {prefix} = "),
        suffix: "\n}\n".into(),
        indent: "    ".into(),
        max_tokens: 32,
        deadline: Instant::now() + Duration::from_secs(10),
        ..Default::default()
    }
}

fn local(output: &str) -> Engine {
    Engine::start_scripted(vec![output.to_owned()])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

const QUICK: Duration = Duration::from_millis(0);

#[test]
fn remote_then_local_serves_the_remote_answer() {
    let remote = endpoint(Answer::Text("remote_value();", QUICK));
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::RemoteThenLocal);
    let generated = runtime().block_on(generator.generate(ghost_text("a"))).unwrap();
    assert_eq!(generated.served, Served::Remote);
    assert_eq!(generated.completion.text, "remote_value();");
    assert!(generated.remote_error.is_none());
    // Asked again in the same state: answered from the cache, no second round trip.
    let again = runtime().block_on(generator.generate(ghost_text("a"))).unwrap();
    assert_eq!(again.completion.text, "remote_value();");
    assert_eq!(remote.completions.load(Ordering::SeqCst), 1);
}

#[test]
fn remote_then_local_falls_back_when_the_remote_answers_empty() {
    let remote = endpoint(Answer::Text("", QUICK));
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::RemoteThenLocal);
    let generated = runtime().block_on(generator.generate(ghost_text("b"))).unwrap();
    assert_eq!(remote.completions.load(Ordering::SeqCst), 1, "the remote was asked first");
    assert_eq!(generated.served, Served::Local);
    assert_eq!(generated.completion.text, "local_value();");
    assert!(generated.remote_error.is_none(), "an empty answer is not a failure");
}

#[test]
fn remote_then_local_falls_back_with_one_error_when_the_remote_fails() {
    let remote = endpoint(Answer::Error500);
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::RemoteThenLocal);
    let generated = runtime().block_on(generator.generate(ghost_text("c"))).unwrap();
    assert_eq!(generated.served, Served::Local);
    assert_eq!(generated.completion.text, "local_value();");
    assert!(generated.remote_error.is_some());
    assert!(generator.take_remote_error().is_some(), "kept for one notice");
    assert!(generator.take_remote_error().is_none(), "taken once");
}

#[test]
fn a_remote_route_that_answers_empty_is_an_empty_answer_not_an_error() {
    let remote = endpoint(Answer::Text("", QUICK));
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::Remote);
    let generated = runtime().block_on(generator.generate(ghost_text("d"))).unwrap();
    assert_eq!(generated.served, Served::Remote);
    assert_eq!(generated.completion.text, "", "the local model is not asked on the remote route");
    assert!(generated.remote_error.is_none());
}

#[test]
fn race_takes_the_local_answer_when_the_remote_is_slow() {
    let remote = endpoint(Answer::Text("remote_value();", Duration::from_secs(3)));
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::Race);
    let generated = runtime().block_on(generator.generate(ghost_text("e"))).unwrap();
    assert_eq!(generated.served, Served::Local);
    assert_eq!(generated.completion.text, "local_value();");
}

#[test]
fn race_takes_the_local_answer_when_the_remote_answers_empty() {
    let remote = endpoint(Answer::Text("", QUICK));
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::Race);
    let generated = runtime().block_on(generator.generate(ghost_text("f"))).unwrap();
    assert_eq!(generated.completion.text, "local_value();");
    assert_eq!(generated.served, Served::Local);
}

/// The local model failed to load (no model): a race still has the remote, and its answer is served.
#[test]
fn race_serves_the_remote_when_the_local_model_is_unusable() {
    let remote = endpoint(Answer::Text("remote_value();", Duration::from_millis(200)));
    let config = EngineConfig { n_ctx: 512, ..EngineConfig::new(ModelSource::None, 1) };
    let engine = Engine::start(config);
    let generator = Generator::new(&engine, Some(&remote.client), Route::Race);
    let generated = runtime().block_on(generator.generate(ghost_text("g")));
    let generated = match generated {
        Ok(generated) => generated,
        Err(EngineError::NoModel) => panic!("the remote's answer was dropped because the local model has none"),
        Err(error) => panic!("{error}"),
    };
    assert_eq!(generated.served, Served::Remote);
    assert_eq!(generated.completion.text, "remote_value();");
}
