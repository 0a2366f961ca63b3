//! `remote-bench`: what the remote backend costs per request over loopback, against a real llama.cpp
//! `llama-server` serving the default model (built by scripts/build-llama-server.sh when missing).
//!
//! 1. Overhead: `max_tokens = 1` requests through `RemoteClient` with its persistent pooled connection, and with a
//!    new connection per request (`RemoteClient::new_without_pool`).
//! 2. A typing replay (40 keystrokes typing a line into tests/fixtures/inventory.rs at `$0`, prompt = the text
//!    before the cursor, 16 tokens, stop at newline): through `RemoteClient` (`/v1/completions`, streamed, pooled),
//!    and the way llama.vim does it: straight to llama-server's `/infill` (input_prefix/input_suffix, cache_prompt,
//!    not streamed, a new connection per request as with its curl jobs). A model without FIM tokens cannot use
//!    `/infill` (HTTP 501); the bench then sends the same prefix to the native `/completion` and says so.
//!
//! Prints a Markdown table (medians side by side) and writes it to target/bench/remote.md.

#[path = "../../tests/support/llama_server.rs"]
mod llama_server;

use std::error::Error;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spark_engine::remote::{RemoteClient, RemoteConfig, RemoteRequest};
use tokio_util::sync::CancellationToken;

const N_OVERHEAD: usize = 30;
const N_WARMUP: usize = 3;
const TYPED_LINE: &str = "self.items.get(name).copied().unwrap_or(0)";
const N_KEYSTROKES: usize = 40;
const FIXTURE: &str = include_str!("../../../tests/fixtures/inventory.rs");

struct Row {
    path: String,
    samples_ms: Vec<f64>,
    n_connects: Option<u64>,
    note: String,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    eprintln!("remote-bench: starting llama-server (builds it on first use)");
    let server = tokio::task::spawn_blocking(|| llama_server::LlamaServer::start(&[])).await??;
    let config = RemoteConfig {
        url: server.url.clone(),
        model: "gemma-3-270m".to_string(),
        api_key_env: None,
        timeout_ms: 60_000,
        chat: false,
        supports_suffix: false,
    };
    let mut rows = Vec::new();

    // 1. Per-request overhead: one token from a short, cached prompt.
    for pooled in [true, false] {
        let client =
            if pooled { RemoteClient::new(config.clone())? } else { RemoteClient::new_without_pool(config.clone())? };
        client.warm().await?;
        for _ in 0..N_WARMUP {
            complete(&client, "fn main() {", 1, &[]).await?;
        }
        let before = client.counters().n_connects;
        let mut samples_ms = Vec::new();
        for _ in 0..N_OVERHEAD {
            let started = Instant::now();
            complete(&client, "fn main() {", 1, &[]).await?;
            samples_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        rows.push(Row {
            path: format!(
                "overhead, max_tokens 1: RemoteClient, {}",
                if pooled { "pooled keep-alive connection" } else { "new connection per request" }
            ),
            samples_ms,
            n_connects: Some(client.counters().n_connects - before),
            note: String::new(),
        });
    }

    // 2. The typing replay.
    let (before_cursor, after_cursor) = FIXTURE.split_once("$0").ok_or("the fixture has no $0")?;
    let keystrokes: Vec<(String, String)> = (1..=N_KEYSTROKES)
        .map(|n_typed| (format!("{before_cursor}{}", &TYPED_LINE[..n_typed]), after_cursor.to_string()))
        .collect();

    let client = RemoteClient::new(config.clone())?;
    client.warm().await?;
    complete(&client, &keystrokes[0].0, 16, &["\n"]).await?;
    let before = client.counters().n_connects;
    let mut samples_ms = Vec::new();
    let mut n_empty = 0;
    for (prefix, _suffix) in &keystrokes {
        let started = Instant::now();
        let text = complete(&client, prefix, 16, &["\n"]).await?;
        samples_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        n_empty += usize::from(text.trim().is_empty());
    }
    rows.push(Row {
        path: "typing replay: RemoteClient /v1/completions, streamed, pooled".to_string(),
        samples_ms,
        n_connects: Some(client.counters().n_connects - before),
        note: format!("{n_empty} of {N_KEYSTROKES} answers empty"),
    });

    let fresh = reqwest::Client::builder().pool_max_idle_per_host(0).no_proxy().build()?;
    let infill_supported = post(&fresh, &server.url, "/infill", &infill_body(&keystrokes[0])).await?.0 != 501;
    let (endpoint, note) = if infill_supported {
        ("/infill", String::new())
    } else {
        ("/completion", "/infill answered 501: the model has no FIM tokens; prefix sent to /completion".to_string())
    };
    let body_for = |keystroke: &(String, String)| {
        if infill_supported {
            infill_body(keystroke)
        } else {
            json!({"prompt": keystroke.0, "n_predict": 16, "cache_prompt": true, "stop": ["\n"], "stream": false,
                   "temperature": 0.0})
        }
    };
    post(&fresh, &server.url, endpoint, &body_for(&keystrokes[0])).await?;
    let mut samples_ms = Vec::new();
    for keystroke in &keystrokes {
        let started = Instant::now();
        let (status, _) = post(&fresh, &server.url, endpoint, &body_for(keystroke)).await?;
        samples_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        if status != 200 {
            return Err(format!("{endpoint} answered {status}").into());
        }
    }
    rows.push(Row {
        path: format!("typing replay: llama.vim-style {endpoint}, cache_prompt, not streamed, new connection"),
        samples_ms,
        n_connects: None,
        note,
    });

    let table = render(&rows);
    print!("{table}");
    let out_dir = llama_server::workspace_root().join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(out_dir.join("remote.md"), &table)?;
    eprintln!("remote-bench: wrote {}", out_dir.join("remote.md").display());
    drop(server);
    Ok(())
}

async fn complete(
    client: &RemoteClient,
    prompt: &str,
    max_tokens: usize,
    stop: &[&str],
) -> Result<String, Box<dyn Error>> {
    let request = RemoteRequest {
        prompt: prompt.to_string(),
        suffix: None,
        system: None,
        stop: stop.iter().map(|stop| stop.to_string()).collect(),
        max_tokens,
        temperature: 0.0,
        seed: Some(1),
        deadline: Instant::now() + Duration::from_secs(60),
    };
    let counters = client.counters();
    let answer = client.complete(request, CancellationToken::new()).await;
    answer.map(|answer| answer.text).map_err(|error| format!("{error} (after {counters:?})").into())
}

/// The request llama.vim sends (trimmed to what matters here: no extra context chunks).
fn infill_body((prefix, suffix): &(String, String)) -> Value {
    // llama.vim splits the current line off as `prompt`; the rest of the prefix is `input_prefix`.
    let line_start = prefix.rfind('\n').map_or(0, |newline| newline + 1);
    json!({
        "input_prefix": prefix[..line_start],
        "prompt": prefix[line_start..],
        "input_suffix": suffix,
        "n_predict": 16,
        "stop": ["\n"],
        "cache_prompt": true,
        "stream": false,
        "temperature": 0.0,
    })
}

async fn post(client: &reqwest::Client, base: &str, path: &str, body: &Value) -> Result<(u16, Value), Box<dyn Error>> {
    let response = client
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(Duration::from_secs(60))
        .send()
        .await?;
    let status = response.status().as_u16();
    let value = serde_json::from_slice(&response.bytes().await?).unwrap_or(Value::Null);
    Ok((status, value))
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn render(rows: &[Row]) -> String {
    let mut table = String::from(
        "## remote-bench: llama-server on 127.0.0.1, default model, -t 2 -c 2048\n\n\
         | path | n | p50 ms | p95 ms | p50 vs first row | connections opened | note |\n\
         |---|---:|---:|---:|---:|---:|---|\n",
    );
    let mut baseline = None;
    for row in rows {
        let mut sorted = row.samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let p50 = percentile(&sorted, 0.5);
        let baseline = *baseline.get_or_insert(p50);
        let connects = row.n_connects.map_or("-".to_string(), |n| n.to_string());
        table += &format!(
            "| {} | {} | {:.2} | {:.2} | {:.2}x | {} | {} |\n",
            row.path,
            sorted.len(),
            p50,
            percentile(&sorted, 0.95),
            p50 / baseline,
            connects,
            row.note
        );
    }
    table
}
