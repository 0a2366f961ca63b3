//! `spark-lsp mcp` driven by real MCP clients against the real binary and the real default model: the official
//! Python SDK (tests/mcp/client.py: every tool, bad arguments, path escapes, huge input, cancellation, concurrent
//! calls, writing), the MCP Inspector's CLI mode (tools/list), and raw stdio for what no SDK sends (malformed
//! JSON-RPC, a line past the transport's limit). The clients come from scripts/install-mcp-client.sh (`make
//! test` runs it); a missing client or model fails with a message, never a skip.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use spark_tests::{scratch_dir, server_binary, workspace_root};

const GENEROUS: Duration = Duration::from_secs(240);

fn venv_python() -> PathBuf {
    let python = std::env::var_os("SPARK_MCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/mcp-venv"))
        .join("bin/python");
    assert!(
        python.exists(),
        "the MCP Python client is not installed at {}: run scripts/install-mcp-client.sh (make test does)",
        python.display()
    );
    python
}

fn inspector() -> PathBuf {
    let tools =
        std::env::var_os("SPARK_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target/tools"));
    let inspector = tools.join("node_modules/.bin/mcp-inspector");
    assert!(
        inspector.exists(),
        "the MCP Inspector is not installed at {}: run scripts/install-mcp-client.sh (make test does)",
        inspector.display()
    );
    inspector
}

fn require_model() {
    let model = spark_engine::default_model_path().expect("HOME, XDG_DATA_HOME or SPARK_MODEL_DIR is set");
    let model = std::env::var_os("SPARK_MODEL").map(PathBuf::from).unwrap_or(model);
    assert!(model.exists(), "the model {} is missing: run `make model`", model.display());
}

/// A workspace root with broken Rust files, and a file and a symlink outside it.
fn workspace(name: &str) -> PathBuf {
    let dir = scratch_dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(root.join(path), text).unwrap();
    write("Cargo.toml", "[package]\nname = \"ws\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    write(
        "src/lib.rs",
        "pub fn total(prices: &[u32], count: u32) -> u32 {\n    let sum: u32 = prices.iter().sum()\n    sum * count\n}\n",
    );
    let other = "pub fn count_all(items: &[u32]) -> usize {\n    let n = items.len()\n    n\n}\n";
    write("src/other.rs", other);
    write("src/written.rs", other);
    write("src/tested.rs", "pub fn double(x: i32) -> i32 {\n    x * 2\n}\n");
    // A clean crate of its own for the execution tier (cargo check, cargo test in a scratch copy).
    std::fs::create_dir_all(root.join("exec/src")).unwrap();
    write("exec/Cargo.toml", "[package]\nname = \"exec\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n");
    write("exec/src/lib.rs", "pub fn double(x: i32) -> i32 {\n    x * 2\n}\n");
    std::fs::write(dir.join("outside.rs"), "pub fn secret() -> u32 {\n    7\n}\n").unwrap();
    std::os::unix::fs::symlink(dir.join("outside.rs"), root.join("src/link.rs")).unwrap();
    std::os::unix::fs::symlink(&dir, root.join("up")).unwrap();
    root
}

#[test]
fn the_python_sdk_calls_every_tool_and_the_server_survives_bad_input() {
    let python = venv_python();
    require_model();
    let root = workspace("mcp-python");
    let logs = root.parent().unwrap().to_owned();
    let _lock = spark_tests::model_lock();
    let output = Command::new(python)
        .arg(workspace_root().join("tests/mcp/client.py"))
        .arg(server_binary())
        .arg(&root)
        .arg(&logs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("the client printed no report:\n{stdout}\n{stderr}"));
    let expected = [
        "list_tools",
        "fix",
        "fix_write_without_allow_write",
        "generate_regex",
        "check_good_edit",
        "check_bad_edit",
        "check_regex_examples",
        "complete",
        "generate_tests",
        "bad_arguments",
        "path_escapes",
        "huge_input",
        "concurrent_calls",
        "execution_tier",
        "cancellation",
        "fix_write_with_allow_write",
    ];
    let failed: Vec<String> = expected
        .iter()
        .filter(|name| report[**name]["ok"] != true)
        .map(|name| format!("{name}: {}", report[*name]["detail"]))
        .collect();
    assert!(failed.is_empty(), "scenarios failed:\n{}\n{stderr}", failed.join("\n"));
    assert!(output.status.success(), "{stderr}");
    // The cancelled call stopped its model work (not only its answer).
    let cancel_log = std::fs::read_to_string(logs.join("cancel.log")).unwrap();
    assert!(cancel_log.contains("call stopped; its model work is cancelled"), "{cancel_log}");
}

#[test]
fn the_inspector_cli_lists_the_tools() {
    let inspector = inspector();
    require_model();
    let root = workspace("mcp-inspector");
    let _lock = spark_tests::model_lock();
    let output = Command::new(inspector)
        .arg("--cli")
        .arg(server_binary())
        .args(["mcp", "--root"])
        .arg(&root)
        .args(["--strong-model", "none", "--method", "tools/list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let start = stdout.find('{').unwrap_or_else(|| panic!("no JSON in the Inspector's output:\n{stdout}"));
    let listed: Value = serde_json::from_str(&stdout[start..]).expect("the Inspector prints the tools as JSON");
    let mut names: Vec<&str> =
        listed["tools"].as_array().unwrap().iter().filter_map(|tool| tool["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["check", "complete", "fix", "generate_regex", "generate_tests"]);
}

/// A raw newline-delimited JSON-RPC session with the server.
struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start(root: &Path, log: &Path, extra: &[&str]) -> Raw {
        let mut child = Command::new(server_binary())
            .args(["mcp", "--strong-model", "none", "--root"])
            .arg(root)
            .args(extra)
            .env("SPARK_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Raw { child, stdin, lines }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer to request `id` (other messages are skipped).
    fn answer(&mut self, id: i64) -> Value {
        loop {
            let line = self.lines.recv_timeout(GENEROUS).unwrap_or_else(|_| panic!("no answer to request {id}"));
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string().as_bytes());
        self.answer(id)
    }
}

#[test]
fn malformed_json_rpc_and_huge_lines_leave_the_server_answering() {
    require_model();
    let root = workspace("mcp-raw");
    let _lock = spark_tests::model_lock();
    let mut raw = Raw::start(&root, &root.parent().unwrap().join("raw.log"), &[]);
    let init = raw.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "spark-lsp", "{init}");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    let list = |raw: &mut Raw, id: i64| {
        let answer = raw.request(id, "tools/list", json!({}));
        assert_eq!(answer["result"]["tools"].as_array().map(Vec::len), Some(5), "{answer}");
    };
    let huge_line = [
        b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/list\",\"params\":{\"x\":\"".to_vec(),
        vec![b'a'; 17 << 20],
        b"\"}}".to_vec(),
    ]
    .concat();
    let faults: Vec<(&str, Vec<u8>)> = vec![
        ("not JSON", b"{not json".to_vec()),
        ("truncated JSON", br#"{"jsonrpc":"2.0","id":5,"method":"tools/li"#.to_vec()),
        ("invalid UTF-8", b"\xff\xfe{\"jsonrpc\":\"2.0\"}".to_vec()),
        ("wrong shape", br#"{"jsonrpc":"2.0","id":6,"method":42}"#.to_vec()),
        (
            "JSON nested 100k deep",
            format!(
                r#"{{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{}{}}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            )
            .into_bytes(),
        ),
        ("a 17 MiB line", huge_line),
    ];
    let mut id = 100;
    for (input, bytes) in faults {
        raw.send(&bytes);
        id += 1;
        list(&mut raw, id);
        println!("| {input} | next tools/list answered |");
    }
    // A tool call with 6 MiB of text: a tool error, then the next call is answered.
    let huge = raw.request(
        200,
        "tools/call",
        json!({"name": "complete", "arguments": {"file": "src/x.rs", "text": "a".repeat(6 << 20)}}),
    );
    assert_eq!(huge["result"]["isError"], true, "{}", &huge.to_string()[..300.min(huge.to_string().len())]);
    let after = raw.request(
        201,
        "tools/call",
        json!({"name": "check", "arguments": {"file": "src/lib.rs", "old_text": "sum()\n", "new_text": "sum();\n"}}),
    );
    assert_eq!(after["result"]["structuredContent"]["ok"], true, "{after}");
    drop(raw.stdin);
    let status = raw.child.wait().unwrap();
    assert!(status.success(), "the server exits cleanly when stdin closes: {status}");
}

#[test]
fn without_a_model_tools_that_need_it_say_so_and_check_still_answers() {
    let root = workspace("mcp-no-model");
    let log = root.parent().unwrap().join("no-model.log");
    let mut raw = Raw::start(&root, &log, &["--model", "/nonexistent/spark/mcp.gguf"]);
    raw.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
    );
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let fix = raw.request(
        2,
        "tools/call",
        json!({"name": "fix", "arguments": {"file": "src/lib.rs", "line": 2, "column": 39}}),
    );
    assert_eq!(fix["result"]["isError"], true, "{fix}");
    let message = fix["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(message.contains("the model is not available") && message.contains("does not exist"), "{message}");
    let check = raw.request(
        3,
        "tools/call",
        json!({"name": "check", "arguments": {"file": "src/lib.rs", "old_text": "sum()\n", "new_text": "sum();\n"}}),
    );
    assert_eq!(check["result"]["structuredContent"]["ok"], true, "{check}");
    drop(raw.stdin);
    assert!(raw.child.wait().unwrap().success());
}
