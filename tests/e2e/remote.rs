//! Remote routing over stdio: the loopback OpenAI-compatible endpoint (spark-loopback) counts what reaches it.
//! Ghost text never goes there unless routed; a task routed remote-then-local uses it, and a failing remote
//! degrades to the local model with one notice.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};
use spark_loopback::{failing, mock};
use spark_tests::{end_position, LspClient};

const URI: &str = "file:///work/demo/src/sum.rs";
const BROKEN: &str = "pub fn f(a: u32) -> u32 {\n    let x = a +;\n    x\n}\n";

fn start(remote: Value) -> LspClient {
    let log = spark_tests::scratch_dir("remote").join("server.log");
    let mut client = LspClient::start(&[("SPARK_LOG", "debug,llama-cpp-2=warn")], Some(&log)).unwrap();
    client.initialize(json!({"inline": {"deadlineMs": 120000}, "remote": remote})).unwrap();
    client.wait_model_ready(Duration::from_secs(120)).unwrap();
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 1, "text": BROKEN}}),
        )
        .unwrap();
    client
}

fn fix_at_error(client: &mut LspClient) -> Value {
    let at = json!({"line": 1, "character": 15});
    client
        .request(
            "workspace/executeCommand",
            json!({"command": "spark.fix", "arguments": [{"uri": URI, "range": {"start": at, "end": at}}]}),
            Duration::from_secs(180),
        )
        .unwrap()
}

#[test]
fn typing_sends_nothing_to_a_remote_configured_for_fix_and_the_fix_goes_there() {
    let mock = mock("let x = a + 1;");
    let mut client = start(json!({"url": mock.url, "fix": "remote-then-local", "tests": "local", "regex": "local"}));
    // A typing session: edits and ghost-text requests.
    let mut text = BROKEN.to_owned();
    let start = text.find("    x\n").unwrap() + 5;
    for (offset, ch) in " + 1".chars().enumerate() {
        let at = start + offset;
        let position = end_position(&text[..at]);
        client
            .notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": URI, "version": offset + 2},
                       "contentChanges": [{"range": {"start": position, "end": position}, "text": ch.to_string()}]}),
            )
            .unwrap();
        text.insert(at, ch);
        let position = end_position(&text[..at + 1]);
        client
            .request(
                "textDocument/inlineCompletion",
                json!({"textDocument": {"uri": URI}, "position": position, "context": {"triggerKind": 2}}),
                Duration::from_secs(180),
            )
            .unwrap();
    }
    assert_eq!(mock.completions.load(Ordering::SeqCst), 0, "ghost text must not leave the machine");
    // Back to the broken text, then the fix: it is routed to the remote, whose answer verifies.
    client
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": 20}, "contentChanges": [{"text": BROKEN}]}),
        )
        .unwrap();
    let result = fix_at_error(&mut client);
    assert!(mock.completions.load(Ordering::SeqCst) >= 1, "the fix went to the remote");
    assert_eq!(result["result"]["applied"], true, "{result}");
    let apply = client.wait_for("workspace/applyEdit", Duration::from_secs(5), |_| true).unwrap();
    // The edit is narrowed to what the remote's rewrite changed; applied, it gives the remote's line.
    let edit = &apply["params"]["edit"]["documentChanges"][0]["edits"][0];
    let offset = |position: &Value| {
        let line = position["line"].as_u64().unwrap() as usize;
        let character = position["character"].as_u64().unwrap() as usize;
        BROKEN.split_inclusive('\n').take(line).map(str::len).sum::<usize>() + character
    };
    let (start, end) = (offset(&edit["range"]["start"]), offset(&edit["range"]["end"]));
    let fixed = format!("{}{}{}", &BROKEN[..start], edit["newText"].as_str().unwrap(), &BROKEN[end..]);
    assert!(fixed.contains("let x = a + 1;"), "{apply}");
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    assert_eq!(status["result"]["remote"]["configured"], true);
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn a_failing_remote_degrades_to_local_with_one_notice() {
    let mock = failing();
    let mut client = start(json!({"url": mock.url, "fix": "remote-then-local"}));
    let first = fix_at_error(&mut client);
    assert!(first["result"].is_object(), "answered: {first}");
    let second = fix_at_error(&mut client);
    assert!(second["result"].is_object(), "answered: {second}");
    assert!(mock.completions.load(Ordering::SeqCst) >= 1);
    let notices: Vec<&Value> = client
        .seen
        .iter()
        .filter(|message| message["method"] == "window/showMessage")
        .filter(|message| message["params"]["message"].as_str().unwrap_or("").contains("remote endpoint failed"))
        .collect();
    assert_eq!(notices.len(), 1, "one notice, not one per request: {notices:?}");
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    assert_eq!(status["result"]["remote"]["health"], "down", "{status}");
    client.shutdown(Duration::from_secs(20)).unwrap();
}
