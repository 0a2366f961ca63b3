//! Paths through the server that other tests leave out, over stdio against the real binary: a code-action edit
//! after non-ASCII text (UTF-16 positions), TypeScript tests end to end (a new test file created, an open one
//! edited at its version), and two documents asking for ghost text at once.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};
use spark_loopback::{mock, mock_with};
use spark_tests::{scratch_dir, LspClient};

const SHORT: Duration = Duration::from_secs(20);
const MODEL: Duration = Duration::from_secs(180);

fn start(options: Value) -> LspClient {
    let mut client = LspClient::start(&[], None).unwrap();
    let params = json!({
        "processId": null, "rootUri": null,
        "capabilities": {
            "general": {"positionEncodings": ["utf-16"]},
            "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": true}},
            "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true, "resourceOperations": ["create"]}},
        },
        "initializationOptions": options,
    });
    let response = client.request("initialize", params, SHORT).unwrap();
    assert_eq!(response["result"]["capabilities"]["positionEncoding"], "utf-16", "{response}");
    client.notify("initialized", json!({})).unwrap();
    client.wait_model_ready(MODEL).unwrap();
    client
}

fn open(client: &mut LspClient, uri: &str, language_id: &str, version: i64, text: &str) {
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language_id, "version": version, "text": text}}),
        )
        .unwrap();
}

/// The statement to fix has non-ASCII text before the error (a 2-byte, a 4-byte and a 3-byte character): the
/// edit's range counts UTF-16 code units, and applied as the editor applies it, it gives exactly the fix.
#[test]
fn a_fix_after_non_ascii_text_has_utf16_positions() {
    let uri = "file:///work/demo/src/label.rs";
    let broken = "pub fn label(n: u32) -> String {\n    let s = format!(\"é😀 {n} — ok\")\n    s\n}\n";
    let mut client = start(json!({}));
    open(&mut client, uri, "rust", 3, broken);
    let line = broken.lines().nth(1).unwrap();
    let at = json!({"line": 1, "character": line.encode_utf16().count()});
    let listed = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}),
            SHORT,
        )
        .unwrap();
    let actions = listed["result"].as_array().cloned().unwrap_or_default();
    let fix = actions
        .iter()
        .find(|action| action["title"].as_str().unwrap_or("").starts_with("Spark fix"))
        .unwrap_or_else(|| panic!("a Spark fix: {listed}"));
    let resolved = client.request("codeAction/resolve", fix.clone(), MODEL).unwrap();
    let changes = resolved["result"]["edit"]["documentChanges"].as_array().cloned().unwrap_or_default();
    let [change] = changes.as_slice() else { panic!("one document change: {resolved}") };
    assert_eq!(change["textDocument"]["version"], 3);
    let fixed = spark_tests::apply_edits(broken, change["edits"].as_array().unwrap());
    assert_eq!(fixed, broken.replace("ok\")\n", "ok\");\n"), "{change}");
    client.shutdown(SHORT).unwrap();
}

/// TypeScript end to end: generate tests for a function in `math.ts`. Without a test file the edit creates
/// `math.test.ts` (CreateFile, then its text); with the test file open and unsaved, the edit goes into that
/// buffer at its version. The "model" is a loopback endpoint on the tests route, so what it writes is known.
#[test]
fn typescript_tests_create_the_test_file_or_edit_the_open_one_at_its_version() {
    let remote = mock("  assert.equal(add(2, 3), 5);");
    let dir = scratch_dir("ts-tests");
    let source_path = dir.join("math.ts");
    let test_path = dir.join("math.test.ts");
    let source = "export function add(a: number, b: number): number {\n  return a + b;\n}\n";
    std::fs::write(&source_path, source).unwrap();
    let uri = format!("file://{}", source_path.display());
    let test_uri = format!("file://{}", test_path.display());
    let mut client = start(json!({"remote": {"url": remote.url, "tests": "remote"}}));
    open(&mut client, &uri, "typescript", 1, source);
    let at = json!({"line": 1, "character": 4});
    let run = |client: &mut LspClient| {
        let arguments = json!([{"uri": uri, "range": {"start": at, "end": at}}]);
        let result = client
            .request(
                "workspace/executeCommand",
                json!({"command": "spark.generateTests", "arguments": arguments}),
                MODEL,
            )
            .unwrap();
        assert_eq!(result["result"]["applied"], true, "{result}");
        let edits: Vec<&Value> =
            client.seen.iter().filter(|message| message["method"] == "workspace/applyEdit").collect();
        edits.last().unwrap()["params"]["edit"]["documentChanges"].as_array().cloned().unwrap()
    };

    let created = run(&mut client);
    assert_eq!(created.len(), 2, "{created:?}");
    assert_eq!(created[0]["kind"], "create");
    assert_eq!(created[0]["uri"], test_uri.as_str());
    assert_eq!(created[1]["textDocument"]["uri"], test_uri.as_str());
    let new_file = spark_tests::apply_edits("", created[1]["edits"].as_array().unwrap());
    assert!(new_file.contains("import { add } from \"./math\";"), "{new_file}");
    assert!(new_file.contains("test(\"add works\", () => {\n  assert.equal(add(2, 3), 5);\n});"), "{new_file}");
    let parsed = spark_grammars::Lang::TypeScript.parser().parse(&new_file, None).unwrap();
    assert!(!parsed.root_node().has_error(), "{new_file}");

    // The test file open in the editor with unsaved text (not on disk): the edit goes there, at its version.
    let unsaved = "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\n// unsaved\n";
    open(&mut client, &test_uri, "typescript", 12, unsaved);
    let edited = run(&mut client);
    let [edit] = edited.as_slice() else { panic!("one edit, no create: {edited:?}") };
    assert_eq!(edit["textDocument"]["uri"], test_uri.as_str());
    assert_eq!(edit["textDocument"]["version"], 12, "the open buffer's version");
    let after = spark_tests::apply_edits(unsaved, edit["edits"].as_array().unwrap());
    assert!(after.starts_with(unsaved), "appended to the buffer's text: {after}");
    assert!(after.contains("assert.equal(add(2, 3), 5);"), "{after}");
    assert!(remote.completions.load(Ordering::SeqCst) >= 2);
    client.shutdown(SHORT).unwrap();
}

/// Two documents ask for ghost text at once (the endpoint holds each answer 300 ms, so both are in flight
/// together): each gets the answer computed for its own text, neither cancels the other.
#[test]
fn two_documents_asking_at_once_each_get_their_own_answer() {
    let remote = mock_with(
        |body| {
            let prompt: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let prompt = prompt["prompt"].as_str().unwrap_or("").to_owned();
            let name = prompt.rsplit("let ").next().and_then(|rest| rest.split(' ').next()).unwrap_or("none");
            format!("{name}_value();")
        },
        Duration::from_millis(300),
    );
    let mut client = start(json!({"remote": {"url": remote.url}, "inline": {"route": "remote", "deadlineMs": 60000}}));
    let documents = [("file:///work/demo/src/alpha.rs", "alpha"), ("file:///work/demo/src/beta.rs", "beta")];
    for (uri, name) in documents {
        open(&mut client, uri, "rust", 1, &format!("fn main() {{\n    let {name} = \n}}\n"));
    }
    let position = |name: &str| json!({"line": 1, "character": format!("    let {name} = ").len()});
    let ids: Vec<i64> = documents
        .iter()
        .map(|(uri, name)| {
            client
                .send_request(
                    "textDocument/inlineCompletion",
                    json!({"textDocument": {"uri": uri}, "position": position(name), "context": {"triggerKind": 1}}),
                )
                .unwrap()
        })
        .collect();
    // Both answers, in whatever order they come.
    let deadline = std::time::Instant::now() + MODEL;
    let mut responses: Vec<Value> = Vec::new();
    while responses.len() < ids.len() && std::time::Instant::now() < deadline {
        let step = std::time::Instant::now() + Duration::from_millis(200);
        responses.extend(client.receive_until(step).unwrap().into_iter().map(|(_, response)| response));
    }
    for (id, (_, name)) in ids.into_iter().zip(documents) {
        let response =
            responses.iter().find(|response| response["id"] == id).unwrap_or_else(|| panic!("{responses:?}"));
        let items = response["result"]["items"].as_array().cloned().unwrap_or_default();
        let texts: Vec<&str> = items.iter().map(|item| item["insertText"].as_str().unwrap_or("")).collect();
        assert_eq!(texts, vec![format!("{name}_value();")], "{response}");
    }
    assert_eq!(remote.completions.load(Ordering::SeqCst), 2);
    client.shutdown(SHORT).unwrap();
}
