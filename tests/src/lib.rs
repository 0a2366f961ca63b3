//! A minimal LSP client that drives the real `spark-lsp` binary over stdio, as an editor would: framed
//! JSON-RPC, answers to server-initiated requests, and notifications kept for inspection.

pub mod eval;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// The binary under test: `SPARK_LSP_BIN`, else the workspace's release build.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SPARK_LSP_BIN").filter(|value| !value.is_empty()) {
        return PathBuf::from(path);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/spark-lsp")
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Model-running tests take this lock: two llama.cpp processes on two cores spin against each other and
/// both slow down many times over (ggml's barriers spin), which would make every test a timing lottery.
pub fn model_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub struct LspClient {
    pub child: Child,
    _model_lock: std::sync::MutexGuard<'static, ()>,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
    /// Notifications and server requests seen so far, in order.
    pub seen: Vec<Value>,
    pub started: Instant,
}

impl LspClient {
    /// Starts the server with extra environment variables; its stderr goes to `stderr_path` when given.
    pub fn start(env: &[(&str, &str)], stderr_path: Option<&std::path::Path>) -> Result<LspClient> {
        let mut command = Command::new(server_binary());
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        match stderr_path {
            Some(path) => command.stderr(std::fs::File::create(path)?),
            None => command.stderr(Stdio::null()),
        };
        for (key, value) in env {
            command.env(key, value);
        }
        let model_lock = model_lock();
        let started = Instant::now();
        let mut child = command.spawn().with_context(|| format!("starting {}", server_binary().display()))?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (sender, incoming) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Ok(Some(message)) = read_message(&mut reader) {
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        Ok(LspClient { child, _model_lock: model_lock, stdin, incoming, next_id: 1, seen: Vec::new(), started })
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stdin.write_all(bytes)?;
        self.stdin.flush()?;
        Ok(())
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let body = serde_json::to_string(message)?;
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes())
    }

    pub fn notify(&mut self, method: &str, mut params: Value) -> Result<()> {
        if method == "workspace/didChangeConfiguration" {
            if let Some(settings) = params.get_mut("settings") {
                without_strong_tier(settings);
            }
        }
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Sends a request and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, mut params: Value) -> Result<i64> {
        if method == "initialize" {
            if let Some(options) = params.get_mut("initializationOptions") {
                without_strong_tier(options);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    /// Sends a request and waits for its response (the whole message, with `result` or `error`).
    pub fn request(&mut self, method: &str, params: Value, timeout: Duration) -> Result<Value> {
        let id = self.send_request(method, params)?;
        self.wait_response(id, timeout)
    }

    pub fn wait_response(&mut self, id: i64, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let message = self.next_message(deadline)?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return Ok(message);
            }
            self.handle_other(message)?;
        }
    }

    /// Receives until `deadline`: returns the responses that arrived, each with when it arrived; notifications
    /// and server requests are handled as `wait_for` does. For load tests that send and receive at once.
    pub fn receive_until(&mut self, deadline: Instant) -> Result<Vec<(Instant, Value)>> {
        let mut responses = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.incoming.recv_timeout(left) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => return Ok(responses),
                Err(RecvTimeoutError::Disconnected) => bail!("the server closed its output"),
            };
            if message.get("id").is_some() && message.get("method").is_none() {
                responses.push((Instant::now(), message));
            } else {
                self.handle_other(message)?;
            }
            if Instant::now() >= deadline {
                return Ok(responses);
            }
        }
    }

    /// Waits for a notification (or server request) with `method` whose message satisfies `accept`.
    pub fn wait_for(&mut self, method: &str, timeout: Duration, accept: impl Fn(&Value) -> bool) -> Result<Value> {
        if let Some(found) = self.seen.iter().find(|message| message["method"] == method && accept(message)) {
            return Ok(found.clone());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let message = self.next_message(deadline).with_context(|| format!("waiting for {method}"))?;
            let matches = message["method"] == method && accept(&message);
            self.handle_other(message.clone())?;
            if matches {
                return Ok(message);
            }
        }
    }

    fn next_message(&mut self, deadline: Instant) -> Result<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.incoming.recv_timeout(left) {
            Ok(message) => Ok(message),
            Err(RecvTimeoutError::Timeout) => bail!("timed out waiting for the server"),
            Err(RecvTimeoutError::Disconnected) => bail!("the server closed its output"),
        }
    }

    /// Records notifications; answers server requests as a plain editor would.
    fn handle_other(&mut self, message: Value) -> Result<()> {
        if let (Some(id), Some(method)) = (message.get("id").cloned(), message.get("method").and_then(Value::as_str)) {
            let result = match method {
                "workspace/configuration" => json!([]),
                "workspace/applyEdit" => json!({"applied": true}),
                _ => Value::Null,
            };
            self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))?;
        }
        self.seen.push(message);
        Ok(())
    }

    /// initialize + initialized, with the given initializationOptions.
    pub fn initialize(&mut self, options: Value) -> Result<Value> {
        let params = json!({
            "processId": std::process::id(),
            "rootUri": null,
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "window": {"workDoneProgress": true},
                "textDocument": {"inlineCompletion": {"dynamicRegistration": false}},
            },
            "initializationOptions": options,
        });
        let response = self.request("initialize", params, Duration::from_secs(10))?;
        self.notify("initialized", json!({}))?;
        Ok(response)
    }

    /// Waits until `spark/statusChanged` says the model is ready (or failed: an error).
    pub fn wait_model_ready(&mut self, timeout: Duration) -> Result<Value> {
        let status = self.wait_for("spark/statusChanged", timeout, |message| {
            matches!(message["params"]["state"].as_str(), Some("ready" | "failed"))
        })?;
        if status["params"]["state"] != "ready" {
            bail!("model failed: {}", status["params"]["message"]);
        }
        Ok(status)
    }

    /// shutdown + exit; returns the exit status.
    pub fn shutdown(mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let response = self.request("shutdown", Value::Null, timeout)?;
        if response.get("error").is_some() {
            bail!("shutdown failed: {response}");
        }
        self.notify("exit", Value::Null)?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err(anyhow!("the server did not exit after `exit`"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory of the server process, in KiB (Linux).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_message(reader: &mut impl BufRead) -> Result<Option<Value>> {
    let mut content_length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            content_length = Some(value.trim().parse::<usize>()?);
        }
    }
    let length = content_length.context("message without Content-Length")?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some(serde_json::from_slice(&body)?))
}

/// Position (UTF-16) of the end of `text`, as LSP counts it.
/// Applies LSP text edits (positions in UTF-16 code units, as the test clients negotiate) to `text`, the last
/// first so that earlier offsets stay valid.
pub fn apply_edits(text: &str, edits: &[Value]) -> String {
    let offset = |position: &Value| {
        let line = position["line"].as_u64().unwrap_or(0) as usize;
        let character = position["character"].as_u64().unwrap_or(0) as usize;
        let line_start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        let mut units = 0;
        for (idx, ch) in text[line_start..].char_indices() {
            if units >= character || ch == '\n' {
                return line_start + idx;
            }
            units += ch.len_utf16();
        }
        text.len()
    };
    let mut edits: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|edit| {
            let new_text = edit["newText"].as_str().unwrap_or_default().to_owned();
            (offset(&edit["range"]["start"]), offset(&edit["range"]["end"]), new_text)
        })
        .collect();
    edits.sort_by_key(|edit| std::cmp::Reverse(edit.0));
    let mut out = text.to_owned();
    for (start, end, new_text) in edits {
        out.replace_range(start..end, &new_text);
    }
    out
}

pub fn end_position(text: &str) -> Value {
    let line = text.matches('\n').count();
    let last = text.rsplit('\n').next().unwrap_or("");
    json!({"line": line, "character": last.encode_utf16().count()})
}

/// A unique scratch directory for one test.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spark-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

/// Unless the settings say otherwise, tasks get no strong tier: a test's outcome must not depend on which other
/// models happen to be installed on the machine (the strong tier's `auto` takes any installed Qwen2.5-Coder).
fn without_strong_tier(options: &mut Value) {
    if options.is_null() {
        *options = json!({});
    }
    let settings = match options.get_mut("spark") {
        Some(nested) => nested,
        None => options,
    };
    if let Some(object) = settings.as_object_mut() {
        let tasks = object.entry("tasks").or_insert_with(|| json!({}));
        if let Some(tasks) = tasks.as_object_mut() {
            tasks.entry("strongModel").or_insert_with(|| json!("none"));
        }
    }
}
