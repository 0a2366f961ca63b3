//! Handlers that cannot take the server down or stall it, over stdio against the real binary: a panic in any
//! handler is answered with an error and the server answers the next request; a task whose candidate regex
//! backtracks catastrophically is answered and the server keeps reading input meanwhile.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_loopback::mock;
use spark_tests::LspClient;

const SHORT: Duration = Duration::from_secs(20);
const URI: &str = "file:///work/demo/src/total.rs";
const BROKEN: &str = "pub fn total(prices: &[u32]) -> u32 {\n    let sum: u32 = prices.iter().sum()\n    sum\n}\n";

fn initialize_with_resolve(client: &mut LspClient, options: Value) {
    let params = json!({
        "processId": null, "rootUri": null,
        "capabilities": {
            "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": true}},
            "workspace": {"applyEdit": true},
        },
        "initializationOptions": options,
    });
    let response = client.request("initialize", params, SHORT).unwrap();
    assert!(response.get("result").is_some(), "{response}");
    client.notify("initialized", json!({})).unwrap();
}

fn open(client: &mut LspClient, uri: &str, language_id: &str, text: &str) {
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}}),
        )
        .unwrap();
}

/// `SPARK_TEST_PANIC=<method>` makes that handler panic (a test-only hook read once at start). Each of the
/// action handlers then answers with an internal error, and the server still answers the next request.
#[test]
fn a_panic_in_any_handler_is_answered_with_an_error_and_the_server_keeps_answering() {
    let at = json!({"line": 1, "character": 38});
    let data = json!({"task": "spark.fix", "uri": URI, "version": 1, "range": {"start": at, "end": at}});
    let cases = [
        (
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": {"start": at, "end": at},
                                           "context": {"diagnostics": []}}),
        ),
        ("codeAction/resolve", json!({"title": "Spark fix", "data": data})),
        ("workspace/executeCommand", json!({"command": "spark.fix", "arguments": [data]})),
    ];
    for (method, params) in cases {
        let mut client = LspClient::start(&[("SPARK_TEST_PANIC", method)], None).unwrap();
        initialize_with_resolve(&mut client, json!({}));
        open(&mut client, URI, "rust", BROKEN);
        let answer = client.request(method, params, SHORT).unwrap_or_else(|error| panic!("{method}: {error}"));
        assert_eq!(answer["error"]["code"], -32603, "{method}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap_or("").contains(method), "{method}: {answer}");
        let status = client.request("spark/status", Value::Null, SHORT).unwrap();
        assert!(status["result"]["state"].is_string(), "{method}: the server answers after the panic: {status}");
        client.shutdown(SHORT).unwrap();
    }
}

/// The remote "model" writes a pattern that backtracks catastrophically on a counterexample (`(a+)+$` against
/// `aaa…a!` takes longer than the universe with a backtracking engine). The command is answered (nothing
/// verified: too slow), and while it runs the server keeps reading input: `spark/status` is answered first.
#[test]
fn a_catastrophic_regex_is_bounded_and_the_server_keeps_answering() {
    let remote = mock("(a+)+$");
    let mut client = LspClient::start(&[], None).unwrap();
    initialize_with_resolve(&mut client, json!({"remote": {"url": remote.url, "regex": "remote"}}));
    client.wait_model_ready(Duration::from_secs(120)).unwrap();
    let uri = "file:///work/demo/src/runs.ts";
    // Two readings of the examples survive (`[a-z]{3}`, `[a-z]+`): the model is asked to confirm one.
    let negative = format!("{}!", "a".repeat(48));
    let text = format!("// regex: a word, matches aaa, bbb, not {negative}\nexport const x = 1;\n");
    open(&mut client, uri, "typescript", &text);
    let at = json!({"line": 0, "character": 5});
    let started = Instant::now();
    let command = client
        .send_request(
            "workspace/executeCommand",
            json!({"command": "spark.generateRegex", "arguments": [{"uri": uri, "range": {"start": at, "end": at}}]}),
        )
        .unwrap();
    // Give the task time to reach the match, then ask for something else: it is answered while the match runs.
    std::thread::sleep(Duration::from_millis(300));
    let status = client.request("spark/status", Value::Null, SHORT).unwrap();
    assert_eq!(status["result"]["state"], "ready", "{status}");
    let answer = client.wait_response(command, Duration::from_secs(60)).unwrap();
    assert_eq!(answer["result"]["applied"], false, "{answer}");
    let reason = answer["result"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("too slow"), "{answer}");
    assert!(remote.completions.load(Ordering::SeqCst) >= 1, "the regex task went to the remote");
    eprintln!("catastrophic regex answered in {} ms", started.elapsed().as_millis());
    let status = client.request("spark/status", Value::Null, SHORT).unwrap();
    assert_eq!(status["result"]["state"], "ready", "{status}");
    client.shutdown(SHORT).unwrap();
}
