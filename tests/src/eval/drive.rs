//! Spark driven as an editor drives it: the real `spark-lsp` binary over stdio ([`crate::LspClient`]), ghost
//! text replayed as typing (every keystroke waits for its answer), tasks run as `workspace/executeCommand`
//! (`spark.fix`, `spark.generateTests`, `spark.generateRegex`) whose `workspace/applyEdit` the harness applies.
//! Next-edit cases are one incremental `didChange` followed by `spark/nextEdit`. A server that crashes or does not
//! answer in time is recorded as such and started again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::LspClient;

pub const KEYSTROKE_TIMEOUT: Duration = Duration::from_secs(30);
pub const TASK_TIMEOUT: Duration = Duration::from_secs(90);

/// A running server with one model.
pub struct Server {
    client: Option<LspClient>,
    model: Option<PathBuf>,
    /// Settings the run sets besides the model (merged into `initializationOptions`), e.g.
    /// `{"inline": {"minConfidence": 0.2}}`.
    settings: Value,
    stderr: PathBuf,
    versions: HashMap<String, i32>,
    pub restarts: usize,
}

/// What one request gave.
pub enum Answer<T> {
    Got(T),
    /// The server crashed or did not answer in time (it is restarted for the next request).
    CrashOrTimeout(String),
    /// The server answered with an error (its message): not a suggestion, and not nothing shown either — the
    /// report gives it its own column. Only inline completions report it (commands carry errors in their reply).
    Error(String),
}

impl Server {
    pub fn start(model: Option<&Path>, settings: &Value, stderr: PathBuf) -> Result<Server> {
        let mut server = Server {
            client: None,
            model: model.map(Path::to_path_buf),
            settings: settings.clone(),
            stderr,
            versions: HashMap::new(),
            restarts: 0,
        };
        server.ensure()?;
        Ok(server)
    }

    fn ensure(&mut self) -> Result<&mut LspClient> {
        if self.client.is_none() {
            let mut client = LspClient::start(&[], Some(&self.stderr))?;
            let mut options = match self.settings.clone() {
                Value::Object(settings) => Value::Object(settings),
                _ => json!({}),
            };
            if let Some(model) = &self.model {
                options["model"]["path"] = json!(model);
            }
            // As VS Code's and Neovim's Spark plugins do: a suggestion the deadline cut is announced when ready
            // (the per-pause replay waits for it; requests are answered the same either way).
            if options["inline"].get("notifyReady").is_none() {
                options["inline"]["notifyReady"] = json!(true);
            }
            client.initialize(options)?;
            client.wait_model_ready(Duration::from_secs(600)).context("loading the model")?;
            self.versions.clear();
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("just started"))
    }

    fn lost(&mut self, why: String) -> Answer<Value> {
        if let Some(client) = self.client.take() {
            drop(client);
        }
        self.restarts += 1;
        Answer::CrashOrTimeout(why)
    }

    /// Opens (or replaces) the document at `uri` with `text`.
    pub fn set_text(&mut self, uri: &str, language_id: &str, text: &str) -> Result<()> {
        let version = self.versions.get(uri).copied();
        let client = self.ensure()?;
        match version {
            None => client.notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}}),
            )?,
            Some(version) => client.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [{"text": text}]}),
            )?,
        }
        self.versions.insert(uri.to_owned(), version.unwrap_or(0) + 1);
        Ok(())
    }

    /// Replaces bytes `start..end` of `text` (the open document's text) by `new_text`, as one incremental
    /// `didChange` (UTF-16 positions: the only encoding the harness offers).
    pub fn change(&mut self, uri: &str, text: &str, start: usize, end: usize, new_text: &str) -> Result<()> {
        let version = self.version(uri).context("the document is open")?;
        let (start_line, start_character) = position(text, start);
        let (end_line, end_character) = position(text, end);
        let client = self.ensure()?;
        client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [{
                "range": {"start": {"line": start_line, "character": start_character},
                          "end": {"line": end_line, "character": end_character}},
                "text": new_text,
            }]}),
        )?;
        self.versions.insert(uri.to_owned(), version + 1);
        Ok(())
    }

    /// `spark/nextEdit` at `position`: the whole response (`result` or `error`).
    pub fn next_edit(&mut self, uri: &str, line: u32, character: u32) -> Result<Answer<Value>> {
        self.version(uri).context("the document is open")?;
        let client = self.ensure()?;
        let params = json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}});
        match client.request("spark/nextEdit", params, KEYSTROKE_TIMEOUT) {
            Ok(response) => {
                if std::env::var_os("SPARK_EVAL_DEBUG").is_some() {
                    eprintln!("nextEdit {line}:{character} → {response}");
                }
                Ok(Answer::Got(response))
            }
            Err(error) => Ok(self.lost(error.to_string())),
        }
    }

    pub fn close(&mut self, uri: &str) -> Result<()> {
        if self.versions.remove(uri).is_some() {
            if let Some(client) = self.client.as_mut() {
                client.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}))?;
            }
        }
        Ok(())
    }

    pub fn version(&self, uri: &str) -> Option<i32> {
        self.versions.get(uri).copied()
    }

    /// The first inline suggestion at `position` (empty when none).
    pub fn inline(&mut self, uri: &str, line: u32, character: u32) -> Result<Answer<String>> {
        self.version(uri).context("the document is open")?;
        let client = self.ensure()?;
        let params = json!({
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 2},
        });
        let response = match client.request("textDocument/inlineCompletion", params, KEYSTROKE_TIMEOUT) {
            Ok(response) => response,
            Err(error) => return Ok(self.lost(error.to_string()).map(|_| String::new())),
        };
        if std::env::var_os("SPARK_EVAL_DEBUG").is_some() {
            eprintln!("inlineCompletion {line}:{character} → {response}");
        }
        if let Some(error) = response.get("error") {
            let message = error["message"].as_str().unwrap_or("(no message)").to_owned();
            return Ok(Answer::Error(message));
        }
        Ok(Answer::Got(first_insert_text(&response)))
    }

    /// Sends an inline-completion request at `position` without waiting (as an editor does at each keystroke);
    /// its id.
    pub fn send_inline(&mut self, uri: &str, line: u32, character: u32) -> Result<i64> {
        let client = self.ensure()?;
        let params = json!({
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 2},
        });
        client.send_request("textDocument/inlineCompletion", params)
    }

    /// Cancels request `id` (`$/cancelRequest`, as an editor does when the user types on).
    pub fn cancel(&mut self, id: i64) -> Result<()> {
        self.ensure()?.notify("$/cancelRequest", json!({"id": id}))
    }

    /// Lets `duration` pass as the user types (messages are taken in, answers to earlier requests dropped).
    pub fn idle(&mut self, duration: Duration) -> Result<()> {
        self.ensure()?.receive_until(std::time::Instant::now() + duration).map(|_| ())
    }

    /// The first suggestion visible at `position` before `deadline`, as a client that set `inline.notifyReady`
    /// sees it: the answer to its last request (`id`), else — when that came back empty — the answer to the
    /// request it sends when the server says the suggestion there is ready. `None`: nothing visible in time.
    pub fn visible_by(
        &mut self,
        uri: &str,
        id: i64,
        (line, character): (u32, u32),
        deadline: std::time::Instant,
    ) -> Result<Option<String>> {
        let version = self.version(uri).context("the document is open")?;
        let left = |deadline: std::time::Instant| deadline.saturating_duration_since(std::time::Instant::now());
        let client = self.ensure()?;
        let Ok(response) = client.wait_response(id, left(deadline)) else { return Ok(None) };
        let first = first_insert_text(&response);
        if !first.trim().is_empty() {
            return Ok(Some(first));
        }
        let ready = client.wait_for("spark/inlineCompletionReady", left(deadline), |message| {
            let params = &message["params"];
            params["textDocument"]["uri"] == uri
                && params["textDocument"]["version"] == version
                && params["position"] == json!({"line": line, "character": character})
        });
        if ready.is_err() {
            return Ok(None);
        }
        let params = json!({
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 1},
        });
        let id = client.send_request("textDocument/inlineCompletion", params)?;
        let Ok(response) = client.wait_response(id, left(deadline)) else { return Ok(None) };
        let text = first_insert_text(&response);
        Ok((!text.trim().is_empty()).then_some(text))
    }

    /// Runs a Spark command with `argument`; returns the edit the server asked the editor to apply (`None`
    /// when it offered nothing) and its answer.
    pub fn command(&mut self, command: &str, argument: Value) -> Result<Answer<(Option<Value>, Value)>> {
        let client = self.ensure()?;
        let seen_before = client.seen.len();
        let response = match client.request(
            "workspace/executeCommand",
            json!({"command": command, "arguments": [argument]}),
            TASK_TIMEOUT,
        ) {
            Ok(response) => response,
            Err(error) => return Ok(self.lost(error.to_string()).map(|_| (None, Value::Null))),
        };
        let client = self.client.as_mut().expect("running");
        let edit = client.seen[seen_before..]
            .iter()
            .rev()
            .find(|message| message["method"] == "workspace/applyEdit")
            .map(|message| message["params"]["edit"].clone());
        let result =
            response.get("result").cloned().unwrap_or_else(|| response.get("error").cloned().unwrap_or_default());
        let applied = result["applied"] == true;
        Ok(Answer::Got((if applied { edit } else { None }, result)))
    }

    pub fn shutdown(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.shutdown(Duration::from_secs(20));
        }
    }
}

/// The first item's text of an inline-completion response (empty when none, or an error).
fn first_insert_text(response: &Value) -> String {
    let result = &response["result"];
    let items = result.get("items").or(Some(result)).and_then(Value::as_array);
    items
        .and_then(|items| items.first())
        .and_then(|item| item["insertText"].as_str().or_else(|| item["insertText"]["value"].as_str()))
        .unwrap_or("")
        .to_owned()
}

impl<T> Answer<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Answer<U> {
        match self {
            Answer::Got(value) => Answer::Got(f(value)),
            Answer::CrashOrTimeout(why) => Answer::CrashOrTimeout(why),
            Answer::Error(message) => Answer::Error(message),
        }
    }
}

pub fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The path of a `file://` uri, percent-decoded (the server may encode `+`, `@` and the like).
pub fn uri_path(uri: &str) -> PathBuf {
    let encoded = uri.strip_prefix("file://").unwrap_or(uri).as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut idx = 0;
    while idx < encoded.len() {
        let hex = encoded.get(idx + 1..idx + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match (encoded[idx], hex.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
            (b'%', Some(byte)) => {
                bytes.push(byte);
                idx += 3;
            }
            (byte, _) => {
                bytes.push(byte);
                idx += 1;
            }
        }
    }
    PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
}

/// Byte offset of an LSP position (UTF-16 columns) in `text`.
pub fn offset(text: &str, line: u32, character: u32) -> usize {
    let mut at = 0;
    for _ in 0..line {
        match text[at..].find('\n') {
            Some(idx) => at += idx + 1,
            None => return text.len(),
        }
    }
    let mut units = 0;
    for (idx, ch) in text[at..].char_indices() {
        if units >= character as usize || ch == '\n' {
            return at + idx;
        }
        units += ch.len_utf16();
    }
    text.len()
}

/// The LSP position (UTF-16) of byte `at`.
pub fn position(text: &str, at: usize) -> (u32, u32) {
    let before = &text[..at];
    let line = before.matches('\n').count() as u32;
    let column = before.rsplit('\n').next().unwrap_or("").encode_utf16().count() as u32;
    (line, column)
}

/// Applies a `WorkspaceEdit` (`documentChanges` or `changes`) to `files` (uri → text; a created file starts
/// empty). Returns the uris it touched.
pub fn apply_edit(edit: &Value, files: &mut HashMap<String, String>) -> Result<Vec<String>> {
    let mut touched = Vec::new();
    let mut apply = |uri: &str, edits: &[Value], files: &mut HashMap<String, String>| -> Result<()> {
        let uri = file_uri(&uri_path(uri));
        let text = files.entry(uri.clone()).or_default();
        let mut ranges: Vec<(usize, usize, String)> = edits
            .iter()
            .map(|edit| {
                let range = &edit["range"];
                let point = |key: &str| {
                    offset(
                        text,
                        range[key]["line"].as_u64().unwrap_or(0) as u32,
                        range[key]["character"].as_u64().unwrap_or(0) as u32,
                    )
                };
                (point("start"), point("end"), edit["newText"].as_str().unwrap_or("").to_owned())
            })
            .collect();
        ranges.sort_by_key(|(start, _, _)| std::cmp::Reverse(*start));
        for (start, end, new_text) in ranges {
            if start > end || end > text.len() {
                bail!("an edit outside the document");
            }
            text.replace_range(start..end, &new_text);
        }
        touched.push(uri);
        Ok(())
    };
    if let Some(operations) = edit["documentChanges"].as_array() {
        for operation in operations {
            if operation["kind"] == "create" {
                let uri = operation["uri"].as_str().unwrap_or("");
                files.entry(file_uri(&uri_path(uri))).or_default();
                continue;
            }
            let uri = operation["textDocument"]["uri"].as_str().context("an edit without a uri")?;
            apply(uri, operation["edits"].as_array().map(Vec::as_slice).unwrap_or(&[]), files)?;
        }
    } else if let Some(changes) = edit["changes"].as_object() {
        for (uri, edits) in changes {
            apply(uri, edits.as_array().map(Vec::as_slice).unwrap_or(&[]), files)?;
        }
    }
    Ok(touched)
}

/// Times a closure in milliseconds.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed().as_millis() as u64)
}
