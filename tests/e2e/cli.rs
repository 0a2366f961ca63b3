//! `spark-lsp complete`, `regex` and `doctor` on the real model: the same engine path as the server.

use std::process::Command;

use spark_tests::{server_binary, workspace_root};

#[test]
fn complete_prints_a_suggestion_and_its_latency() {
    let _lock = spark_tests::model_lock();
    let output = Command::new(server_binary())
        .current_dir(workspace_root())
        .args(["complete", "examples/demo.rs", "--at", "18:5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let (suggestion, report) = stdout.split_once("\n--\n").expect("suggestion, then a -- line, then the report");
    assert!(!suggestion.trim().is_empty());
    assert!(report.contains("latency") && report.contains(" ms"), "{report}");
}

#[test]
fn complete_json_parses_and_carries_the_suggestion() {
    let fixture = std::fs::read_to_string(workspace_root().join("tests/fixtures/inventory.rs")).unwrap();
    let file = spark_tests::scratch_dir("cli-json").join("inventory.rs");
    std::fs::write(&file, fixture.replace("$0", "")).unwrap();
    let _lock = spark_tests::model_lock();
    let output =
        Command::new(server_binary()).arg("complete").arg(&file).args(["--at", "19:9", "--json"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    assert_eq!(json["line"], 19);
    assert_eq!(json["column"], 9);
    assert!(json["latencyMs"].is_u64());
    assert!(json["stats"]["nPrompt"].as_u64().unwrap() > 0);
    assert_eq!(json["model"]["arch"], "qwen2");
    assert!(json["suggestion"].is_string() || json["suggestion"].is_null(), "{json}");
}

#[test]
fn complete_rejects_a_bad_position_clearly() {
    let _lock = spark_tests::model_lock();
    let output = Command::new(server_binary())
        .current_dir(workspace_root())
        .args(["complete", "examples/demo.rs", "--at", "0:1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("1-based"));
}

#[test]
fn doctor_reports_the_model() {
    let _lock = spark_tests::model_lock();
    let output = Command::new(server_binary()).arg("doctor").output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    for expected in [
        "architecture: qwen2",
        "fill-in:",
        "threads:",
        "cpu features:",
        "load time:",
        "status:       ok",
        "mcp:          usable",
    ] {
        assert!(stdout.contains(expected), "doctor output lacks {expected:?}:\n{stdout}");
    }
}

#[test]
fn doctor_explains_a_missing_model() {
    let _lock = spark_tests::model_lock();
    let output = Command::new(server_binary()).args(["doctor", "--model", "/nonexistent/x.gguf"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(stdout.contains("/nonexistent/x.gguf does not exist"), "{stdout}");
}

/// A regex the examples decide alone (runs of digits whose lengths the description states): offered at once,
/// from the examples, in the file's dialect. A pattern that spells out its examples is never what comes back.
#[test]
fn regex_from_examples_is_offered_in_the_files_dialect() {
    let dir = spark_tests::scratch_dir("cli-regex");
    let cases = [
        (
            "parts.rs",
            "// regex: a part number: four digits a slash and two digits, matches 4821/07, 1190/55, not 482/07\n",
        ),
        (
            "parts.ts",
            "// regex: a part number: four digits a slash and two digits, matches 4821/07, 1190/55, not 482/07\n",
        ),
    ];
    let _lock = spark_tests::model_lock();
    for (name, text) in cases {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let output =
            Command::new(server_binary()).arg("regex").arg(&file).args(["--at", "1:5", "--json"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{name}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
        let diff = json["changes"][0]["diff"].as_str().unwrap_or_else(|| panic!("{name}: no change: {json}"));
        let added: Vec<&str> = diff.lines().filter(|line| line.starts_with('+') && !line.starts_with("+++")).collect();
        let expected = if name.ends_with(".rs") {
            r#"+const PATTERN: &str = r"^[0-9]{4}/[0-9]{2}$";"#
        } else {
            r"+const re = /^[0-9]{4}\/[0-9]{2}$/;"
        };
        assert_eq!(added, [expected], "{name}: {json}");
    }
}
