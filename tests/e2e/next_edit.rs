//! Next-edit suggestions over stdio against the real binary: a rename typed key by key predicts the name's other
//! uses (the request, the notification after a pause, the code actions, the ranged inline item), an argument
//! added at one call predicts the other calls, positions in UTF-16, and nothing for an excluded file.

use std::time::Duration;

use serde_json::{json, Value};
use spark_tests::LspClient;

const WAIT: Duration = Duration::from_secs(20);

const RUST: &str = "fn score(items: &[u32]) -> u32 {\n    let count = items.len() as u32;\n    let bonus = count * 2;\n    // the count of items\n    count + bonus + count\n}\n\nfn other(count: u32) -> u32 {\n    count\n}\n";

fn start(options: Value) -> LspClient {
    let mut client = LspClient::start(&[], None).unwrap();
    client.initialize(options).unwrap();
    client
}

fn open(client: &mut LspClient, uri: &str, language: &str, text: &str) {
    let document = json!({"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}});
    client.notify("textDocument/didOpen", document).unwrap();
}

fn position(line: u32, character: u32) -> Value {
    json!({"line": line, "character": character})
}

/// Types `new` over the text from `at` to `end`, as an editor sends it: the selection replaced by the first
/// character, then one change per character. Returns the version reached.
fn type_over(client: &mut LspClient, uri: &str, at: (u32, u32), end: (u32, u32), new: &str, version: i32) -> i32 {
    let mut version = version;
    for (i, c) in new.chars().enumerate() {
        version += 1;
        let column = at.1 + i as u32;
        let range = if i == 0 {
            json!({"start": position(at.0, at.1), "end": position(end.0, end.1)})
        } else {
            json!({"start": position(at.0, column), "end": position(at.0, column)})
        };
        let change = json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"range": range, "text": c.to_string()}]});
        client.notify("textDocument/didChange", change).unwrap();
    }
    version
}

fn next_edit(client: &mut LspClient, uri: &str, at: Option<Value>) -> Value {
    let mut params = json!({"textDocument": {"uri": uri}});
    if let Some(at) = at {
        params["position"] = at;
    }
    let response = client.request("spark/nextEdit", params, WAIT).unwrap();
    assert!(response.get("error").is_none(), "{response}");
    response["result"].clone()
}

#[test]
fn a_typed_rename_predicts_the_other_uses_in_every_form_the_editors_use() {
    let uri = "file:///work/next/src/score.rs";
    let mut client = start(json!({"nextEdit": {"notify": true, "pauseMs": 100}}));
    open(&mut client, uri, "rust", RUST);
    // The user renames the binding `count` on line 2 to `total`, key by key.
    let version = type_over(&mut client, uri, (1, 8), (1, 13), "total", 1);
    let typed = RUST.replacen("let count", "let total", 1);

    let notified =
        client.wait_for("spark/nextEditChanged", WAIT, |message| message["params"]["version"] == version).unwrap();
    let edits = notified["params"]["edits"].as_array().unwrap().clone();
    assert_eq!(edits.len(), 3, "{notified}");
    assert!(edits.iter().all(|edit| edit["source"] == "rename" && edit["label"] == "`count` → `total`"));
    let renamed = spark_tests::apply_edits(&typed, &edits);
    assert_eq!(
        renamed,
        RUST.replace("count", "total")
            .replace("the total of", "the count of")
            .replace("fn other(total: u32) -> u32 {\n    total", "fn other(count: u32) -> u32 {\n    count")
    );

    // Asked from the last use: that one first, then around from the top.
    let asked = next_edit(&mut client, uri, Some(position(4, 20)));
    assert_eq!(asked["version"], version);
    assert_eq!(asked["edits"][0]["range"]["start"], position(4, 20), "{asked}");
    assert_eq!(asked["edits"][1]["range"]["start"], position(2, 16), "{asked}");

    // The code actions: all at once at the user's edit, one at a predicted place; both versioned.
    let actions = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": {"start": position(1, 13), "end": position(1, 13)}, "context": {"diagnostics": []}}),
            WAIT,
        )
        .unwrap();
    let all = actions["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|action| action["title"].as_str().is_some_and(|title| title.starts_with("Spark next edit: apply all 3")))
        .unwrap_or_else(|| panic!("no apply-all action: {actions}"))
        .clone();
    let change = &all["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], version);
    assert_eq!(spark_tests::apply_edits(&typed, change["edits"].as_array().unwrap()), renamed);

    // The cursor on a predicted use: the inline item replaces it.
    let inline = client
        .request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": uri}, "position": position(2, 18), "context": {"triggerKind": 2}}),
            WAIT,
        )
        .unwrap();
    let item = &inline["result"]["items"][0];
    assert_eq!(item["insertText"], "total", "{inline}");
    assert_eq!(item["range"], json!({"start": position(2, 16), "end": position(2, 21)}));

    // The whole text replaced (a reload): the history is gone and the client is told there is nothing.
    let replaced = json!({"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [{"text": renamed}]});
    client.notify("textDocument/didChange", replaced).unwrap();
    let cleared =
        client.wait_for("spark/nextEditChanged", WAIT, |message| message["params"]["version"] == version + 1).unwrap();
    assert_eq!(cleared["params"]["edits"], json!([]), "{cleared}");
    client.shutdown(WAIT).unwrap();
}

#[test]
fn an_argument_added_at_one_typescript_call_predicts_the_others_in_utf16() {
    let uri = "file:///work/next/src/log.ts";
    let text = "const label = \"été\"; log(label);\nlog(\"ça\"); log(a, b);\nlog(\"x\");\n";
    let mut client = start(json!({}));
    open(&mut client, uri, "typescript", text);
    // `, ctx` typed after `label` in the first call (column 30 in UTF-16: `été` is 3 code units).
    let version = type_over(&mut client, uri, (0, 30), (0, 30), ", ctx", 1);
    let typed = text.replacen("log(label)", "log(label, ctx)", 1);
    let found = next_edit(&mut client, uri, None);
    assert_eq!(found["version"], version);
    let edits = found["edits"].as_array().unwrap();
    assert!(edits.iter().all(|edit| edit["source"] == "call"), "{found}");
    assert_eq!(
        spark_tests::apply_edits(&typed, edits),
        "const label = \"été\"; log(label, ctx);\nlog(\"ça\", ctx); log(a, b);\nlog(\"x\", ctx);\n"
    );
    // Without the notification setting nothing is pushed.
    assert!(!client.seen.iter().any(|message| message["method"] == "spark/nextEditChanged"));
    client.shutdown(WAIT).unwrap();
}

#[test]
fn an_excluded_file_or_the_feature_off_predicts_nothing_and_a_closed_one_is_an_error() {
    let mut client = start(json!({"context": {"ignore": ["**/private/**"]}}));
    let private = "file:///work/next/private/keys.rs";
    open(&mut client, private, "rust", RUST);
    let version = type_over(&mut client, private, (1, 8), (1, 13), "total", 1);
    let found = next_edit(&mut client, private, None);
    assert_eq!(found["version"], version);
    assert_eq!(found["edits"], json!([]));

    let public = "file:///work/next/src/lib.rs";
    open(&mut client, public, "rust", RUST);
    type_over(&mut client, public, (1, 8), (1, 13), "total", 1);
    assert_eq!(next_edit(&mut client, public, None)["edits"].as_array().unwrap().len(), 3);
    let off = json!({"settings": {"nextEdit": {"enabled": false}}});
    client.notify("workspace/didChangeConfiguration", off).unwrap();
    assert_eq!(next_edit(&mut client, public, None)["edits"], json!([]));

    let closed =
        client.request("spark/nextEdit", json!({"textDocument": {"uri": "file:///nowhere.rs"}}), WAIT).unwrap();
    assert!(closed["error"]["message"].as_str().is_some_and(|message| message.contains("not open")), "{closed}");
    client.shutdown(WAIT).unwrap();
}
