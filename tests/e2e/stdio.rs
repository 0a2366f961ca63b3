//! End to end over stdio against the real binary and the real default model: what an editor sees.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_tests::{end_position, scratch_dir, workspace_root, LspClient};

const URI: &str = "file:///work/demo/src/inventory.rs";

fn fixture() -> (String, usize) {
    let text = std::fs::read_to_string(workspace_root().join("tests/fixtures/inventory.rs")).unwrap();
    let cursor = text.find("$0").unwrap();
    (text.replace("$0", ""), cursor)
}

/// Generous deadlines: the suite asserts behaviour, and CI machines are noisy; speed lives in spark-bench. Every
/// checked suggestion is shown (`minConfidence` 0): these tests are about the protocol, and the default model's
/// confidence at the fixture's place is not their subject (engine/tests/local_model.rs tests the gate).
fn options() -> Value {
    json!({"inline": {"deadlineMs": 120000, "minConfidence": 0.0}})
}

fn open(client: &mut LspClient, text: &str) {
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 1, "text": text}}),
        )
        .unwrap();
}

/// Types `typed` one character at a time at byte `at` of `text`, as incremental didChange notifications.
fn type_text(client: &mut LspClient, text: &mut String, at: &mut usize, typed: &str, version: &mut i64) {
    for ch in typed.chars() {
        let position = end_position(&text[..*at]);
        *version += 1;
        client
            .notify(
                "textDocument/didChange",
                json!({
                    "textDocument": {"uri": URI, "version": *version},
                    "contentChanges": [{"range": {"start": position, "end": position}, "text": ch.to_string()}],
                }),
            )
            .unwrap();
        text.insert(*at, ch);
        *at += ch.len_utf8();
    }
}

fn inline_items(response: &Value) -> Vec<Value> {
    response["result"]["items"].as_array().cloned().unwrap_or_default()
}

/// What must hold for any suggestion: anchored at the cursor, not empty, not repeating the text after it.
fn assert_good_suggestion(insert: &str, text: &str, at: usize) {
    assert!(!insert.trim().is_empty(), "empty suggestion");
    let line_suffix = text[at..].split('\n').next().unwrap().trim();
    if !line_suffix.is_empty() {
        assert!(
            !insert.trim_end().ends_with(line_suffix),
            "suggestion {insert:?} repeats the rest of the line {line_suffix:?}"
        );
    }
    let next_line = text[at..].split('\n').skip(1).map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    let last_line = insert.trim_end().rsplit('\n').next().unwrap().trim();
    if line_suffix.is_empty() && !next_line.is_empty() {
        assert_ne!(last_line, next_line, "suggestion {insert:?} repeats the next line");
    }
}

#[test]
fn ghost_text_end_to_end_over_stdio() {
    let logs = scratch_dir("ghost").join("server.log");
    let mut client = LspClient::start(&[("SPARK_LOG", "info,spark_engine=debug")], Some(&logs)).unwrap();
    let init = client.initialize(options()).unwrap();
    let capabilities = &init["result"]["capabilities"];
    assert_eq!(capabilities["inlineCompletionProvider"], json!(true), "{init}");
    assert!(capabilities["completionProvider"].is_object());
    assert_eq!(capabilities["positionEncoding"], "utf-16");
    assert_eq!(capabilities["textDocumentSync"]["change"], 2, "incremental sync");
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    // Progress was reported while the model loaded.
    assert!(client.seen.iter().any(|message| message["method"] == "$/progress"), "no $/progress");

    let (mut text, mut at) = fixture();
    open(&mut client, &text);
    let mut version = 1;
    type_text(&mut client, &mut text, &mut at, "let stock = self.items", &mut version);

    let cursor = end_position(&text[..at]);
    let params = json!({
        "textDocument": {"uri": URI},
        "position": cursor,
        "context": {"triggerKind": 2},
    });
    let response = client.request("textDocument/inlineCompletion", params.clone(), Duration::from_secs(180)).unwrap();
    let items = inline_items(&response);
    assert_eq!(items.len(), 1, "{response}");
    let insert = items[0]["insertText"].as_str().unwrap();
    assert_eq!(items[0]["range"]["start"], cursor, "anchored at the cursor");
    assert_eq!(items[0]["range"]["end"], cursor);
    assert_good_suggestion(insert, &text, at);

    // The same suggestion through the completion fallback: one item, its edit ends at the cursor.
    let response = client.request("textDocument/completion", params, Duration::from_secs(180)).unwrap();
    let items = response["result"]["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{response}");
    let edit = &items[0]["textEdit"];
    assert_eq!(edit["range"]["end"], cursor);
    let word_start = cursor["character"].as_u64().unwrap() - word_len_before(&text, at);
    assert_eq!(edit["range"]["start"]["character"], word_start, "the edit starts at the typed word");
    assert!(edit["newText"].as_str().unwrap().ends_with(insert.trim_end()), "{edit} vs {insert:?}");

    // The same context again is answered from the suggestion cache, without the model.
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    assert_eq!(status["result"]["state"], "ready", "{status}");
    assert!(status["result"]["counters"]["cacheHits"].as_u64().unwrap() >= 1, "{status}");

    // A request one character back shares all of its prompt but the last token with what is in the KV cache.
    let back = end_position(&text[..at - 1]);
    let params = json!({"textDocument": {"uri": URI}, "position": back, "context": {"triggerKind": 1}});
    client.request("textDocument/inlineCompletion", params, Duration::from_secs(180)).unwrap();
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    let last = &status["result"]["counters"]["last"];
    assert!(last["nReused"].as_u64().unwrap() > 0, "{status}");
    assert!(last["nDecoded"].as_u64().unwrap() < last["nReused"].as_u64().unwrap(), "{status}");

    let exit = client.shutdown(Duration::from_secs(20)).unwrap();
    assert!(exit.success(), "exit status {exit:?}");
    let log = std::fs::read_to_string(&logs).unwrap();
    assert!(log.contains("n_reused"), "engine counters are logged");
}

/// Length (UTF-16) of the identifier that ends at `at`: the completion item's edit starts there.
fn word_len_before(text: &str, at: usize) -> u64 {
    text[..at].chars().rev().take_while(|ch| ch.is_alphanumeric() || *ch == '_').count() as u64
}

#[test]
fn mid_line_suggestion_completes_the_line_without_repeating_the_suffix() {
    let mut client = LspClient::start(&[], None).unwrap();
    client.initialize(options()).unwrap();
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    let (fixture_text, cursor) = fixture();
    let mut text = fixture_text.clone();
    text.insert_str(cursor, "let stock = self.items.get();");
    let at = cursor + "let stock = self.items.get(".len();
    open(&mut client, &text);
    let position = end_position(&text[..at]);
    let response = client
        .request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": URI}, "position": position, "context": {"triggerKind": 1}}),
            Duration::from_secs(180),
        )
        .unwrap();
    for item in inline_items(&response) {
        let insert = item["insertText"].as_str().unwrap();
        assert!(!insert.contains('\n'), "mid-line suggestions stay on the line: {insert:?}");
        assert_good_suggestion(insert, &text, at);
    }
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn request_before_the_model_is_loaded_is_answered_empty_at_once() {
    // A FIFO as the model file keeps the model thread waiting on its first bytes: "loading", for certain.
    let dir = scratch_dir("loading");
    let fifo = dir.join("model.gguf");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let mut client = LspClient::start(&[], None).unwrap();
    client.initialize(json!({"model": {"path": fifo}})).unwrap();
    client
        .wait_for("spark/statusChanged", Duration::from_secs(10), |message| message["params"]["state"] == "loading")
        .unwrap();
    let (text, at) = fixture();
    open(&mut client, &text);
    let started = Instant::now();
    let response = client
        .request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": URI}, "position": end_position(&text[..at]), "context": {"triggerKind": 2}}),
            Duration::from_secs(10),
        )
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(inline_items(&response), Vec::<Value>::new(), "{response}");
    // Not a timing assertion on speed: a loading server must not wait for the model at all.
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
    // Unblock the model thread with bytes that are not GGUF: a clear failure, and the server stays up.
    std::fs::write(&fifo, b"not a model").unwrap();
    let failed = client
        .wait_for("spark/statusChanged", Duration::from_secs(10), |message| message["params"]["state"] == "failed")
        .unwrap();
    assert!(failed["params"]["message"].as_str().unwrap().contains("not a GGUF"), "{failed}");
    let shown = client.wait_for("window/showMessage", Duration::from_secs(10), |_| true).unwrap();
    assert!(shown["params"]["message"].as_str().unwrap().contains("not a GGUF"), "{shown}");
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn a_missing_model_is_reported_and_fixing_the_setting_loads_it_without_a_restart() {
    let mut client = LspClient::start(&[], None).unwrap();
    client.initialize(json!({"model": {"path": "/nonexistent/spark/model.gguf"}})).unwrap();
    let shown = client.wait_for("window/showMessage", Duration::from_secs(10), |_| true).unwrap();
    assert!(shown["params"]["message"].as_str().unwrap().contains("/nonexistent/spark/model.gguf"), "{shown}");
    let (text, at) = fixture();
    open(&mut client, &text);
    let response = client
        .request(
            "textDocument/completion",
            json!({"textDocument": {"uri": URI}, "position": end_position(&text[..at])}),
            Duration::from_secs(10),
        )
        .unwrap();
    assert_eq!(response["result"]["items"], json!([]), "served empty without a model: {response}");
    client.seen.clear();
    client
        .notify("workspace/didChangeConfiguration", json!({"settings": {"spark": {"inline": {"deadlineMs": 20000}}}}))
        .unwrap();
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn utf8_is_negotiated_when_offered() {
    let mut client = LspClient::start(&[], None).unwrap();
    let params = json!({"processId": null, "rootUri": null, "capabilities": {"general": {"positionEncodings": ["utf-8", "utf-16"]}}});
    let response = client.request("initialize", params, Duration::from_secs(10)).unwrap();
    assert_eq!(response["result"]["capabilities"]["positionEncoding"], "utf-8");
    client.notify("initialized", json!({})).unwrap();
    client.shutdown(Duration::from_secs(20)).unwrap();
}
