//! Keystroke → ghost-text latency over stdio against the real binary and model, printed as a table.
//!
//! Replays typing into a Rust file: one incremental didChange per character, then an inlineCompletion
//! request at the cursor, waiting for each answer before the next keystroke (the editor's worst case).
//! Each configuration runs in the same invocation, side by side: idle and with one core taken by another
//! process (an editor runs beside rust-analyzer and cargo), and with OpenMP's spinning (active) and passive
//! wait policies (spark-lsp itself defaults to passive).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_tests::{end_position, workspace_root, LspClient};

const URI: &str = "file:///bench/src/inventory.rs";
const TYPED: &str = "let stock = self.items.get(name).copied();";

/// A configuration: its label, the server's extra environment, and whether a core is kept busy.
type Config = (&'static str, Vec<(&'static str, &'static str)>, bool);

struct Row {
    label: String,
    ready_ms: u128,
    rss_mib: u64,
    latencies: Vec<Duration>,
    shown: usize,
    n_prompt: u64,
    n_reused: u64,
    n_decoded: u64,
    requests: u64,
    cache_hits: u64,
    cpu_ms: u64,
}

fn replay(label: &str, env: &[(&str, &str)], busy_core: bool) -> anyhow::Result<Row> {
    let text = std::fs::read_to_string(workspace_root().join("tests/fixtures/inventory.rs"))?;
    let mut at = text.find("$0").unwrap();
    let mut text = text.replace("$0", "");

    let stop_hog = Arc::new(AtomicBool::new(false));
    let hog = busy_core.then(|| {
        let stop = stop_hog.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        })
    });

    let mut client = LspClient::start(env, None)?;
    let started = Instant::now();
    client.initialize(json!({"inline": {"deadlineMs": 1000}}))?;
    client.wait_model_ready(Duration::from_secs(120))?;
    let ready_ms = started.elapsed().as_millis();
    let rss_mib = client.rss_kib().unwrap_or(0) / 1024;
    let cpu_at_start = cpu_time_ms(client.child.id());

    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 1, "text": text}}),
    )?;
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
    let cpu_ms = cpu_time_ms(client.child.id()).saturating_sub(cpu_at_start);
    client.shutdown(Duration::from_secs(30))?;
    stop_hog.store(true, Ordering::Relaxed);
    if let Some(hog) = hog {
        let _ = hog.join();
    }
    latencies.sort();
    Ok(Row {
        label: label.to_owned(),
        ready_ms,
        rss_mib,
        latencies,
        shown,
        n_prompt: counters["nPrompt"].as_u64().unwrap_or(0),
        n_reused: counters["nReused"].as_u64().unwrap_or(0),
        n_decoded: counters["nDecoded"].as_u64().unwrap_or(0),
        requests: counters["requests"].as_u64().unwrap_or(0),
        cache_hits: counters["cacheHits"].as_u64().unwrap_or(0),
        cpu_ms,
    })
}

/// User + system CPU time of a process, from /proc (Linux), in milliseconds.
fn cpu_time_ms(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    let after_name = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks * 10
}

fn pct(latencies: &[Duration], p: f64) -> f64 {
    latencies[((latencies.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0
}

fn main() -> anyhow::Result<()> {
    let only_default = std::env::args().any(|arg| arg == "--quick");
    // spark-lsp runs with OMP_WAIT_POLICY=PASSIVE unless the environment sets it: the first row is its default.
    let mut configs: Vec<Config> = vec![("idle, Spark's default (passive waits)", vec![], false)];
    if !only_default {
        configs.push(("idle, OMP_WAIT_POLICY=active (spinning)", vec![("OMP_WAIT_POLICY", "ACTIVE")], false));
        configs.push(("one core busy, Spark's default (passive waits)", vec![], true));
        configs.push(("one core busy, OMP_WAIT_POLICY=active (spinning)", vec![("OMP_WAIT_POLICY", "ACTIVE")], true));
        configs.push((
            "idle, no KV reuse and no cache (every request cold)",
            vec![("SPARK_DISABLE_REUSE", "1")],
            false,
        ));
    }
    let mut rows = Vec::new();
    for (label, env, busy) in &configs {
        eprintln!("spark-bench: {label} …");
        rows.push(replay(label, env, *busy)?);
    }
    println!(
        "keystroke → ghost text over stdio, {} keystrokes typed into tests/fixtures/inventory.rs, default model",
        TYPED.chars().count()
    );
    println!();
    println!("| configuration | start → ready | RSS | p50 | p95 | p99 | with a suggestion | no model call | tokens decoded / model call | prompt reused | CPU / keystroke |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut json_rows = Vec::new();
    for row in &rows {
        let n = row.latencies.len().max(1) as f64;
        let model_calls = row.requests.max(1) as f64;
        println!(
            "| {} | {} ms | {} MiB | {:.0} ms | {:.0} ms | {:.0} ms | {} of {} | {:.0}% | {:.1} | {:.1}% | {:.0} ms |",
            row.label,
            row.ready_ms,
            row.rss_mib,
            pct(&row.latencies, 0.5),
            pct(&row.latencies, 0.95),
            pct(&row.latencies, 0.99),
            row.shown,
            row.latencies.len(),
            100.0 * row.cache_hits as f64 / n,
            row.n_decoded as f64 / model_calls,
            100.0 * row.n_reused as f64 / row.n_prompt.max(1) as f64,
            row.cpu_ms as f64 / n,
        );
        json_rows.push(serde_json::json!({
            "configuration": row.label, "readyMs": row.ready_ms, "rssMib": row.rss_mib,
            "p50Ms": pct(&row.latencies, 0.5), "p95Ms": pct(&row.latencies, 0.95), "p99Ms": pct(&row.latencies, 0.99),
            "shown": row.shown, "keystrokes": row.latencies.len(), "cacheHits": row.cache_hits,
            "modelCalls": row.requests, "nDecoded": row.n_decoded, "nPrompt": row.n_prompt, "nReused": row.n_reused,
            "cpuMs": row.cpu_ms,
            "latenciesMs": row.latencies.iter().map(|latency| latency.as_secs_f64() * 1000.0).collect::<Vec<_>>(),
        }));
    }
    let out = workspace_root().join("target/bench");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(out.join("spark-bench.json"), serde_json::to_string_pretty(&json_rows)?);
    if rows.len() > 1 {
        let base = pct(&rows[0].latencies, 0.5);
        println!();
        for row in &rows[1..] {
            println!("median ratio {} / {}: {:.2}", row.label, rows[0].label, pct(&row.latencies, 0.5) / base);
        }
    }
    Ok(())
}
