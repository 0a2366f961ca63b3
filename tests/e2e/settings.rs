//! Settings changed at run time (`workspace/didChangeConfiguration`) over stdio against the real binary: the
//! remote endpoint and the ghost-text route, the languages with ghost text, partial and invalid settings. A
//! loopback endpoint is the probe: what reaches it says where ghost text went.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};
use spark_loopback::{mock, Mock};
use spark_tests::LspClient;

const SHORT: Duration = Duration::from_secs(20);
const MODEL: Duration = Duration::from_secs(180);
const RUST: &str = "file:///work/demo/src/main.rs";
const TS: &str = "file:///work/demo/src/main.ts";

fn configure(client: &mut LspClient, settings: Value) {
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"spark": settings}})).unwrap();
}

fn status(client: &mut LspClient) -> Value {
    client.request("spark/status", Value::Null, SHORT).unwrap()["result"].clone()
}

/// Ghost text at the end of line 1 (`    let x = `) of either document; the inserted texts.
fn ghost_text(client: &mut LspClient, uri: &str) -> Vec<String> {
    let response = client
        .request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 12},
                   "context": {"triggerKind": 1}}),
            MODEL,
        )
        .unwrap();
    response["result"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{response}"))
        .iter()
        .map(|item| item["insertText"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn reached(remote: &Mock) -> usize {
    remote.completions.load(Ordering::SeqCst)
}

#[test]
fn remote_route_languages_and_partial_settings_apply_at_run_time() {
    let remote = mock("42;");
    let mut client = LspClient::start(&[], None).unwrap();
    client.initialize(json!({"inline": {"deadlineMs": 60000, "prefetch": false}})).unwrap();
    client.wait_model_ready(MODEL).unwrap();
    assert_eq!(status(&mut client)["remote"]["configured"], false);
    for (uri, language_id, text) in
        [(RUST, "rust", "fn main() {\n    let x = \n}\n"), (TS, "typescript", "function main() {\n    let x = \n}\n")]
    {
        client
            .notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}}),
            )
            .unwrap();
    }

    // A remote and the remote route: ghost text goes there, and its answer is shown.
    configure(&mut client, json!({"remote": {"url": remote.url}, "inline": {"route": "remote", "deadlineMs": 60000}}));
    let remote_status = status(&mut client)["remote"].clone();
    assert_eq!(remote_status["configured"], true, "{remote_status}");
    assert_eq!(remote_status["url"], remote.url.as_str());
    assert_eq!(ghost_text(&mut client, RUST), vec!["42;".to_owned()]);
    assert_eq!(reached(&remote), 1);

    // Invalid settings are refused with a message and change nothing.
    configure(&mut client, json!({"inline": {"route": "sideways"}}));
    client
        .wait_for("window/showMessage", SHORT, |message| {
            message["params"]["message"].as_str().unwrap_or("").contains("settings unchanged")
        })
        .unwrap();
    assert_eq!(status(&mut client)["remote"]["configured"], true);
    assert_eq!(ghost_text(&mut client, TS), vec!["42;".to_owned()]);
    assert_eq!(reached(&remote), 2);

    // Ghost text for TypeScript only: the Rust document gets none and nothing is sent for it.
    configure(
        &mut client,
        json!({"remote": {"url": remote.url}, "inline": {"route": "remote", "languages": ["typescript"], "deadlineMs": 60000}}),
    );
    assert!(ghost_text(&mut client, RUST).is_empty());
    assert_eq!(reached(&remote), 2, "no request for a language without ghost text");
    assert_eq!(ghost_text(&mut client, TS), vec!["42;".to_owned()], "answered again (from the cache)");
    let sent = reached(&remote);

    // Partial settings: what is not given takes its default. The remote stays configured for tasks, and ghost
    // text is local again (the default route): nothing more reaches the endpoint.
    configure(&mut client, json!({"remote": {"url": remote.url}, "inline": {"deadlineMs": 60000}}));
    assert_eq!(status(&mut client)["remote"]["configured"], true);
    ghost_text(&mut client, RUST);
    ghost_text(&mut client, TS);
    assert_eq!(reached(&remote), sent, "ghost text stays local on the default route");

    // No remote at all.
    configure(&mut client, json!({}));
    assert_eq!(status(&mut client)["remote"]["configured"], false);
    assert_eq!(status(&mut client)["state"], "ready", "the model was not reloaded away");
    client.shutdown(SHORT).unwrap();
}
