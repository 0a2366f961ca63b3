//! `spark-bench --pause`: the time from the last key of a short burst to ghost text the user can see, as an editor
//! meets it (issue 33). Editors ask for inline completions only while the user types, so a request cut by the
//! deadline leaves nothing on screen unless the server says a suggestion is ready (`spark/inlineCompletionReady`)
//! and the client asks again, as Spark's VS Code extension and Neovim plugin do.
//!
//! Rows, each on its own server, in one run:
//! - **pause, cold file**: each place is a file just opened (its own URI, so nothing of it is cached; the cursor
//!   comes to the place a second later, as after a search or a click), the rest of a line in a function is
//!   deleted, 8-12 of its characters are typed at 80 ms a key (each keystroke a `didChange` and a request; the
//!   previous one cancelled, as VS Code does), then the user waits: the time until a non-empty answer (the last
//!   request's, or the one asked after the notification), at most 10 s;
//! - **switch**: two files open and warm, the user switches to the other one (`spark/didFocus`, as the extension
//!   sends on a change of the active editor), pauses 300 ms, types 3 characters at 80 ms and waits;
//! - with `inline.notifyReady` off (the editor asks only when the user types, and says nothing of where the cursor
//!   rests: the server and clients before issue 33), on (the client says where the cursor rests with
//!   `spark/didFocus` and asks again when told), and on with the confidence gate open (`minConfidence` 0: what is
//!   delivered, whether or not the model was sure; with the default gate an unsure place shows nothing, by design).
//!
//! The files come from the evaluation corpus (`spark-eval --fetch-only`), code nobody on Spark wrote.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use spark_tests::{end_position, LspClient};

const KEY: Duration = Duration::from_millis(80);
const GIVE_UP: Duration = Duration::from_secs(10);
/// From opening a file to the cursor resting at the place where the user types.
const FIND_THE_PLACE: Duration = Duration::from_secs(1);

/// A held-out file: its text, and the places (line starts of code inside bodies) where the user types.
pub struct PauseFile {
    pub name: String,
    pub language_id: &'static str,
    pub text: String,
}

/// Lines inside a body (indented), with 16-70 characters of code that is not a comment or a closing bracket:
/// (byte offset of the code's first character, the code), `count` of them spread over the file. The same choice as
/// the real-editor pause tests (tests/editors/*/pause.*).
pub fn places(text: &str, count: usize) -> Vec<(usize, String)> {
    let mut candidates = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        let code = content.trim_start();
        let indent = content.len() - code.len();
        let comment = code.starts_with("//") || code.starts_with("/*") || code.starts_with('*');
        let closing = code.starts_with([']', ')', '}']) || code.starts_with('#');
        if indent >= 4 && (16..=70).contains(&code.len()) && !comment && !closing {
            candidates.push((offset + indent, code.to_owned()));
        }
        offset += line.len();
    }
    if candidates.is_empty() {
        return Vec::new();
    }
    (0..count).map(|idx| candidates[((2 * idx + 1) * candidates.len()) / (2 * count)].clone()).collect()
}

/// One measured pause: milliseconds from the last key to a non-empty answer, or `None` (nothing within 10 s).
pub type Pause = Option<f64>;

pub struct PauseRow {
    pub label: String,
    pub pauses: Vec<Pause>,
    /// Of the shown suggestions, how many came after a `spark/inlineCompletionReady`.
    pub after_notice: usize,
}

/// How a row's client and server are set up.
#[derive(Clone, Copy)]
pub struct Setup {
    /// The client asks again when told (`spark/inlineCompletionReady`) and says where the cursor rests
    /// (`spark/didFocus`), as Spark's VS Code extension and Neovim plugin do; off, the editor asks only while the
    /// user types (the server and clients before issue 33).
    pub notify_ready: bool,
    /// `inline.minConfidence` 0: every checked suggestion is shown, so the row measures delivery, not whether the
    /// model was sure (the default gate holds back what it is unsure of: nothing shown, by design).
    pub gate_open: bool,
}

impl Setup {
    fn label(self) -> String {
        let gate = if self.gate_open { ", gate open" } else { "" };
        format!("notifyReady {}{gate}", if self.notify_ready { "on" } else { "off" })
    }
}

fn start(setup: Setup, label: &str) -> anyhow::Result<LspClient> {
    let log_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/logs");
    std::fs::create_dir_all(&log_dir)?;
    let slug: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let mut client = LspClient::start(&[], Some(&log_dir.join(format!("{slug}.log"))))?;
    let mut inline = json!({"notifyReady": setup.notify_ready});
    if setup.gate_open {
        inline["minConfidence"] = json!(0);
    }
    client.initialize(json!({ "inline": inline }))?;
    client.wait_model_ready(Duration::from_secs(120))?;
    Ok(client)
}

/// A document the bench types into.
struct Doc {
    uri: String,
    text: String,
    version: i32,
}

impl Doc {
    fn open(client: &mut LspClient, uri: String, language_id: &str, text: String) -> anyhow::Result<Doc> {
        client.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}}),
        )?;
        Ok(Doc { uri, text, version: 1 })
    }

    fn replace(&mut self, client: &mut LspClient, start: usize, end: usize, new: &str) -> anyhow::Result<()> {
        let (from, to) = (end_position(&self.text[..start]), end_position(&self.text[..end]));
        self.version += 1;
        client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": self.uri, "version": self.version},
                   "contentChanges": [{"range": {"start": from, "end": to}, "text": new}]}),
        )?;
        self.text.replace_range(start..end, new);
        Ok(())
    }

    fn ask(&self, client: &mut LspClient, at: usize) -> anyhow::Result<i64> {
        client.send_request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": self.uri}, "position": end_position(&self.text[..at]),
                   "context": {"triggerKind": 2}}),
        )
    }
}

/// Types `typed` at `at` key by key (a request per key, the previous one cancelled), then waits for ghost text:
/// the milliseconds from the last key to a non-empty answer, and whether it came after the server's notice.
fn burst_and_pause(client: &mut LspClient, doc: &mut Doc, at: usize, typed: &str) -> anyhow::Result<(Pause, bool)> {
    let mut open: Option<i64> = None;
    let mut at = at;
    for ch in typed.chars() {
        if let Some(id) = open.take() {
            client.notify("$/cancelRequest", json!({"id": id}))?;
        }
        doc.replace(client, at, at, &ch.to_string())?;
        at += ch.len_utf8();
        open = Some(doc.ask(client, at)?);
        client.receive_until(Instant::now() + KEY)?;
    }
    let last_key = Instant::now();
    let position = end_position(&doc.text[..at]);
    let mut asked_again = false;
    while last_key.elapsed() < GIVE_UP {
        for (arrived, message) in client.receive_until(Instant::now() + Duration::from_millis(20))? {
            if open.is_some_and(|id| message["id"] == json!(id)) {
                open = None;
                let text = message["result"]["items"][0]["insertText"].as_str().unwrap_or("");
                if !text.is_empty() {
                    return Ok((Some((arrived - last_key).as_secs_f64() * 1000.0), asked_again));
                }
            }
        }
        // Notifications are kept by the client (`receive_until` returns responses only).
        let (uri, version) = (json!(doc.uri), json!(doc.version));
        let ready = !asked_again
            && client
                .wait_for("spark/inlineCompletionReady", Duration::from_millis(1), |message| {
                    message["params"]["textDocument"]["uri"] == uri
                        && message["params"]["textDocument"]["version"] == version
                        && message["params"]["position"] == position
                })
                .is_ok();
        if ready && open.is_none() {
            open = Some(doc.ask(client, at)?);
            asked_again = true;
        }
    }
    if let Some(id) = open {
        client.notify("$/cancelRequest", json!({"id": id}))?;
    }
    Ok((None, asked_again))
}

/// The typed part of a place's code: 8-12 characters, as a person types before pausing.
fn burst_of(code: &str) -> &str {
    let chars = code.chars().count().saturating_sub(4).clamp(8, 12);
    code.char_indices().nth(chars).map_or(code, |(idx, _)| &code[..idx])
}

/// The cold-file pause row: `per_file` places in each file, each in a freshly opened copy.
pub fn cold_pauses(files: &[PauseFile], per_file: usize, setup: Setup) -> anyhow::Result<PauseRow> {
    let label = format!("pause, cold file, {}", setup.label());
    let mut client = start(setup, &label)?;
    let (mut pauses, mut after_notice) = (Vec::new(), 0);
    for file in files {
        for (idx, (start, code)) in places(&file.text, per_file).into_iter().enumerate() {
            let end = start + code.len();
            let uri = format!("file:///bench/pause/{idx}/{}", file.name);
            // The file as the user opens it, the rest of the line already gone: only the burst is typed.
            let text = format!("{}{}", &file.text[..start], &file.text[end..]);
            let mut doc = Doc::open(&mut client, uri.clone(), file.language_id, text)?;
            // The user finds the place (a search, a click): a second after the file opened, the cursor is there.
            client.receive_until(Instant::now() + FIND_THE_PLACE)?;
            if setup.notify_ready {
                // The cursor comes to rest at the place and typing starts 100 ms later (Neovim's InsertEnter).
                let position = end_position(&doc.text[..start]);
                client.notify("spark/didFocus", json!({"textDocument": {"uri": doc.uri}, "position": position}))?;
                client.receive_until(Instant::now() + Duration::from_millis(100))?;
            }
            let (pause, noticed) = burst_and_pause(&mut client, &mut doc, start, burst_of(&code))?;
            after_notice += usize::from(pause.is_some() && noticed);
            pauses.push(pause);
            client.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}))?;
        }
    }
    client.shutdown(Duration::from_secs(30))?;
    Ok(PauseRow { label, pauses, after_notice })
}

/// The switch row: two files open and warm; `switches` times the user goes to the other one, looks for 300 ms,
/// types 3 characters of a line's code there and waits.
pub fn switches(files: &[PauseFile], switches: usize, setup: Setup) -> anyhow::Result<PauseRow> {
    if files.len() < 2 {
        bail!("the switch row needs two files");
    }
    let label = format!("switch between open files, {}", setup.label());
    let mut client = start(setup, &label)?;
    let mut docs = Vec::new();
    let mut spots = Vec::new();
    for file in &files[..2] {
        let uri = format!("file:///bench/switch/{}", file.name);
        docs.push(Doc::open(&mut client, uri, file.language_id, file.text.clone())?);
        spots.push(places(&file.text, switches.div_ceil(2)));
    }
    // The user reads the files for a while: their warm-ups finish.
    client.receive_until(Instant::now() + Duration::from_secs(3))?;
    let (mut pauses, mut after_notice) = (Vec::new(), 0);
    for turn in 0..switches {
        let (which, nth) = (turn % 2, turn / 2);
        let Some((start, code)) = spots[which].get(nth).cloned() else { continue };
        let doc = &mut docs[which];
        // The place moved by what earlier turns typed in this file: found again by its code.
        let start = doc.text.find(&code).unwrap_or(start);
        let end = start + code.len();
        doc.replace(&mut client, start, end, "")?;
        let position = end_position(&doc.text[..start]);
        client.notify("spark/didFocus", json!({"textDocument": {"uri": doc.uri}, "position": position}))?;
        client.receive_until(Instant::now() + Duration::from_millis(300))?;
        let typed: String = code.chars().take(3).collect();
        let (pause, noticed) = burst_and_pause(&mut client, doc, start, &typed)?;
        after_notice += usize::from(pause.is_some() && noticed);
        pauses.push(pause);
        // The line as it was.
        let typed_end = start + typed.len();
        doc.replace(&mut client, start, typed_end, &code)?;
    }
    client.shutdown(Duration::from_secs(30))?;
    Ok(PauseRow { label, pauses, after_notice })
}

/// The held-out files of the pause rows, from the fetched evaluation corpus.
pub fn corpus_files() -> anyhow::Result<Vec<PauseFile>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/eval/corpus");
    let wanted =
        [("crates/glob-0.3.2/src/lib.rs", "rust"), ("npm/tanstack+virtual-core-3.19.11/src/index.ts", "typescript")];
    wanted
        .iter()
        .map(|(path, language_id)| {
            let full = root.join(path);
            let text = std::fs::read_to_string(&full)
                .with_context(|| format!("{} (fetch it with `spark-eval --fetch-only`)", full.display()))?;
            let name = full.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            Ok(PauseFile { name, language_id, text })
        })
        .collect()
}

/// The table of the pause rows.
pub fn print(rows: &[PauseRow]) -> Value {
    println!();
    println!(
        "| pause row | places | shown within 10 s | after the notice | p50 ms | p95 ms | within 2 s \
         | shown: p50 / p95 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut json_rows = Vec::new();
    for row in rows {
        let mut shown: Vec<f64> = row.pauses.iter().flatten().copied().collect();
        shown.sort_by(f64::total_cmp);
        // Nothing shown counts as the longest wait: percentiles over every place, not over the lucky ones.
        let mut all: Vec<f64> = row.pauses.iter().map(|pause| pause.unwrap_or(f64::INFINITY)).collect();
        all.sort_by(f64::total_cmp);
        let pct = |p: f64| all.get(((all.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(f64::NAN);
        let fmt = |ms: f64| if ms.is_finite() { format!("{ms:.0}") } else { "none".into() };
        let within = shown.iter().filter(|ms| **ms <= 2000.0).count();
        let shown_pct =
            |p: f64| shown.get(((shown.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(f64::NAN);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} of {} | {} / {} |",
            row.label,
            row.pauses.len(),
            shown.len(),
            row.after_notice,
            fmt(pct(0.5)),
            fmt(pct(0.95)),
            within,
            row.pauses.len(),
            fmt(shown_pct(0.5)),
            fmt(shown_pct(0.95))
        );
        json_rows.push(json!({"label": row.label, "pauses_ms": row.pauses, "after_notice": row.after_notice}));
    }
    Value::Array(json_rows)
}
