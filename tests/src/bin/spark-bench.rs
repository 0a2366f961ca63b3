//! Keystroke → ghost-text latency over stdio against the real binary and model, printed as a table.
//!
//! Replays typing into a Rust file: one incremental didChange per character, then an inlineCompletion
//! request at the cursor, waiting for each answer before the next keystroke (the editor's worst case).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_tests::{end_position, workspace_root, LspClient};

const URI: &str = "file:///bench/src/inventory.rs";
const TYPED: &str = "let stock = self.items.get(name).copied();\n        stock.unwrap_or(0)";

fn main() -> anyhow::Result<()> {
    let text = std::fs::read_to_string(workspace_root().join("tests/fixtures/inventory.rs"))?;
    let mut at = text.find("$0").unwrap();
    let mut text = text.replace("$0", "");

    let mut client = LspClient::start(&[], None)?;
    let started = Instant::now();
    client.initialize(json!({"inline": {"deadlineMs": 1000}}))?;
    client.wait_model_ready(Duration::from_secs(120))?;
    let ready_ms = started.elapsed().as_millis();
    let rss_after_load = client.rss_kib().unwrap_or(0);

    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 1, "text": text}}))?;
    let mut latencies = Vec::new();
    let mut shown = 0;
    let mut version = 1;
    for ch in TYPED.chars() {
        let position = end_position(&text[..at]);
        version += 1;
        client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version},
                   "contentChanges": [{"range": {"start": position, "end": position}, "text": ch.to_string()}]}),
        )?;
        text.insert(at, ch);
        at += ch.len_utf8();
        let sent = Instant::now();
        let response = client.request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": URI}, "position": end_position(&text[..at]), "context": {"triggerKind": 2}}),
            Duration::from_secs(60),
        )?;
        latencies.push(sent.elapsed());
        if response["result"]["items"].as_array().is_some_and(|items| !items.is_empty()) {
            shown += 1;
        }
    }
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10))?;
    let counters = &status["result"]["counters"];
    let rss_end = client.rss_kib().unwrap_or(0);
    client.shutdown(Duration::from_secs(30))?;

    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0;
    let n_prompt = counters["nPrompt"].as_u64().unwrap_or(0).max(1);
    let n_reused = counters["nReused"].as_u64().unwrap_or(0);
    println!("| measure | value |");
    println!("|---|---|");
    println!("| process start → model ready | {ready_ms} ms |");
    println!("| RSS after load | {} MiB |", rss_after_load / 1024);
    println!("| RSS after typing | {} MiB |", rss_end / 1024);
    println!("| keystrokes (didChange + inlineCompletion) | {} |", latencies.len());
    println!("| keystroke → ghost text, median | {:.0} ms |", pct(0.5));
    println!("| keystroke → ghost text, p90 | {:.0} ms |", pct(0.9));
    println!("| keystroke → ghost text, max | {:.0} ms |", pct(1.0));
    println!("| answers with a suggestion | {shown} of {} |", latencies.len());
    println!("| prompt tokens reused from the KV cache | {:.1}% ({n_reused} of {n_prompt}) |", 100.0 * n_reused as f64 / n_prompt as f64);
    Ok(())
}
