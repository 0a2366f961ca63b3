//! The latency engine seen from an editor, against the real binary and the real default model: cancellation
//! stops generation, a shown suggestion's accepted state is prefetched, other files reach the prompt's front
//! and excluded files never do. Asserted through the engine's counters (`spark/recentCalls`), never timings.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_tests::{end_position, scratch_dir, workspace_root, LspClient};

const URI: &str = "file:///work/demo/src/inventory.rs";

fn fixture() -> (String, usize) {
    let text = std::fs::read_to_string(workspace_root().join("tests/fixtures/inventory.rs")).unwrap();
    let cursor = text.find("$0").unwrap();
    (text.replace("$0", ""), cursor)
}

fn open(client: &mut LspClient, uri: &str, text: &str) {
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}}),
        )
        .unwrap();
}

fn insert(client: &mut LspClient, uri: &str, text: &mut String, at: &mut usize, inserted: &str, version: i64) {
    let position = end_position(&text[..*at]);
    client
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version},
                   "contentChanges": [{"range": {"start": position, "end": position}, "text": inserted}]}),
        )
        .unwrap();
    text.insert_str(*at, inserted);
    *at += inserted.len();
}

fn inline_params(uri: &str, text: &str, at: usize) -> Value {
    json!({"textDocument": {"uri": uri}, "position": end_position(&text[..at]), "context": {"triggerKind": 2}})
}

fn recent_calls(client: &mut LspClient) -> Vec<Value> {
    let calls = client.request("spark/recentCalls", Value::Null, Duration::from_secs(10)).unwrap();
    calls["result"].as_array().cloned().unwrap_or_default()
}

fn interactive(calls: &[Value]) -> Vec<&Value> {
    calls.iter().filter(|call| call["background"] == false).collect()
}

fn counter(client: &mut LspClient, name: &str) -> u64 {
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10)).unwrap();
    status["result"]["counters"][name].as_u64().unwrap()
}

/// Waits until the warm-up that opening a document starts has finished (or was cancelled).
fn wait_warm_up(client: &mut LspClient) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if recent_calls(client).iter().any(|call| call["background"] == true) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the warm-up never ran");
}

/// Waits until the prefetch after a shown suggestion has run: the background call after the last interactive one.
fn wait_prefetch(client: &mut LspClient) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let calls = recent_calls(client);
        // Calls are in order: warm-ups, the shown suggestion's call, then the prefetch.
        let shown = calls.iter().rposition(|call| call["background"] == false);
        if let Some(prefetch) = shown.and_then(|shown| calls[shown..].iter().find(|call| call["background"] == true)) {
            return prefetch.clone();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no prefetch ran after a shown suggestion");
}

#[test]
fn a_superseded_request_is_answered_and_its_generation_stops() {
    let mut client = LspClient::start(&[], None).unwrap();
    // A long deadline and room for a long block at the end of the file: left alone, this request would go on
    // generating for seconds.
    let options = json!({"inline": {"deadlineMs": 120000, "maxTokens": 256, "maxLines": 64, "prefetch": false}});
    client.initialize(options).unwrap();
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    let (text, _) = fixture();
    let mut text = format!("{}\n\n", text.trim_end());
    let mut at = text.len();
    open(&mut client, URI, &text);
    wait_warm_up(&mut client);

    let first = client.send_request("textDocument/inlineCompletion", inline_params(URI, &text, at)).unwrap();
    // Let the model start on it, then type: the edit and the newer request supersede it.
    std::thread::sleep(Duration::from_millis(400));
    insert(&mut client, URI, &mut text, &mut at, "f", 2);
    let second = client.send_request("textDocument/inlineCompletion", inline_params(URI, &text, at)).unwrap();
    let first = client.wait_response(first, Duration::from_secs(60)).unwrap();
    assert_eq!(first["result"]["items"], json!([]), "a superseded request is answered, empty: {first}");
    let second = client.wait_response(second, Duration::from_secs(180)).unwrap();
    assert!(second.get("result").is_some(), "{second}");

    let calls = recent_calls(&mut client);
    let calls = interactive(&calls);
    assert!(!calls.is_empty(), "no model call recorded");
    let stopped = calls[0];
    assert_eq!(stopped["stop"], "Cancelled", "{stopped}");
    assert!(stopped["nGenerated"].as_u64().unwrap() < 256, "generation went on after the cancel: {stopped}");
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn a_shown_suggestion_is_prefetched_in_its_accepted_state() {
    let mut client = LspClient::start(&[], None).unwrap();
    // Every checked suggestion is shown: the prefetch of a shown one is the subject, not the model's confidence.
    client.initialize(json!({"inline": {"deadlineMs": 120000, "minConfidence": 0.0}})).unwrap();
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    let (mut text, mut at) = fixture();
    open(&mut client, URI, &text);
    let mut version = 1;
    for ch in "let stock = self.items".chars() {
        version += 1;
        insert(&mut client, URI, &mut text, &mut at, &ch.to_string(), version);
    }
    let response = client
        .request("textDocument/inlineCompletion", inline_params(URI, &text, at), Duration::from_secs(180))
        .unwrap();
    let shown = response["result"]["items"][0]["insertText"].as_str().expect("a suggestion").to_owned();
    let prefetch = wait_prefetch(&mut client);
    assert_ne!(prefetch["stop"], "Cancelled", "nothing cancelled the prefetch: {prefetch}");
    assert!(prefetch["nReused"].as_u64().unwrap() > 0, "the prefetch reuses the shown request's prompt: {prefetch}");

    // Accepting the suggestion (the client inserts it and asks at the new cursor). Model calls are counted for
    // requests someone waits for: the suggestion served from the cache is shown, so the state after accepting it is
    // prefetched in its turn, a background call that may run before the count is read.
    let interactive_calls = |client: &mut LspClient| interactive(&recent_calls(client)).len();
    let model_calls = interactive_calls(&mut client);
    let hits = counter(&mut client, "cacheHits");
    version += 1;
    insert(&mut client, URI, &mut text, &mut at, &shown, version);
    let response = client
        .request("textDocument/inlineCompletion", inline_params(URI, &text, at), Duration::from_secs(180))
        .unwrap();
    if prefetch["producedBytes"].as_u64().unwrap() > 0 {
        // The prefetch had an answer: it is served without a model call.
        assert_eq!(counter(&mut client, "cacheHits"), hits + 1, "{response}");
        assert_eq!(interactive_calls(&mut client), model_calls, "no model call after accepting");
    } else {
        // The model had nothing for the accepted state: the request goes to the model as any other.
        assert_eq!(interactive_calls(&mut client), model_calls + 1, "{response}");
    }
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn a_suggestion_cut_by_the_deadline_is_finished_and_the_client_is_told() {
    let mut client = LspClient::start(&[], None).unwrap();
    // A deadline too short for any prompt: the request is answered empty while its prompt is still cold. With
    // `notifyReady` the server finishes it in the background and says when asking again is worth it.
    let options = json!({"inline": {"deadlineMs": 1, "prefetch": false, "minConfidence": 0.0, "notifyReady": true}});
    client.initialize(options).unwrap();
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    let (text, at) = fixture();
    open(&mut client, URI, &text);
    let response = client
        .request("textDocument/inlineCompletion", inline_params(URI, &text, at), Duration::from_secs(180))
        .unwrap();
    assert_eq!(response["result"]["items"], json!([]), "{response}");
    let ready = client
        .wait_for("spark/inlineCompletionReady", Duration::from_secs(120), |message| {
            message["params"]["textDocument"]["uri"] == URI
        })
        .unwrap();
    assert_eq!(ready["params"]["textDocument"]["version"], 1, "{ready}");
    assert_eq!(ready["params"]["position"], end_position(&text[..at]), "{ready}");
    let calls = recent_calls(&mut client);
    let cut = interactive(&calls).last().copied().cloned().expect("the request's model call");
    assert_eq!(cut["stop"], "Deadline", "{cut}");
    let finished = calls.iter().rfind(|call| call["background"] == true).expect("the background call").clone();
    assert_ne!(finished["stop"], "Deadline", "the background call finished: {finished}");
    assert!(finished["producedBytes"].as_u64().unwrap() > 0, "it generated the suggestion: {finished}");
    assert_eq!(finished["nPrompt"], cut["nPrompt"], "the same prompt: {finished} vs {cut}");

    // Asked again at the same place (the editor does so on the notification): served from the cache at once.
    let hits_before = counter(&mut client, "cacheHits");
    let again = client
        .request("textDocument/inlineCompletion", inline_params(URI, &text, at), Duration::from_secs(30))
        .unwrap();
    let items = again["result"]["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{again}");
    assert!(!items[0]["insertText"].as_str().unwrap_or("").is_empty(), "{again}");
    assert_eq!(counter(&mut client, "cacheHits"), hits_before + 1, "served without the model");

    // Typed on before the background work finished: no notification for the old place.
    let (mut text, mut at) = (text, at);
    insert(&mut client, URI, &mut text, &mut at, "\n    ", 2);
    let response = client
        .request("textDocument/inlineCompletion", inline_params(URI, &text, at), Duration::from_secs(60))
        .unwrap();
    assert!(response["result"].is_object(), "{response}");
    insert(&mut client, URI, &mut text, &mut at, "l", 3);
    let stale = client.wait_for("spark/inlineCompletionReady", Duration::from_secs(15), |message| {
        message["params"]["textDocument"]["version"] == 2
    });
    assert!(stale.is_err(), "a suggestion for a version the user typed past was announced: {stale:?}");
    client.shutdown(Duration::from_secs(20)).unwrap();
}

/// The prompt size of the first ghost-text request in the fixture after `other_uri` was opened.
fn prompt_tokens_with(other_uri: &str, options: Value) -> u64 {
    let log = scratch_dir("ring").join("server.log");
    let mut client = LspClient::start(&[("SPARK_LOG", "info,spark_engine=debug,spark_lsp=debug")], Some(&log)).unwrap();
    client.initialize(options).unwrap();
    client.wait_model_ready(Duration::from_secs(180)).unwrap();
    let other = "pub fn distinctive_helper_from_another_file(value: u64) -> u64 {\n    value * 31 + 7\n}\n";
    open(&mut client, other_uri, other);
    let (text, at) = fixture();
    open(&mut client, URI, &text);
    let response = client
        .request("textDocument/inlineCompletion", inline_params(URI, &text, at), Duration::from_secs(180))
        .unwrap();
    let calls = recent_calls(&mut client);
    client.shutdown(Duration::from_secs(20)).unwrap();
    let Some(first) = interactive(&calls).first().copied().cloned() else {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("no model call for {response}; calls {calls:?}; server log:\n{log}");
    };
    first["nPrompt"].as_u64().unwrap()
}

#[test]
fn other_files_reach_the_prompt_front_and_excluded_files_never_do() {
    // Other files' chunks on (the default for small models), whatever the model.
    let base = json!({"inline": {"deadlineMs": 120000, "prefetch": false}, "context": {"otherFilesBytes": 1024}});
    let with = |context: Value| {
        let mut options = base.clone();
        for (key, value) in context.as_object().expect("context settings") {
            options["context"][key] = value.clone();
        }
        options
    };
    let without_ring = prompt_tokens_with("file:///work/demo/src/helpers.rs", with(json!({"otherFilesBytes": 0})));
    let with_ring = prompt_tokens_with("file:///work/demo/src/helpers.rs", base.clone());
    assert!(with_ring > without_ring + 10, "the other file's chunk is in the prompt: {with_ring} vs {without_ring}");
    let secret = prompt_tokens_with("file:///work/demo/.env", base.clone());
    assert_eq!(secret, without_ring, "a secret-looking file never reaches the prompt");
    let ignored =
        prompt_tokens_with("file:///work/demo/private/helpers.rs", with(json!({"ignore": ["**/private/**"]})));
    assert_eq!(ignored, without_ring, "a file on the ignore list never reaches the prompt");
}
