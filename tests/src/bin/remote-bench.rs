//! `remote-bench`: Spark with its model in process against Spark routed to a real llama.cpp `llama-server`, and
//! the path llama.vim / llama.vscode users take, in one run and one table. llama-server serves the default model
//! with Spark's thread count and context size (built by scripts/build-llama-server.sh when missing).
//!
//! 1. Overhead: `max_tokens = 1` requests through Spark's `RemoteClient` with its persistent pooled connection,
//!    and with a new connection per request (`RemoteClient::new_without_pool`).
//! 2. Ghost text for one typing replay (40 keystrokes typing a line into tests/fixtures/inventory.rs at `$0`; each
//!    keystroke waits for its answer before the next one): the real `spark-lsp` over stdio (didChange +
//!    `textDocument/inlineCompletion`) with the model in process (`inline.route` "local", the default) and with
//!    ghost text routed to llama-server (`inline.route` "remote"); `RemoteClient` alone (the HTTP part of the
//!    remote route, without LSP, context or checks); and llama.vim's way: straight to llama-server's `/infill`
//!    (cache_prompt, not streamed, a new connection per request as with its curl jobs). A model without FIM
//!    tokens cannot use `/infill` (HTTP 501); the bench then sends the same prefix to the native `/completion`
//!    and says so.
//! 3. Spark fix (`workspace/executeCommand` `spark.fix`) over stdio on broken snippets that need the model (the
//!    grammar's own repair does not fix them), with `remote.fix` "local" and "remote".
//!
//! Prints a Markdown table (medians and p95 side by side, notes below) and writes it to target/bench/remote.md.

#[path = "../../../engine/tests/support/llama_server.rs"]
mod llama_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use spark_engine::remote::{RemoteClient, RemoteConfig, RemoteRequest};
use spark_tests::{end_position, workspace_root, LspClient};
use tokio_util::sync::CancellationToken;

/// Threads for both Spark's model and llama-server (the machine has 2 cores).
const THREADS: usize = 2;
/// Spark's default context size, given to llama-server too.
const CONTEXT_SIZE: usize = 4096;
/// Spark's default token budget for ghost text (`inline.maxTokens`), which llama.vim-style requests get too, and a
/// deadline longer than Spark's 225 ms default, so that every path can finish the same suggestions.
const MAX_TOKENS: usize = 48;
const DEADLINE_MS: u64 = 1000;
const MODEL_NAME: &str = "qwen2.5-coder-0.5b";
const N_OVERHEAD: usize = 30;
const N_WARMUP: usize = 3;
const TYPED_LINE: &str = "self.items.get(name).copied().unwrap_or(0)";
const N_KEYSTROKES: usize = 40;
const FIXTURE: &str = include_str!("../../fixtures/inventory.rs");
const GHOST_URI: &str = "file:///bench/src/inventory.rs";
/// Broken snippets from the eval corpus that the grammar's MISSING-token repair cannot fix: every fix runs the
/// model (up to 4 samples within 12 s, Spark's task budget).
const FIX_CASES: [&str; 3] = ["dangling_operator.rs", "dangling_operator.ts", "unclosed_call.rs"];
const FIX_REPEATS: usize = 3;
/// Untimed ghost-text requests before a replay, at most.
const N_WARM_TRIES: usize = 5;

struct Row {
    group: &'static str,
    path: String,
    samples_ms: Vec<f64>,
    n_connects: Option<u64>,
    /// "k of n" answers with text (ghost text) or fixes applied.
    answered: Option<(usize, usize)>,
    note: String,
}

/// One keystroke of the replay: the text before and after the cursor.
struct Keystroke {
    prefix: String,
    suffix: String,
}

fn main() -> Result<()> {
    // spark-lsp re-executes itself with a bounded OpenMP spin (GOMP_SPINCOUNT=20000) unless the environment says
    // otherwise; llama-server gets the same policy, so that rows differ by path, not by wait policy. Set before
    // any thread starts (both inherit it).
    if std::env::var_os("OMP_WAIT_POLICY").is_none() && std::env::var_os("GOMP_SPINCOUNT").is_none() {
        std::env::set_var("GOMP_SPINCOUNT", "20000");
    }
    eprintln!("remote-bench: starting llama-server (builds it on first use)");
    let threads = THREADS.to_string();
    let context_size = CONTEXT_SIZE.to_string();
    let server = llama_server::LlamaServer::start(&["-t", &threads, "-tb", &threads, "-c", &context_size])
        .map_err(|error| anyhow!(error))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let config = RemoteConfig {
        url: server.url.clone(),
        model: MODEL_NAME.to_string(),
        api_key_env: None,
        timeout_ms: 60_000,
        chat: false,
        supports_suffix: false,
    };
    let (before_cursor, after_cursor) = FIXTURE.split_once("$0").context("the fixture has no $0")?;
    let keystrokes: Vec<Keystroke> = (0..=N_KEYSTROKES)
        .map(|n_typed| Keystroke {
            prefix: format!("{before_cursor}{}", &TYPED_LINE[..n_typed]),
            suffix: after_cursor.to_string(),
        })
        .collect();

    let mut rows = Vec::new();
    eprintln!("remote-bench: per-request overhead");
    rows.extend(runtime.block_on(overhead(&config))?);
    rows.extend(keep_alive_overhead(&server.url)?);
    eprintln!("remote-bench: ghost text, Spark in process");
    rows.push(spark_typing("Spark, model in process (inline.route local)", &spark_options(None), &keystrokes)?);
    eprintln!("remote-bench: ghost text, Spark routed to llama-server");
    let remote = json!({"url": server.url, "model": MODEL_NAME, "fix": "local", "tests": "local", "regex": "local"});
    let mut options = spark_options(Some(remote));
    options["inline"]["route"] = json!("remote");
    rows.push(spark_typing("Spark → llama-server (inline.route remote), streamed", &options, &keystrokes)?);
    eprintln!("remote-bench: ghost text, RemoteClient and llama.vim-style");
    rows.push(runtime.block_on(remote_client_typing(&config, &keystrokes))?);
    rows.push(runtime.block_on(llama_vim_typing(&server.url, &keystrokes))?);
    for route in ["local", "remote"] {
        eprintln!("remote-bench: Spark fix, remote.fix {route}");
        let remote = json!({"url": server.url, "model": MODEL_NAME, "fix": route, "tests": "local", "regex": "local"});
        rows.push(spark_fix(route, &spark_options(Some(remote)))?);
    }

    let table = render(&rows);
    print!("{table}");
    let out_dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(out_dir.join("remote.md"), &table)?;
    eprintln!("remote-bench: wrote {}", out_dir.join("remote.md").display());
    drop(server);
    Ok(())
}

/// Spark's defaults, spelled out where the comparison depends on them; `remote` configures the endpoint.
fn spark_options(remote: Option<Value>) -> Value {
    let mut options = json!({
        "model": {"threads": THREADS, "contextSize": CONTEXT_SIZE},
        "inline": {"route": "local", "deadlineMs": DEADLINE_MS, "maxTokens": MAX_TOKENS},
    });
    if let Some(remote) = remote {
        options["remote"] = remote;
    }
    options
}

async fn overhead(config: &RemoteConfig) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
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
            samples_ms.push(elapsed_ms(started));
        }
        rows.push(Row {
            group: "overhead, max_tokens 1",
            path: format!(
                "RemoteClient, {}",
                if pooled { "pooled keep-alive connection" } else { "new connection per request" }
            ),
            samples_ms,
            n_connects: Some(client.counters().n_connects - before),
            answered: None,
            note: String::new(),
        });
    }
    Ok(rows)
}

/// The same one-token request, not streamed (`/completion`), over one kept-alive HTTP/1.1 connection and over a
/// new connection per request: what keep-alive saves where the server keeps the connection open.
fn keep_alive_overhead(url: &str) -> Result<Vec<Row>> {
    let address = url.strip_prefix("http://").context("llama-server's URL is http://host:port")?;
    let body = json!({"prompt": "fn main() {", "n_predict": 1, "cache_prompt": true, "stream": false}).to_string();
    let mut rows = Vec::new();
    for keep_alive in [true, false] {
        let mut client = HttpClient { address: address.to_owned(), keep_alive, stream: None, connects_ms: Vec::new() };
        for _ in 0..N_WARMUP {
            client.post("/completion", &body)?;
        }
        let before = client.connects_ms.len();
        let mut samples_ms = Vec::new();
        for _ in 0..N_OVERHEAD {
            let started = Instant::now();
            let status = client.post("/completion", &body)?;
            samples_ms.push(elapsed_ms(started));
            if status != 200 {
                bail!("/completion answered {status}");
            }
        }
        rows.push(Row {
            group: "overhead, max_tokens 1",
            path: format!(
                "plain HTTP/1.1 /completion, not streamed, {}",
                if keep_alive { "one kept-alive connection" } else { "new connection per request" }
            ),
            samples_ms,
            n_connects: Some((client.connects_ms.len() - before) as u64),
            answered: None,
            note: median(&client.connects_ms[before..])
                .map_or(String::new(), |connect_ms| format!("TCP connect itself: median {connect_ms:.2} ms")),
        });
    }
    Ok(rows)
}

fn median(samples: &[f64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| percentile(&sorted, 0.5))
}

/// A minimal blocking HTTP/1.1 client that counts its connections exactly: with `keep_alive` it reuses one
/// connection for as long as the server keeps it open.
struct HttpClient {
    address: String,
    keep_alive: bool,
    stream: Option<TcpStream>,
    /// How long each connection took to open.
    connects_ms: Vec<f64>,
}

impl HttpClient {
    /// POSTs a JSON body; returns the status after reading the whole response (by its Content-Length).
    fn post(&mut self, path: &str, body: &str) -> Result<u16> {
        let reused = self.stream.is_some();
        match self.exchange(path, body) {
            Ok(status) => Ok(status),
            // The server closed the kept-alive connection meanwhile: one retry on a new connection.
            Err(_) if reused => {
                self.stream = None;
                self.exchange(path, body)
            }
            Err(error) => Err(error),
        }
    }

    fn exchange(&mut self, path: &str, body: &str) -> Result<u16> {
        if self.stream.is_none() {
            let started = Instant::now();
            let stream = TcpStream::connect(&self.address)?;
            self.connects_ms.push(elapsed_ms(started));
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(60)))?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().context("connected above")?;
        let connection = if self.keep_alive { "keep-alive" } else { "close" };
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: {connection}\r\n\r\n{body}",
            self.address,
            body.len()
        )?;
        let mut reader = BufReader::new(&*stream);
        let mut status_line = String::new();
        reader.read_line(&mut status_line)?;
        let status: u16 = status_line.split_whitespace().nth(1).context("no HTTP status line")?.parse()?;
        let (mut content_length, mut server_closes) = (None, false);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                bail!("the connection closed inside the response headers");
            }
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("content-length:") {
                content_length = Some(value.trim().parse::<usize>()?);
            }
            server_closes |= line == "connection: close";
        }
        let mut response_body = vec![0; content_length.context("a response without Content-Length")?];
        reader.read_exact(&mut response_body)?;
        if server_closes || !self.keep_alive {
            self.stream = None;
        }
        Ok(status)
    }
}

/// The typing replay through the real spark-lsp: one didChange per character, then `inlineCompletion` at the
/// cursor, waiting for the answer. One untimed request at the cursor before typing warms whichever model serves.
fn spark_typing(path: &str, options: &Value, keystrokes: &[Keystroke]) -> Result<Row> {
    let remote_routed = options["inline"]["route"] == "remote";
    let mut client = start_spark(if remote_routed { "ghost-remote" } else { "ghost-local" }, options)?;
    let mut text = format!("{}{}", keystrokes[0].prefix, keystrokes[0].suffix);
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": GHOST_URI, "languageId": "rust", "version": 1, "text": text}}),
    )?;
    let mut at = keystrokes[0].prefix.len();
    // Untimed requests at the cursor until one shows text: the serving model's cache then holds the prompt. A
    // cold prompt may miss the deadline, which marks a remote down until its retry time: wait for that too.
    for _ in 0..N_WARM_TRIES {
        wait_remote_up(&mut client)?;
        let response = inline_completion(&mut client, &text[..at])?;
        if response["result"]["items"].as_array().is_some_and(|items| !items.is_empty()) {
            break;
        }
    }
    wait_remote_up(&mut client)?;
    let before = client.request("spark/status", Value::Null, Duration::from_secs(10))?["result"].clone();
    let mut samples_ms = Vec::new();
    let mut n_shown = 0;
    for (version, ch) in (2..).zip(TYPED_LINE.chars().take(N_KEYSTROKES)) {
        let position = end_position(&text[..at]);
        client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": GHOST_URI, "version": version},
                   "contentChanges": [{"range": {"start": position, "end": position}, "text": ch.to_string()}]}),
        )?;
        text.insert(at, ch);
        at += ch.len_utf8();
        let started = Instant::now();
        let response = inline_completion(&mut client, &text[..at])?;
        samples_ms.push(elapsed_ms(started));
        n_shown += usize::from(response["result"]["items"].as_array().is_some_and(|items| !items.is_empty()));
    }
    let after = client.request("spark/status", Value::Null, Duration::from_secs(10))?["result"].clone();
    client.shutdown(Duration::from_secs(30))?;
    let delta = |pointer: &str| {
        after.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
            - before.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
    };
    let n_at_deadline = samples_ms.iter().filter(|ms| **ms >= DEADLINE_MS as f64).count();
    let note = if remote_routed {
        format!(
            "{n_at_deadline} answered at the deadline; {} requests reached llama-server, {} of them failed or \
             missed the deadline without text (each marks it down until a retry)",
            delta("/remote/requests"),
            delta("/remote/failures")
        )
    } else {
        format!(
            "{n_at_deadline} answered at the deadline; {} answered from the typed-ahead cache, no model call",
            delta("/counters/cacheHits")
        )
    };
    Ok(Row {
        group: "ghost text, typing replay",
        path: path.to_owned(),
        samples_ms,
        n_connects: remote_routed.then(|| delta("/remote/connections")),
        answered: Some((n_shown, N_KEYSTROKES)),
        note,
    })
}

/// spark-lsp with these initializationOptions, its log in target/bench/remote-bench-{name}.log, model ready.
fn start_spark(name: &str, options: &Value) -> Result<LspClient> {
    let log = workspace_root().join(format!("target/bench/remote-bench-{name}.log"));
    std::fs::create_dir_all(workspace_root().join("target/bench"))?;
    let mut client = LspClient::start(&[("SPARK_LOG", "info,llama-cpp-2=warn")], Some(&log))?;
    client.initialize(options.clone())?;
    client.wait_model_ready(Duration::from_secs(120))?;
    Ok(client)
}

/// Waits while spark-lsp skips its remote endpoint (until the retry time it set; then the next request probes
/// it); no-op without a remote.
fn wait_remote_up(client: &mut LspClient) -> Result<()> {
    let started = Instant::now();
    loop {
        let status = client.request("spark/status", Value::Null, Duration::from_secs(10))?;
        let remote = &status["result"]["remote"];
        if remote["health"] != "down" || remote["retryInMs"] == 0 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the remote endpoint stayed down: {status}");
        }
        // Polling the server's own health state, not a timing assumption.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn inline_completion(client: &mut LspClient, before_cursor: &str) -> Result<Value> {
    let response = client.request(
        "textDocument/inlineCompletion",
        json!({"textDocument": {"uri": GHOST_URI}, "position": end_position(before_cursor),
               "context": {"triggerKind": 2}}),
        Duration::from_secs(60),
    )?;
    if response.get("error").is_some() {
        bail!("inlineCompletion failed: {response}");
    }
    Ok(response)
}

/// The HTTP part of the remote route alone: the prefix to `/v1/completions`, streamed, pooled, Spark's budget.
async fn remote_client_typing(config: &RemoteConfig, keystrokes: &[Keystroke]) -> Result<Row> {
    let client = RemoteClient::new(config.clone())?;
    client.warm().await?;
    complete(&client, &keystrokes[0].prefix, MAX_TOKENS, &["\n"]).await?;
    let before = client.counters().n_connects;
    let mut samples_ms = Vec::new();
    let mut n_answered = 0;
    for keystroke in &keystrokes[1..] {
        let started = Instant::now();
        let text = complete(&client, &keystroke.prefix, MAX_TOKENS, &["\n"]).await?;
        samples_ms.push(elapsed_ms(started));
        n_answered += usize::from(!text.trim().is_empty());
    }
    Ok(Row {
        group: "ghost text, typing replay",
        path: "RemoteClient alone, /v1/completions, streamed, pooled".to_string(),
        samples_ms,
        n_connects: Some(client.counters().n_connects - before),
        answered: Some((n_answered, N_KEYSTROKES)),
        note: "no LSP, context building, checks or deadline".to_string(),
    })
}

/// llama.vim's way: one non-streamed request per keystroke on a new connection, cache_prompt on.
async fn llama_vim_typing(url: &str, keystrokes: &[Keystroke]) -> Result<Row> {
    let fresh = reqwest::Client::builder().pool_max_idle_per_host(0).no_proxy().build()?;
    let infill_supported = post(&fresh, url, "/infill", &infill_body(&keystrokes[0])).await?.0 != 501;
    let (endpoint, note) = if infill_supported {
        ("/infill", String::new())
    } else {
        (
            "/completion",
            "/infill answered 501 (the model has no FIM tokens): the prefix went to /completion".to_string(),
        )
    };
    let body_for = |keystroke: &Keystroke| {
        if infill_supported {
            infill_body(keystroke)
        } else {
            json!({"prompt": keystroke.prefix, "n_predict": MAX_TOKENS, "cache_prompt": true, "stop": ["\n"],
                   "stream": false, "temperature": 0.0})
        }
    };
    post(&fresh, url, endpoint, &body_for(&keystrokes[0])).await?;
    let mut samples_ms = Vec::new();
    let mut n_answered = 0;
    for keystroke in &keystrokes[1..] {
        let started = Instant::now();
        let (status, answer) = post(&fresh, url, endpoint, &body_for(keystroke)).await?;
        samples_ms.push(elapsed_ms(started));
        if status != 200 {
            bail!("{endpoint} answered {status}: {answer}");
        }
        n_answered += usize::from(answer["content"].as_str().is_some_and(|content| !content.trim().is_empty()));
    }
    Ok(Row {
        group: "ghost text, typing replay",
        path: format!("llama.vim-style: llama-server {endpoint}, cache_prompt, not streamed, new connection"),
        samples_ms,
        n_connects: Some(N_KEYSTROKES as u64),
        answered: Some((n_answered, N_KEYSTROKES)),
        note,
    })
}

/// The request llama.vim sends (trimmed to what matters here: no extra context chunks), with Spark's budget.
fn infill_body(keystroke: &Keystroke) -> Value {
    // llama.vim splits the current line off as `prompt`; the rest of the prefix is `input_prefix`.
    let prefix = &keystroke.prefix;
    let line_start = prefix.rfind('\n').map_or(0, |newline| newline + 1);
    json!({
        "input_prefix": prefix[..line_start],
        "prompt": prefix[line_start..],
        "input_suffix": keystroke.suffix,
        "n_predict": MAX_TOKENS,
        "stop": ["\n"],
        "cache_prompt": true,
        "stream": false,
        "temperature": 0.0,
    })
}

/// `spark.fix` as an editor runs it from the code-action menu without resolve support: `workspace/executeCommand`
/// at the error, answered after the verified edit went out through `workspace/applyEdit`.
fn spark_fix(route: &str, options: &Value) -> Result<Row> {
    let cases: Vec<(String, String, Value, &str)> = FIX_CASES
        .iter()
        .map(|name| {
            let source = std::fs::read_to_string(workspace_root().join("tests/eval/fix").join(name))
                .with_context(|| format!("reading tests/eval/fix/{name}"))?;
            let (before, after) = source.split_once("$0").with_context(|| format!("{name} has no $0"))?;
            let language = if name.ends_with(".ts") { "typescript" } else { "rust" };
            Ok((format!("file:///bench/fix/{name}"), format!("{before}{after}"), end_position(before), language))
        })
        .collect::<Result<_>>()?;
    let mut client = start_spark(&format!("fix-{route}"), options)?;
    for (uri, text, _, language) in &cases {
        client.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}}),
        )?;
    }
    let run = |client: &mut LspClient, (uri, _, position, _): &(String, String, Value, &str)| {
        let response = client.request(
            "workspace/executeCommand",
            json!({"command": "spark.fix", "arguments": [{"uri": uri, "range": {"start": position, "end": position}}]}),
            Duration::from_secs(120),
        )?;
        if response.get("error").is_some() {
            bail!("spark.fix failed: {response}");
        }
        Ok(response["result"]["applied"] == true)
    };
    // One untimed fix warms the serving model's cache with the few-shot prompt, as after the first use.
    run(&mut client, &cases[0])?;
    wait_remote_up(&mut client)?;
    let before = client.request("spark/status", Value::Null, Duration::from_secs(10))?["result"].clone();
    let mut samples_ms = Vec::new();
    let mut n_applied = 0;
    for _ in 0..FIX_REPEATS {
        for case in &cases {
            let started = Instant::now();
            n_applied += usize::from(run(&mut client, case)?);
            samples_ms.push(elapsed_ms(started));
        }
    }
    let after = client.request("spark/status", Value::Null, Duration::from_secs(10))?["result"].clone();
    client.shutdown(Duration::from_secs(30))?;
    let delta = |pointer: &str| {
        after.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
            - before.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
    };
    let n_fixes = samples_ms.len();
    Ok(Row {
        group: "Spark fix, spark.fix command",
        path: format!("remote.fix {route}: {}", if route == "local" { "model in process" } else { "llama-server" }),
        answered: Some((n_applied, n_fixes)),
        n_connects: (route == "remote").then(|| delta("/remote/connections")),
        note: format!(
            "{} snippets × {FIX_REPEATS}; model calls: {} in process, {} to llama-server",
            FIX_CASES.len(),
            delta("/counters/requests"),
            delta("/remote/requests")
        ),
        samples_ms,
    })
}

async fn complete(client: &RemoteClient, prompt: &str, max_tokens: usize, stop: &[&str]) -> Result<String> {
    let request = RemoteRequest {
        prompt: prompt.to_string(),
        suffix: None,
        system: None,
        stop: stop.iter().map(|stop| stop.to_string()).collect(),
        max_tokens,
        temperature: 0.0,
        seed: Some(1),
        deadline: Instant::now() + Duration::from_secs(60),
        rules: None,
    };
    let counters = client.counters();
    let answer = client.complete(request, CancellationToken::new()).await;
    answer.map(|answer| answer.text).map_err(|error| anyhow!("{error} (after {counters:?})"))
}

async fn post(client: &reqwest::Client, base: &str, path: &str, body: &Value) -> Result<(u16, Value)> {
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

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn render(rows: &[Row]) -> String {
    let mut table = format!(
        "Spark local vs remote and llama.vim's path (`remote-bench`): llama-server on 127.0.0.1 with the default \
         model, `-t {THREADS} -tb {THREADS} -c {CONTEXT_SIZE}`; spark-lsp with `model.threads` {THREADS}.\n\n\
         | measure | path | n | p50 ms | p95 ms | p50 vs the measure's first row | connections opened | with text / applied | note |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|\n"
    );
    let mut baseline: Option<(&str, f64)> = None;
    for row in rows {
        let mut sorted = row.samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let p50 = percentile(&sorted, 0.5);
        let base = match baseline {
            Some((group, base)) if group == row.group => base,
            _ => {
                baseline = Some((row.group, p50));
                p50
            }
        };
        let connects = row.n_connects.map_or("-".to_string(), |n| n.to_string());
        let answered = row.answered.map_or("-".to_string(), |(k, n)| format!("{k} of {n}"));
        table += &format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.2}x | {} | {} | {} |\n",
            row.group,
            row.path,
            sorted.len(),
            p50,
            percentile(&sorted, 0.95),
            p50 / base.max(0.001),
            connects,
            answered,
            row.note
        );
    }
    table += &format!(
        "\n\
- overhead: a one-token answer from a short cached prompt. `RemoteClient` streams, as Spark does; llama-server \
closes the connection after every streamed answer, so the pooled client opens one per request as well (the \
connections column) and both rows pay the same set-up. The plain HTTP/1.1 rows send the same request unstreamed, \
where llama-server keeps the connection open: their difference is what a TCP connection costs per request \
over loopback (the TCP connect itself is in the note).\n\
- ghost text: the same {N_KEYSTROKES} keystrokes (`{TYPED_LINE}` typed into tests/fixtures/inventory.rs), each \
waiting for its answer; every path first warms its model's cache with untimed requests at the cursor (Spark's \
rows: until one shows text). Budgets: {MAX_TOKENS} tokens; RemoteClient alone and llama.vim-style stop at the end \
of the line; Spark decides line or block from the cursor and stops at its {DEADLINE_MS} ms deadline (keeping what \
arrived), the others have no such cut. Spark rows are measured at the editor's side of stdio and include LSP, context building and the syntax check; Spark's prompt adds a header \
(path, imports), the other rows send the plain prefix.\n\
- Both Spark rows answer a keystroke without a model call when the user typed the start of the shown suggestion \
(the typed-ahead cache sits in front of either route), and apply the same stop rules (end of line, dedent, line \
count) as tokens arrive — streamed from llama-server, the stream is closed as soon as a rule fires.\n\
- llama.vim-style: what llama.vim / llama.vscode send per keystroke, without their client-side cache or extra \
context chunks; one connection per request, as with curl.\n\
- Spark fix: `workspace/executeCommand spark.fix` at the error, answered after the verified edit went out through \
`workspace/applyEdit`; snippets {} from tests/eval/fix need the model (the grammar's repair does not fix them); \
each runs up to 4 samples (greedy, then seeded temperatures) within 12 s until one verifies. The first sample is \
greedy on both backends; the seeded ones come from different samplers (Spark's, and llama-server's own chain), \
so which fixes verify may differ.\n\
- Both spark-lsp and llama-server run with the same bounded OpenMP spin (`GOMP_SPINCOUNT=20000`, spark-lsp's \
default; the bench sets it for llama-server unless `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT` is set), so that rows \
differ by path, not by wait policy.\n\
- One run on a shared 2-core machine: other processes compete for the cores, so numbers are noisy.\n",
        FIX_CASES.join(", ")
    );
    table
}
