//! Code actions over stdio against the real binary and model: listed cheaply, computed on resolve or as a
//! command, and every edit Spark offers verifies (it applies to its version and parses cleanly).

use std::time::Duration;

use serde_json::{json, Value};
use spark_tests::LspClient;

const URI: &str = "file:///work/demo/src/total.rs";
const BROKEN: &str =
    "pub fn total(prices: &[u32], count: u32) -> u32 {\n    let sum: u32 = prices.iter().sum()\n    sum * count\n}\n";

fn start(resolve: bool) -> LspClient {
    let mut client = LspClient::start(&[], None).unwrap();
    let code_action = if resolve {
        json!({"resolveSupport": {"properties": ["edit"]}, "dataSupport": true, "isPreferredSupport": true})
    } else {
        json!({})
    };
    let params = json!({
        "processId": null, "rootUri": null,
        "capabilities": {"textDocument": {"codeAction": code_action}, "workspace": {"applyEdit": true}},
    });
    let response = client.request("initialize", params, Duration::from_secs(10)).unwrap();
    let capabilities = &response["result"]["capabilities"];
    assert_eq!(capabilities["codeActionProvider"]["resolveProvider"], true, "{response}");
    assert_eq!(
        capabilities["executeCommandProvider"]["commands"],
        json!(["spark.fix", "spark.generateTests", "spark.generateRegex"])
    );
    client.notify("initialized", json!({})).unwrap();
    client.wait_model_ready(Duration::from_secs(120)).unwrap();
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 7, "text": BROKEN}}),
        )
        .unwrap();
    client
}

/// The guarantee: an offered edit targets the version it was computed for and leaves a file that parses.
fn assert_verified_edit(edit: &Value) -> String {
    let changes = edit["documentChanges"].as_array().expect("versioned document changes");
    let change = changes.iter().find(|change| change["textDocument"]["uri"] == URI).expect("an edit of the document");
    assert_eq!(change["textDocument"]["version"], 7, "the edit names the version it was computed for");
    let fixed = spark_tests::apply_edits(BROKEN, change["edits"].as_array().unwrap());
    let mut parser = tree_sitter_parser();
    let tree = parser.parse(&fixed, None).unwrap();
    assert!(!tree.root_node().has_error(), "the fixed file parses cleanly:\n{fixed}");
    fixed
}

fn tree_sitter_parser() -> spark_grammars::tree_sitter::Parser {
    spark_grammars::Lang::Rust.parser()
}

#[test]
fn spark_fix_is_listed_cheaply_and_resolves_to_a_verified_edit() {
    let mut client = start(true);
    // Spark's own syntax diagnostics make the fix easy to find.
    let published = client
        .wait_for("textDocument/publishDiagnostics", Duration::from_secs(20), |message| {
            message["params"]["uri"] == URI && !message["params"]["diagnostics"].as_array().unwrap().is_empty()
        })
        .unwrap();
    let diagnostic = published["params"]["diagnostics"][0].clone();
    assert_eq!(diagnostic["source"], "spark");
    let params = json!({
        "textDocument": {"uri": URI},
        "range": diagnostic["range"],
        "context": {"diagnostics": [diagnostic]},
    });
    let listed = client.request("textDocument/codeAction", params, Duration::from_secs(10)).unwrap();
    let actions = listed["result"].as_array().cloned().unwrap_or_default();
    let fix =
        actions.iter().find(|action| action["title"].as_str().unwrap().starts_with("Spark fix")).expect("a Spark fix");
    assert_eq!(fix["kind"], "quickfix");
    assert_eq!(fix["isPreferred"], true);
    assert!(fix.get("edit").is_none(), "listing computes nothing: {fix}");

    let resolved = client.request("codeAction/resolve", fix.clone(), Duration::from_secs(120)).unwrap();
    let fixed = assert_verified_edit(&resolved["result"]["edit"]);
    assert!(fixed.contains("prices.iter().sum();"), "{fixed}");
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn commands_apply_through_workspace_apply_edit() {
    let mut client = start(false);
    let listed = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": {"start": {"line": 1, "character": 40}, "end": {"line": 1, "character": 40}}, "context": {"diagnostics": []}}),
            Duration::from_secs(10),
        )
        .unwrap();
    let actions = listed["result"].as_array().cloned().unwrap_or_default();
    let fix =
        actions.iter().find(|action| action["title"].as_str().unwrap().starts_with("Spark fix")).expect("a Spark fix");
    // Without resolve support the action carries the command; the model runs only when it is chosen.
    let command = fix["command"].clone();
    assert_eq!(command["command"], "spark.fix");
    let result = client
        .request(
            "workspace/executeCommand",
            json!({"command": command["command"], "arguments": command["arguments"]}),
            Duration::from_secs(120),
        )
        .unwrap();
    assert_eq!(result["result"]["applied"], true, "{result}");
    let apply = client.wait_for("workspace/applyEdit", Duration::from_secs(5), |_| true).unwrap();
    assert_verified_edit(&apply["params"]["edit"]);

    // Generate tests: the guarantee holds whatever the small model writes — a verified edit or a plain message.
    let tests = client
        .request(
            "workspace/executeCommand",
            json!({"command": "spark.generateTests", "arguments": [{"uri": URI, "range": {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 4}}}]}),
            Duration::from_secs(120),
        )
        .unwrap();
    if tests["result"]["applied"] == true {
        let edits: Vec<&Value> =
            client.seen.iter().filter(|message| message["method"] == "workspace/applyEdit").collect();
        let edit = &edits.last().unwrap()["params"]["edit"];
        let text = edit.to_string();
        assert!(text.contains("#[test]") && text.contains("total("), "{text}");
    } else {
        let reason = tests["result"]["reason"].as_str().unwrap_or_else(|| panic!("{tests}"));
        assert!(reason.starts_with("Spark found no verified tests"), "{tests}");
    }
    client.shutdown(Duration::from_secs(20)).unwrap();
}

#[test]
fn a_stale_action_is_refused_not_applied() {
    let mut client = start(true);
    let listed = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": {"start": {"line": 1, "character": 40}, "end": {"line": 1, "character": 40}}, "context": {"diagnostics": []}}),
            Duration::from_secs(10),
        )
        .unwrap();
    let fix = listed["result"][0].clone();
    // The user types before choosing the action: the action was listed for version 7.
    client
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": 8}, "contentChanges": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "// note\n"}]}),
        )
        .unwrap();
    let resolved = client.request("codeAction/resolve", fix, Duration::from_secs(60)).unwrap();
    assert!(resolved["result"].get("edit").is_none(), "{resolved}");
    let shown = client.wait_for("window/showMessage", Duration::from_secs(10), |_| true).unwrap();
    assert!(shown["params"]["message"].as_str().unwrap().contains("changed"), "{shown}");
    client.shutdown(Duration::from_secs(20)).unwrap();
}
