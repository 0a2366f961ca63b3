//! Hardening over stdio against the real binary: bad input and model faults each get an LSP error or a logged
//! warning, and the server keeps answering the next valid request; secrets never reach logs or responses; the
//! server never runs commands or writes files. Each test prints a table of what it tried and what happened.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_tests::{end_position, scratch_dir, server_binary, workspace_root, LspClient};

const SHORT: Duration = Duration::from_secs(20);
const MODEL_TIMEOUT: Duration = Duration::from_secs(180);
const BROKEN: &str =
    "pub fn total(prices: &[u32], count: u32) -> u32 {\n    let sum: u32 = prices.iter().sum()\n    sum * count\n}\n";

fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(body);
    framed
}

/// The default model where the server looks for it (`SPARK_MODEL_DIR`, `XDG_DATA_HOME`, then the home directory).
fn default_model() -> PathBuf {
    spark_engine::default_model_path().expect("HOME, XDG_DATA_HOME or SPARK_MODEL_DIR is set")
}

/// The log so far, and whether it has gained `needle` since `from` bytes.
fn log_gained(log: &Path, from: usize, needle: &str) -> (usize, bool) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let found = text.get(from..).is_some_and(|new| new.contains(needle));
    (text.len(), found)
}

/// A valid request that must be answered correctly after every fault: `spark/status`.
fn probe(client: &mut LspClient) -> Duration {
    let started = Instant::now();
    let response = client.request("spark/status", Value::Null, SHORT).expect("the server answers spark/status");
    assert!(response["result"]["state"].is_string(), "{response}");
    started.elapsed()
}

struct Table(Vec<[String; 3]>);

impl Table {
    fn row(&mut self, input: &str, outcome: impl Into<String>, took: Duration) {
        self.0.push([input.to_owned(), outcome.into(), format!("{} ms", took.as_millis())]);
    }

    fn print(&self, title: &str) {
        println!("\n{title}\n| input | outcome | next request answered in |\n|---|---|---|");
        for [input, outcome, took] in &self.0 {
            println!("| {input} | {outcome} | {took} |");
        }
    }
}

#[test]
fn protocol_faults_get_an_error_or_a_warning_and_the_server_answers_the_next_request() {
    let log = scratch_dir("hardening-protocol").join("server.log");
    let mut client = LspClient::start(&[("SPARK_LOG", "info")], Some(&log)).unwrap();
    let mut table = Table(Vec::new());

    // Before initialize: requests get ServerNotInitialized; notifications are dropped (LSP says so).
    for method in ["spark/status", "textDocument/completion"] {
        let started = Instant::now();
        let response = client.request(method, json!({}), SHORT).unwrap();
        assert_eq!(response["error"]["code"], -32002, "{method} before initialize: {response}");
        table.row(&format!("`{method}` before initialize"), "error -32002 ServerNotInitialized", started.elapsed());
    }
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": "file:///early.rs", "languageId": "rust", "version": 1, "text": "x"}}),
        )
        .unwrap();
    client.initialize(json!({"model": {"path": "/nonexistent/spark/hardening.gguf"}})).unwrap();
    let took = probe(&mut client);
    table.row("`didOpen` before initialize", "dropped (LSP: notifications before initialize are ignored)", took);

    let status = |id: i64| frame(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"spark/status"}}"#).as_bytes());
    // (input, bytes, what the log gains)
    let framing_faults: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed JSON", frame(b"{not json}"), "malformed message dropped"),
        ("Content-Length too short", {
            let body = br#"{"jsonrpc":"2.0","id":900,"method":"spark/status"}"#;
            [format!("Content-Length: {}\r\n\r\n", body.len() - 7).into_bytes(), body.to_vec()].concat()
        }, "malformed message dropped"),
        ("Content-Length not a number", b"Content-Length: twelve\r\n\r\n{}".to_vec(), "is not a number"),
        ("no Content-Length header", b"Content-Type: application/json\r\n\r\n{}\r\n\r\n".to_vec(), "without Content-Length"),
        ("body not UTF-8", frame(b"\xff\xfe{\"jsonrpc\":\"2.0\"}"), "not valid UTF-8"),
        ("JSON nested 100k deep", frame(format!(r#"{{"jsonrpc":"2.0","method":"x","params":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000)).as_bytes()), "recursion limit"),
        ("not JSON-RPC 2.0", frame(br#"{"jsonrpc":"1.0","id":901,"method":"spark/status"}"#), "not a JSON-RPC 2.0"),
        ("lone UTF-16 surrogate in didOpen text", frame(br#"{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///s.rs","languageId":"rust","version":1,"text":"fn a() {}\n// \ud800 end"}}}"#), "lone UTF-16 surrogate"),
    ];
    let mut log_len = 0;
    for (input, bytes, warning) in framing_faults {
        client.send_raw(&bytes).unwrap();
        let took = probe(&mut client);
        let (len, found) = log_gained(&log, log_len, warning);
        assert!(found, "{input}: the log lacks {warning:?}:\n{}", std::fs::read_to_string(&log).unwrap());
        log_len = len;
        table.row(input, format!("logged warning ({warning}); frame dropped or repaired"), took);
    }

    // A Content-Length that is too long swallows the start of the next message: that one is lost, the one
    // after it is answered.
    let body = br#"{"jsonrpc":"2.0","id":902,"method":"spark/status"}"#;
    client
        .send_raw(&[format!("Content-Length: {}\r\n\r\n", body.len() + 30).into_bytes(), body.to_vec()].concat())
        .unwrap();
    client.send_raw(&status(903)).unwrap();
    let took = probe(&mut client);
    table.row("Content-Length too long", "logged warning; the next message is lost with it, later ones answered", took);

    // (input, method, params, error code)
    let request_faults = [
        ("unknown request method", "spark/noSuchMethod", json!({}), -32601),
        ("wrong params type", "textDocument/completion", json!({"textDocument": "not an object"}), -32602),
        ("missing params", "textDocument/inlineCompletion", Value::Null, -32602),
        ("codeAction/resolve of garbage", "codeAction/resolve", json!({"title": 5}), -32602),
    ];
    for (input, method, params, code) in request_faults {
        let started = Instant::now();
        let response = client.request(method, params, SHORT).unwrap();
        assert_eq!(response["error"]["code"], code, "{input}: {response}");
        let took = started.elapsed() + probe(&mut client);
        table.row(input, format!("error {code}"), took);
    }
    client.notify("spark/noSuchNotification", json!({})).unwrap();
    client.notify("$/setTrace", json!({"value": "verbose"})).unwrap();
    let took = probe(&mut client);
    table.row("unknown notifications", "ignored", took);

    // The repaired didOpen went through: its document is open and listed as plain text would be.
    let listed = client
        .request("textDocument/codeAction", json!({"textDocument": {"uri": "file:///s.rs"}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}), SHORT)
        .unwrap();
    assert!(listed.get("error").is_none(), "{listed}");
    table.print("Protocol faults (one server, model path missing)");
    assert!(client.shutdown(SHORT).unwrap().success());
}

/// The fixture with the typed line of the stdio test already in place, and the cursor after it.
fn inventory() -> (String, usize) {
    let text = std::fs::read_to_string(workspace_root().join("tests/fixtures/inventory.rs")).unwrap();
    let text = text.replace("$0", "let stock = self.items$0");
    let cursor = text.find("$0").unwrap();
    (text.replace("$0", ""), cursor)
}

fn open(client: &mut LspClient, uri: &str, language_id: &str, version: i64, text: &str) {
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language_id, "version": version, "text": text}}),
        )
        .unwrap();
}

fn change(client: &mut LspClient, uri: &str, version: i64, range: Value, text: &str) {
    client
        .notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"range": range, "text": text}]}))
        .unwrap();
}

fn inline(client: &mut LspClient, uri: &str, position: Value) -> Value {
    let params = json!({"textDocument": {"uri": uri}, "position": position, "context": {"triggerKind": 1}});
    let response = client.request("textDocument/inlineCompletion", params, MODEL_TIMEOUT).unwrap();
    assert!(response["result"]["items"].is_array(), "{response}");
    response
}

fn range(start: (u32, u32), end: (u32, u32)) -> Value {
    json!({"start": {"line": start.0, "character": start.1}, "end": {"line": end.0, "character": end.1}})
}

#[test]
fn document_faults_are_clamped_or_logged_and_suggestions_still_work() {
    let log = scratch_dir("hardening-documents").join("server.log");
    let mut client = LspClient::start(&[("SPARK_LOG", "info")], Some(&log)).unwrap();
    client.initialize(json!({"inline": {"deadlineMs": 2000}})).unwrap();
    client.wait_model_ready(MODEL_TIMEOUT).unwrap();
    let mut table = Table(Vec::new());
    let mut log_len = 0;
    let mut expect_log = |input: &str, needle: &str| {
        let (len, found) = log_gained(&log, log_len, needle);
        assert!(found, "{input}: the log lacks {needle:?}:\n{}", std::fs::read_to_string(&log).unwrap());
        log_len = len;
    };

    let uri = "file:///work/demo/src/main.rs";
    change(&mut client, "file:///never/opened.rs", 2, range((0, 0), (0, 0)), "x");
    let took = probe(&mut client);
    expect_log("didChange of a document never opened", "not open");
    table.row("`didChange` for a document never opened", "logged warning, ignored", took);

    open(&mut client, uri, "rust", 5, "fn main() {\n    let face = \"😀\";\n}\n");
    change(&mut client, uri, 3, range((0, 0), (0, 0)), "// v3\n");
    let took = probe(&mut client);
    expect_log("versions going backwards", "did not increase");
    // The change is applied and the document takes version 3; results are matched on Document::revision as
    // well, so a version that goes backwards cannot let a stale suggestion through (server/tests/versioning.rs).
    table.row("version going backwards (5 → 3)", "logged warning; change applied", took);

    change(&mut client, uri, 6, range((40, 0), (99, 7)), "// far\n");
    let took = probe(&mut client);
    expect_log("range out of bounds", "clamped");
    table.row("range out of bounds (line 40..99)", "clamped to the end, logged warning", took);

    change(&mut client, uri, 7, range((1, 8), (0, 2)), "");
    let took = probe(&mut client);
    expect_log("inverted range", "inverted=1");
    table.row("inverted range", "swapped, logged warning", took);

    // Inside the surrogate pair of 😀 (UTF-16 column 16 of `    let face = "😀";` after the edits above).
    open(&mut client, uri, "rust", 8, "fn main() {\n    let face = \"😀\";\n}\n");
    let started = Instant::now();
    inline(&mut client, uri, json!({"line": 1, "character": 17}));
    expect_log("position inside a surrogate pair", "position out of range; clamped");
    table.row(
        "inline request inside a surrogate pair",
        "clamped (rounded down), logged warning, answered",
        started.elapsed(),
    );
    let started = Instant::now();
    inline(&mut client, uri, json!({"line": 4_000_000, "character": 9}));
    expect_log("position past the end", "position out of range; clamped");
    table.row("inline request past the end of the document", "clamped, logged warning, answered", started.elapsed());

    let binary: String = (0u32..512).map(|code| char::from_u32(code * 97 % 0x3000).unwrap_or('\u{fffd}')).collect();
    let binary = format!("\0\u{1}\u{7f}PK\u{3}\u{4}{binary}\u{feff}\u{fffd}\r\r\n\0");
    open(&mut client, "file:///work/demo/blob.rs", "rust", 1, &binary);
    let started = Instant::now();
    inline(&mut client, "file:///work/demo/blob.rs", end_position(&binary));
    table.row("binary-looking content (NUL, control chars, BOM, U+FFFD, lone CR)", "answered", started.elapsed());

    let cobol = "       IDENTIFICATION DIVISION.\n       PROGRAM-ID. HELLO.\n       ";
    open(&mut client, "file:///work/demo/hello.cbl", "cobol", 1, cobol);
    let started = Instant::now();
    inline(&mut client, "file:///work/demo/hello.cbl", end_position(cobol));
    table.row("a language with no grammar (cobol)", "plain text, answered", started.elapsed());

    let deep = format!("fn f() {{\n{}{}\n}}\n", "{".repeat(100_000), "}".repeat(100_000));
    let started = Instant::now();
    open(&mut client, "file:///work/demo/deep.rs", "rust", 1, &deep);
    probe(&mut client);
    let opened = started.elapsed();
    change(&mut client, "file:///work/demo/deep.rs", 2, range((1, 50_000), (1, 50_000)), "x");
    inline(&mut client, "file:///work/demo/deep.rs", json!({"line": 1, "character": 50_001}));
    table.row(
        "100k-deep nesting (Rust)",
        format!("parsed, open took {} ms, edited and answered", opened.as_millis()),
        started.elapsed(),
    );

    // Over the syntax size limit: plain text at once, a logged warning, no stall on edits.
    let line = "let value = compute(alpha, beta, gamma) + 42; // 50 bytes\n";
    let huge = line.repeat(52 * 1024 * 1024 / line.len());
    let n_lines = huge.len() / line.len();
    let started = Instant::now();
    open(&mut client, "file:///work/demo/huge.rs", "rust", 1, &huge);
    probe(&mut client);
    let opened = started.elapsed();
    expect_log("50 MB file", "too large for syntax");
    let started = Instant::now();
    for version in 2..22 {
        change(&mut client, "file:///work/demo/huge.rs", version, range((n_lines as u32, 0), (n_lines as u32, 0)), "x");
    }
    let took = probe(&mut client);
    inline(&mut client, "file:///work/demo/huge.rs", json!({"line": n_lines, "character": 20}));
    table.row(
        &format!("{} MB, {}k-line file", huge.len() / (1024 * 1024), n_lines / 1000),
        format!(
            "plain text, logged warning; open {} ms, 20 edits then status {} ms",
            opened.as_millis(),
            took.as_millis()
        ),
        started.elapsed(),
    );
    drop(huge);

    // Under the size limit but too slow to parse in time: one abandoned parse, then plain text.
    let slow = "((((((((((((((((((((((((((((((((((((((((((((((((((((\n".repeat(140_000);
    let slow_lines = slow.len() / 53;
    let started = Instant::now();
    open(&mut client, "file:///work/demo/slow.rs", "rust", 1, &slow);
    let opened = started.elapsed() + probe(&mut client);
    let gave_up = log_gained(&log, log_len, "parse abandoned").1;
    let started = Instant::now();
    for version in 2..22 {
        change(
            &mut client,
            "file:///work/demo/slow.rs",
            version,
            range((slow_lines as u32, 0), (slow_lines as u32, 0)),
            "x",
        );
    }
    let edits = started.elapsed() + probe(&mut client);
    table.row(
        &format!("{} MB of open brackets in {}k lines", slow.len() / (1024 * 1024), slow_lines / 1000),
        format!(
            "{}; open {} ms, 20 edits then status {} ms",
            if gave_up { "parse abandoned once, plain text after (logged)" } else { "parsed in time" },
            opened.as_millis(),
            edits.as_millis()
        ),
        edits,
    );
    // Not a speed assertion: twenty abandoned parses would take 20 x 500 ms.
    assert!(edits < Duration::from_secs(8), "edits on a document that is too slow to parse stall: {edits:?}");

    // After all of it the server still serves a real suggestion (with a deadline that a loaded CI machine meets:
    // this checks that the server is healthy, not how fast it is).
    client
        .notify("workspace/didChangeConfiguration", json!({"settings": {"spark": {"inline": {"deadlineMs": 120000}}}}))
        .unwrap();
    let (text, at) = inventory();
    let fixture_uri = "file:///work/demo/src/inventory.rs";
    let before = client.request("spark/status", Value::Null, SHORT).unwrap()["result"]["counters"].clone();
    open(&mut client, fixture_uri, "rust", 1, &text);
    let cursor = end_position(&text[..at]);
    let started = Instant::now();
    let response = inline(&mut client, fixture_uri, cursor.clone());
    let items = response["result"]["items"].as_array().unwrap();
    // The model really ran for it (whether its text passed the checks is the model's business, not the
    // server's health): the engine's last job is this request, its whole prompt evaluated. This once failed now
    // and then: the warm-up that `didOpen` queues from a spawned task could reach the model thread's queue after
    // this request's job, and the newest job of a lane won even though the request had cancelled that warm-up;
    // the request was answered as superseded without reaching the model (engine.rs, `take_newest`).
    let status = client.request("spark/status", Value::Null, SHORT).unwrap();
    let counters = &status["result"]["counters"];
    assert_eq!(status["result"]["state"], "ready", "{status}");
    assert_eq!(counters["superseded"], before["superseded"], "the request was superseded: {status}");
    assert!(counters["requests"].as_u64() > before["requests"].as_u64(), "{status}");
    let last = &counters["last"];
    let n_evaluated = last["nReused"].as_u64().unwrap() + last["nDecoded"].as_u64().unwrap();
    assert_eq!(n_evaluated, last["nPrompt"].as_u64().unwrap(), "the last job is not this request's: {status}");
    let generated = last["nGenerated"].as_u64().unwrap_or(0);
    println!("after the bad input: {} suggestion(s), the engine's last job generated {generated} tokens", items.len());
    if let Some(item) = items.first() {
        assert_eq!(item["range"]["start"], cursor);
    }
    table.row(
        "then: ghost text on the inventory fixture",
        format!("served by the model ({} suggestion, {generated} tokens generated)", items.len()),
        started.elapsed(),
    );
    table.print("Document faults (one server, real model)");
    assert!(client.shutdown(SHORT).unwrap().success());
}

/// A model file that is wrong in one way, and what the user is told about it.
struct ModelFault {
    name: &'static str,
    path: PathBuf,
    message: &'static str,
}

fn model_faults(dir: &Path) -> Vec<ModelFault> {
    let truncated = dir.join("truncated.gguf");
    let mut head = vec![0; 10 * 1024 * 1024];
    use std::io::Read;
    std::fs::File::open(default_model()).unwrap().read_exact(&mut head).unwrap();
    std::fs::write(&truncated, head).unwrap();
    let text = dir.join("notes.gguf");
    std::fs::write(&text, "these are notes, not a model\n").unwrap();
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, "").unwrap();
    vec![
        ModelFault { name: "missing file", path: dir.join("missing.gguf"), message: "does not exist" },
        ModelFault { name: "truncated GGUF (first 10 MB)", path: truncated, message: "could not be loaded" },
        ModelFault { name: "a text file", path: text, message: "not a GGUF file" },
        ModelFault { name: "an empty file", path: empty, message: "not a GGUF file" },
        ModelFault { name: "a directory", path: dir.to_owned(), message: "not a GGUF file" },
    ]
}

/// With no usable model, what needs none keeps working: diagnostics, code-action listing, empty ghost text at
/// once, and resolving an action gives no edit. Returns the listed actions.
fn serves_what_needs_no_model(client: &mut LspClient) -> Value {
    let uri = "file:///work/demo/src/total.rs";
    open(client, uri, "rust", 1, BROKEN);
    let published = client
        .wait_for("textDocument/publishDiagnostics", SHORT, |message| {
            message["params"]["uri"] == uri && !message["params"]["diagnostics"].as_array().unwrap().is_empty()
        })
        .unwrap();
    assert_eq!(published["params"]["diagnostics"][0]["source"], "spark");
    let listed = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range((1, 40), (1, 40)), "context": {"diagnostics": []}}),
            SHORT,
        )
        .unwrap();
    let titles: Vec<&str> = listed["result"]
        .as_array()
        .map(|actions| actions.iter().filter_map(|action| action["title"].as_str()).collect())
        .unwrap_or_default();
    assert!(titles.iter().any(|title| title.starts_with("Spark fix")), "{listed}");
    let resolved = client.request("codeAction/resolve", listed["result"][0].clone(), SHORT).unwrap();
    assert!(resolved["result"].get("edit").is_none(), "no edit without a model: {resolved}");
    let response = inline(client, uri, json!({"line": 1, "character": 40}));
    assert_eq!(response["result"]["items"], json!([]), "{response}");
    listed
}

#[test]
fn model_faults_are_explained_everything_else_keeps_working_and_a_setting_fixes_them() {
    let dir = scratch_dir("hardening-models");
    let mut table = Table(Vec::new());
    for fault in model_faults(&dir) {
        // `doctor` says what is wrong and how to fix it.
        let doctor = {
            let _lock = spark_tests::model_lock();
            Command::new(server_binary()).arg("doctor").arg("--model").arg(&fault.path).output().unwrap()
        };
        let stdout = String::from_utf8_lossy(&doctor.stdout);
        assert!(!doctor.status.success(), "{}: {stdout}", fault.name);
        assert!(stdout.contains("status:       FAILED") && stdout.contains(fault.message), "{}: {stdout}", fault.name);
        assert!(stdout.contains("fix:"), "{}: {stdout}", fault.name);

        let started = Instant::now();
        let mut client = LspClient::start(&[], None).unwrap();
        let capabilities =
            json!({"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": true}}});
        let params = json!({"processId": null, "rootUri": null, "capabilities": capabilities, "initializationOptions": {"model": {"path": fault.path}}});
        client.request("initialize", params, SHORT).unwrap();
        client.notify("initialized", json!({})).unwrap();
        let shown = client.wait_for("window/showMessage", SHORT, |_| true).unwrap();
        let shown = shown["params"]["message"].as_str().unwrap().to_owned();
        assert!(shown.contains(fault.message), "{}: {shown}", fault.name);
        let status = client.request("spark/status", Value::Null, SHORT).unwrap();
        assert_eq!(status["result"]["state"], "failed", "{status}");

        let listed = serves_what_needs_no_model(&mut client);

        // Fixing the setting loads the model without a restart.
        client.seen.clear();
        client
            .notify(
                "workspace/didChangeConfiguration",
                json!({"settings": {"spark": {"model": {"path": default_model()}}}}),
            )
            .unwrap();
        client.wait_model_ready(MODEL_TIMEOUT).unwrap();
        let resolved = client.request("codeAction/resolve", listed["result"][0].clone(), MODEL_TIMEOUT).unwrap();
        assert!(resolved.get("error").is_none(), "{resolved}");
        assert!(client.shutdown(SHORT).unwrap().success());
        table.row(
            fault.name,
            format!(
                "showMessage + doctor: \"…{}…\"; diagnostics and actions listed; fixed by didChangeConfiguration",
                fault.message
            ),
            started.elapsed(),
        );
    }
    table.print("Model faults (each: doctor, then a server started on the bad file and fixed by a setting)");
}

/// Over the memory limit with the context asked for: the default model with its whole training context
/// (32768 tokens: ~1075 MiB estimated, 576 of them KV cache) under an 800 MiB limit; at 4096 tokens (~347 MiB)
/// it fits.
#[test]
fn a_model_that_does_not_fit_the_memory_limit_is_explained_and_a_smaller_context_fixes_it() {
    let mut table = Table(Vec::new());
    let doctor = |context_size: &str| {
        let _lock = spark_tests::model_lock();
        let output = Command::new(server_binary())
            .arg("doctor")
            .arg("--model")
            .arg(default_model())
            .args(["--context-size", context_size, "--max-memory-mb", "800"])
            .output()
            .unwrap();
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let started = Instant::now();
    let (ok, stdout) = doctor("32768");
    assert!(!ok, "{stdout}");
    for needle in ["status:       FAILED", "does not fit in memory", "with contextSize 32768", "limit of 800 MiB"] {
        assert!(stdout.contains(needle), "doctor lacks {needle:?}: {stdout}");
    }
    assert!(stdout.contains("fix:          lower --context-size"), "{stdout}");
    let (ok, fits) = doctor("4096");
    assert!(ok && fits.contains("memory:       ~") && fits.contains("with contextSize 4096"), "{fits}");
    table.row(
        "`doctor --context-size 32768 --max-memory-mb 800`",
        "FAILED: does not fit; fix: lower --context-size; at 4096: ok",
        started.elapsed(),
    );

    let started = Instant::now();
    let mut client = LspClient::start(&[], None).unwrap();
    let capabilities =
        json!({"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": true}}});
    let model = json!({"path": default_model(), "contextSize": 32768, "maxMemoryMb": 800});
    let params = json!({"processId": null, "rootUri": null, "capabilities": capabilities, "initializationOptions": {"model": model}});
    client.request("initialize", params, SHORT).unwrap();
    client.notify("initialized", json!({})).unwrap();
    let shown = client.wait_for("window/showMessage", SHORT, |_| true).unwrap();
    let shown = shown["params"]["message"].as_str().unwrap().to_owned();
    for needle in
        ["does not fit in memory", "with contextSize 32768", "800 MiB (model.maxMemoryMb)", "lower model.contextSize"]
    {
        assert!(shown.contains(needle), "showMessage lacks {needle:?}: {shown}");
    }
    let status = client.request("spark/status", Value::Null, SHORT).unwrap();
    assert_eq!(status["result"]["state"], "failed", "{status}");
    let listed = serves_what_needs_no_model(&mut client);

    // Lowering the context size loads the model without a restart, with the limit still in force.
    client.seen.clear();
    let model = json!({"path": default_model(), "contextSize": 4096, "maxMemoryMb": 800});
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"spark": {"model": model}}})).unwrap();
    client.wait_model_ready(MODEL_TIMEOUT).unwrap();
    let status = client.request("spark/status", Value::Null, SHORT).unwrap();
    assert_eq!(status["result"]["model"]["nCtx"], 4096, "{status}");
    let resolved = client.request("codeAction/resolve", listed["result"][0].clone(), MODEL_TIMEOUT).unwrap();
    assert!(resolved.get("error").is_none(), "{resolved}");
    assert!(client.shutdown(SHORT).unwrap().success());
    table.row(
        "server with contextSize 32768, maxMemoryMb 800",
        format!("showMessage: \"{shown}\"; diagnostics and actions listed; contextSize 4096 by didChangeConfiguration loads it"),
        started.elapsed(),
    );
    table.print("A model that does not fit the memory limit");
}

#[test]
fn the_cli_reads_a_file_that_is_not_utf8_with_a_warning() {
    let file = scratch_dir("hardening-cli").join("latin1.rs");
    std::fs::write(&file, b"// caf\xe9 \xff\xfe\nfn main() {\n    let x = \n}\n").unwrap();
    let _lock = spark_tests::model_lock();
    let output =
        Command::new(server_binary()).arg("complete").arg(&file).args(["--at", "3:13", "--json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("is not valid UTF-8; invalid bytes were replaced"), "{stderr}");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(json["stats"]["nPrompt"].as_u64().unwrap() > 0, "{json}");
    println!("\n| non-UTF-8 bytes in a file given to `complete` | warning on stderr, lossy text, answered |");
}

const CANARY: &str = "sk-spark-canary-7f3a9c1e5b";

/// Accepts connections and records what arrives; answers every request with a 500.
fn fake_endpoint() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buffer = vec![0; 64 * 1024];
            let n_read = stream.read(&mut buffer).unwrap_or(0);
            record.lock().unwrap().push(String::from_utf8_lossy(&buffer[..n_read]).into_owned());
            let _ = stream
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, seen)
}

#[test]
fn secrets_never_reach_logs_or_responses_and_ghost_text_stays_local() {
    let dir = scratch_dir("hardening-secrets");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    for secret_file in [".env", "id_rsa", "server.pem"] {
        std::fs::write(dir.join(secret_file), format!("API_KEY={CANARY}\n")).unwrap();
    }
    let (text, at) = inventory();
    std::fs::write(dir.join("src/inventory.rs"), &text).unwrap();
    let (url, endpoint_saw) = fake_endpoint();
    let log = dir.join("server.log");
    let mut client =
        LspClient::start(&[("SPARK_LOG", "debug"), ("SPARK_HARDENING_CANARY", CANARY)], Some(&log)).unwrap();
    let capabilities =
        json!({"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": true}}});
    let settings = json!({"inline": {"deadlineMs": 20000}, "remote": {"url": url, "apiKeyEnv": "SPARK_HARDENING_CANARY", "timeoutMs": 2000}});
    let root = format!("file://{}", dir.display());
    let params =
        json!({"processId": null, "rootUri": root, "capabilities": capabilities, "initializationOptions": settings});
    let mut responses = vec![client.request("initialize", params, SHORT).unwrap()];
    client.notify("initialized", json!({})).unwrap();
    client.wait_model_ready(MODEL_TIMEOUT).unwrap();

    // Ghost text with a remote configured but not routed: nothing reaches the endpoint.
    let uri = format!("{root}/src/inventory.rs");
    open(&mut client, &uri, "rust", 1, &text);
    let connections_before = endpoint_saw.lock().unwrap().len();
    responses.push(inline(&mut client, &uri, end_position(&text[..at])));
    let params = json!({"textDocument": {"uri": uri}, "position": end_position(&text[..at])});
    responses.push(client.request("textDocument/completion", params, MODEL_TIMEOUT).unwrap());
    let ghost_text_requests: Vec<String> = endpoint_saw.lock().unwrap()[connections_before..]
        .iter()
        .filter(|seen| seen.contains("POST"))
        .cloned()
        .collect();
    assert!(
        ghost_text_requests.is_empty(),
        "ghost text went to the remote without inline.route: {ghost_text_requests:?}"
    );

    // A task that may go remote (remote-then-local by default for fix): the key goes to the endpoint only.
    let uri_broken = format!("{root}/src/total.rs");
    open(&mut client, &uri_broken, "rust", 1, BROKEN);
    let listed = client
        .request("textDocument/codeAction", json!({"textDocument": {"uri": uri_broken}, "range": range((1, 40), (1, 40)), "context": {"diagnostics": []}}), SHORT)
        .unwrap();
    responses.push(listed.clone());
    if let Some(action) = listed["result"].get(0) {
        responses.push(client.request("codeAction/resolve", action.clone(), MODEL_TIMEOUT).unwrap());
    }
    responses.push(client.request("spark/status", Value::Null, SHORT).unwrap());
    // Secret-looking files opened in the editor.
    // Spark builds no prompt from secret-looking files (.env, *.pem, id_rsa…): no model request at all.
    let env_uri = format!("{root}/.env");
    let env_text = format!("API_KEY={CANARY}\nDB_PASSWORD=");
    open(&mut client, &env_uri, "dotenv", 1, &env_text);
    let requests_before =
        client.request("spark/status", Value::Null, SHORT).unwrap()["result"]["counters"]["requests"].clone();
    let env_response = inline(&mut client, &env_uri, end_position(&env_text));
    let requests_after =
        client.request("spark/status", Value::Null, SHORT).unwrap()["result"]["counters"]["requests"].clone();
    println!("secret-looking .env opened: model requests {requests_before} -> {requests_after}");
    assert_eq!(requests_before, requests_after, "a .env file reached the model");
    assert_eq!(env_response["result"]["items"], json!([]), "{env_response}");
    let env_items = env_response["result"]["items"].as_array().cloned().unwrap_or_default();
    responses
        .extend(env_items.iter().filter(|item| !item["insertText"].as_str().unwrap_or("").contains(CANARY)).cloned());
    client.seen.clear();
    client.notify("workspace/didChangeConfiguration", json!({"settings": {"spark": settings}})).unwrap();
    responses.push(client.request("spark/status", Value::Null, SHORT).unwrap());
    let notifications = std::mem::take(&mut client.seen);
    assert!(client.shutdown(SHORT).unwrap().success());

    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("DEBUG"), "the log ran at debug level");
    assert!(!log_text.contains(CANARY), "the canary key is in the server's log");
    for message in responses.iter().chain(&notifications) {
        assert!(!message.to_string().contains(CANARY), "the canary key is in a message: {message}");
    }
    let endpoint_saw = endpoint_saw.lock().unwrap();
    let with_key = endpoint_saw.iter().filter(|seen| seen.contains(CANARY)).count();
    println!(
        "\n| canary API key (env var named by remote.apiKeyEnv), SPARK_LOG=debug | absent from {} bytes of log and {} messages; endpoint saw {} connections, {} with the key (as Authorization) |",
        log_text.len(),
        responses.len() + notifications.len(),
        endpoint_saw.len(),
        with_key
    );
    for seen in endpoint_saw.iter().filter(|seen| seen.contains(CANARY)) {
        assert!(seen.lines().any(|line| line.to_ascii_lowercase().starts_with("authorization: bearer ")), "{seen}");
    }
}

/// Spark never starts processes and never writes files itself (the CLI's `--write` aside): a scan of the
/// server's, the core's and the engine's non-test source.
#[test]
fn spark_never_runs_commands_or_writes_files() {
    let forbidden = [
        "process::Command",
        "Command::new(",
        "fs::write",
        "File::create",
        "OpenOptions",
        "fs::remove",
        "fs::rename",
        "fs::create_dir",
    ];
    let mut offences = Vec::new();
    let mut n_files = 0;
    for crate_dir in ["server/src", "ide/src", "engine/src", "grammars/src"] {
        let mut stack = vec![workspace_root().join(crate_dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    // Binaries under src/bin are developer tools (benches), not Spark.
                    if path.file_name().unwrap() != "bin" {
                        stack.push(path);
                    }
                    continue;
                }
                // cli.rs writes with --write, the MCP server's paths.rs with `write: true` under --allow-write;
                // exec_check/ is the execution tier (verify.compile, verify.runTests: run for a chosen task only,
                // toolchain commands and the resident TypeScript service in scratch copies only),
                // whose gate and untouched user tree tests/e2e/exec.rs checks; tasks/probe.rs is its part that runs
                // the function under test for characterisation tests, in the same scratch copies through
                // exec_check's session (tests/e2e/exec.rs checks it too).
                let opted_in = path.ends_with("server/src/cli.rs")
                    || path.ends_with("server/src/mcp/paths.rs")
                    || path.parent().is_some_and(|dir| dir.ends_with("ide/src/exec_check"))
                    || path.ends_with("ide/src/tasks/probe.rs");
                if path.extension().is_none_or(|ext| ext != "rs") || opted_in {
                    continue;
                }
                n_files += 1;
                let source = std::fs::read_to_string(&path).unwrap();
                let non_test = source.split("#[cfg(test)]").next().unwrap();
                // The server runs only its own binary: main.rs re-executes itself once, to set OMP_WAIT_POLICY
                // before libgomp loads, and verify/regex.rs starts it as a regex worker (`__regex-worker`, the path
                // main.rs registers) so that a backtracking match can be killed at its time limit. Only there.
                // tasks/characterise_inputs.rs names the APIs it refuses to run a function over, in a table of
                // strings.
                let is_self_exec = |line: &str| {
                    (path.ends_with("server/src/main.rs")
                        && (line.contains("CommandExt")
                            || line.contains("Command::new(exe)")
                            || line.contains("process::Command::new(exe)")))
                        || (path.ends_with("ide/src/verify/regex.rs") && line.contains("Command::new(exe)"))
                        || ((path.ends_with("ide/src/tasks/characterise.rs")
                            || path.ends_with("ide/src/tasks/characterise_inputs.rs"))
                            && line.trim_start().starts_with("(\""))
                };
                for (line_idx, line) in non_test.lines().enumerate().filter(|(_, line)| !is_self_exec(line)) {
                    if line.trim_start().starts_with("//") {
                        continue;
                    }
                    if let Some(pattern) = forbidden.iter().find(|pattern| line.contains(*pattern)) {
                        offences.push(format!("{}:{}: {pattern}: {}", path.display(), line_idx + 1, line.trim()));
                    }
                }
            }
        }
    }
    println!("\n| source scan ({n_files} files of server, engine, grammars; cli.rs, exec_check/ and tests aside) | {} uses of {forbidden:?} |", offences.len());
    assert!(n_files > 10);
    assert!(offences.is_empty(), "Spark must not run commands or write files:\n{}", offences.join("\n"));
}
