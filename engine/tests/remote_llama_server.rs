//! The remote backend against a real OpenAI-compatible server: llama.cpp's `llama-server` on 127.0.0.1 serving
//! the default model. The binary is built by scripts/build-llama-server.sh when it is missing (minutes, once).
//! Assertions are on properties (non-empty text, no stop string in it, stop reasons) and on the connection
//! counter, never on timings.

mod support;

use std::time::{Duration, Instant};

use spark_engine::remote::{RemoteClient, RemoteConfig, RemoteRequest, RemoteStop};
use support::llama_server::LlamaServer;
use tokio_util::sync::CancellationToken;

const FIXTURE: &str = include_str!("../../tests/fixtures/inventory.rs");

fn split_fixture() -> (String, String) {
    let (prefix, suffix) = FIXTURE.split_once("$0").expect("the fixture has a $0 cursor");
    (prefix.to_string(), suffix.to_string())
}

fn request(prompt: &str, suffix: Option<&str>, stop: &[&str], max_tokens: usize) -> RemoteRequest {
    RemoteRequest {
        prompt: prompt.to_string(),
        suffix: suffix.map(str::to_string),
        system: None,
        stop: stop.iter().map(|stop| stop.to_string()).collect(),
        max_tokens,
        temperature: 0.0,
        seed: Some(42),
        deadline: Instant::now() + Duration::from_secs(120),
        rules: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_against_llama_server() {
    let server = tokio::task::spawn_blocking(|| LlamaServer::start(&[]))
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("llama-server did not start: {error}"));
    let config = RemoteConfig {
        url: server.url.clone(),
        model: "qwen2.5-coder-0.5b".to_string(),
        api_key_env: None,
        timeout_ms: 120_000,
        chat: false,
        supports_suffix: false,
    };
    let client = RemoteClient::new(config.clone()).unwrap();
    client.warm().await.unwrap();
    assert_eq!(client.counters().n_connects, 1, "warm opens one connection");

    let (prefix, suffix) = split_fixture();
    // Fill-in on llama-server's OpenAI endpoint: the suffix cannot be sent (see below), the prefix is the prompt.
    let first = client.complete(request(&prefix, Some(&suffix), &[], 24), CancellationToken::new()).await;
    let first = first.unwrap_or_else(|error| panic!("{error}\n{}", server.log_tail()));
    assert!(!first.text.trim().is_empty(), "empty completion: {first:?}");
    assert!(first.n_chunks >= 2, "the answer was streamed: {first:?}");
    assert!(matches!(first.stop, RemoteStop::Stop | RemoteStop::Length), "{first:?}");
    // FIXME: the first completion should reuse the warm pooled connection (1), and does on a quiet machine; in
    // one CI run of the whole suite it opened a second one (2): llama-server had closed the idle connection
    // before the request, and the client replaced it. Asserted: at most one replacement.
    let after_first = client.counters().n_connects;
    assert!(after_first <= 2, "the first completion reused or replaced the warm connection");

    // More than four stops: the server applies the first four, the client all of them.
    let stops = ["\n", "<|A|>", "<|B|>", "<|C|>", "<|D|>", "<|E|>"];
    let second = client.complete(request(&prefix, None, &stops, 24), CancellationToken::new()).await.unwrap();
    assert!(!second.text.is_empty(), "{second:?}");
    assert!(stops.iter().all(|stop| !second.text.contains(stop)), "{second:?}");
    // llama-server usually closes a connection after a streamed response (its chunked content provider returns
    // false after `sink.done()`, which cpp-httplib takes for a cancel), and sometimes keeps it (seen in one CI
    // run: the second completion reused the first's connection); the client retries once when it picks a
    // connection the server already closed. Asserted: the second completion opened at most one connection.
    // Against servers that keep streamed connections alive (the mock tests) they are always reused.
    let after_second = client.counters().n_connects;
    assert!(
        (after_first..=after_first + 1).contains(&after_second),
        "the second completion opened {} connections",
        after_second - after_first
    );

    // A stop that only the client knows (the fifth) cuts the text and closes the stream, so the server stops
    // generating. Greedy decoding repeats the first answer.
    let client_only = first.text.trim_start().chars().take(2).collect::<String>();
    let stops = ["<|A|>", "<|B|>", "<|C|>", "<|D|>", client_only.as_str()];
    let third = client.complete(request(&prefix, None, &stops, 24), CancellationToken::new()).await.unwrap();
    let expected_cut = &first.text[..first.text.find(&client_only).unwrap()];
    assert_eq!((third.text.as_str(), third.stop), (expected_cut, RemoteStop::ClientStop), "{first:?}");
    client.complete(request(&prefix, None, &["\n"], 4), CancellationToken::new()).await.unwrap();
    let after_fourth = client.counters().n_connects;
    assert!(after_fourth <= after_second + 2, "at most one new connection per streamed completion: {after_fourth}");
    assert_eq!(client.counters().n_requests, 4);

    // FIXME: llama-server's /v1/completions takes an OpenAI `suffix` but ignores it (this version never calls
    // its `oaicompat_completion_params_parse`, which would reject it; older versions answered 400). Its fill-in
    // lives on the non-OpenAI /infill, which needs FIM tokens the default model does not have. So for llama-server
    // supports_suffix changes nothing: the answer is the same greedy text as without the suffix.
    let with_suffix = RemoteClient::new(RemoteConfig { supports_suffix: true, ..config.clone() }).unwrap();
    let ignored = with_suffix.complete(request(&prefix, Some(&suffix), &[], 8), CancellationToken::new()).await;
    let ignored = ignored.unwrap();
    assert!(first.text.starts_with(&ignored.text), "the suffix changed the answer: {ignored:?} vs {first:?}");

    // The chat shape: the base model has no chat template, llama-server falls back to its default one; the
    // stream must parse and finish, whatever the (base model's) text.
    let chat = RemoteClient::new(RemoteConfig { chat: true, ..config }).unwrap();
    let request =
        RemoteRequest { system: Some("Complete the Rust code.".to_string()), ..request(&prefix, None, &[], 8) };
    let answer = chat.complete(request, CancellationToken::new()).await.unwrap();
    assert!(matches!(answer.stop, RemoteStop::Stop | RemoteStop::Length), "{answer:?}");
    drop(server);
}
