//! `spark-bench`: keystroke → ghost-text latency over stdio against the real binary and the default model.
//!
//! It drives spark-lsp like an editor: it opens source files of this repository (Rust and TypeScript), removes
//! the body of one function from each and types it back character by character, sending an incremental
//! didChange and a `textDocument/inlineCompletion` request per keystroke. When a suggestion matches what is
//! about to be typed it accepts it (the whole suggestion or its matching complete lines), as a user pressing Tab.
//!
//! Paces, each a row of the table, all in one run:
//! - typing at a set rate (default 15 chars/s); a request still open at the next keystroke is cancelled with
//!   `$/cancelRequest`, as VS Code does (the latency columns count the requests the client did not cancel: the
//!   last one before a pause; the cancelled ones are counted beside them);
//! - waiting for each answer before typing on (the editor's worst case: nothing hides a slow answer);
//! - bursts (100 chars/s within a word, 400 ms pauses at spaces and line ends).
//!
//! The same paces run with KV-cache reuse and every cache off (the setting `model.reuse: false`: every request
//! from a cold context, as a server without prefix reuse serves it), and the table gives the ratio of the medians.
//! Writes target/bench/spark-bench.json and target/bench/latency.png (latency CDF per row).
//!
//! `--engine` runs the engine rows instead (`bench_engine.rs`: file switching with KV slots on and off, the
//! keystroke after a fix, speculative decoding on and off, RSS against the estimate), for the default model or
//! each `--model PATH`; `--only-speculation` runs the speculation rows alone, on two prompts.
//!
//! `--pause` runs the pause rows instead (`bench_pause.rs`: the time from the last key of a burst to visible ghost
//! text, on a cold file and after switching files, with `inline.notifyReady` off, on, and on with the confidence gate
//! open; `--places N` per file, `--after-only` without the notifyReady-off rows).
//!
//! Flags: `--quick` (the two default-reuse rows only), `--rate N` (chars/s), `--chars N` (characters typed per
//! file), `--busy-core` (adds rows with one core taken by another process, with passive and spinning OpenMP
//! waits).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use spark_tests::{end_position, workspace_root, LspClient};

#[path = "../bench_engine.rs"]
mod bench_engine;
#[path = "../bench_pause.rs"]
mod bench_pause;

/// A function body to type back: `anchor` names the line after which the body starts.
struct Source {
    path: &'static str,
    language_id: &'static str,
    anchor: &'static str,
}

const SOURCES: &[Source] = &[
    Source { path: "ide/src/suggest.rs", language_id: "rust", anchor: "pub fn word_start(" },
    Source { path: "editors/vscode/src/extension.ts", language_id: "typescript", anchor: "function expandPath(" },
];

/// One file of the replay: the document without the body, where the body goes, and the body.
struct Script {
    uri: String,
    language_id: &'static str,
    text: String,
    at: usize,
    typed: String,
}

fn scripts(max_chars: usize) -> anyhow::Result<Vec<Script>> {
    let mut scripts = Vec::new();
    for source in SOURCES {
        let text = std::fs::read_to_string(workspace_root().join(source.path))?;
        let anchor =
            text.find(source.anchor).with_context(|| format!("{}: no line with {}", source.path, source.anchor))?;
        let body_start = anchor + text[anchor..].find('\n').context("anchor line ends")? + 1;
        // The body: whole lines up to the function's closing brace at column 0, at most `max_chars`.
        let mut body_end = body_start;
        for line in text[body_start..].split_inclusive('\n') {
            if line.starts_with('}') || body_end - body_start + line.len() > max_chars {
                break;
            }
            body_end += line.len();
        }
        if body_end == body_start {
            bail!(
                "{}: the body after {} is empty or longer than {max_chars} characters per line",
                source.path,
                source.anchor
            );
        }
        let typed = text[body_start..body_end].to_owned();
        let text = format!("{}{}", &text[..body_start], &text[body_end..]);
        scripts.push(Script {
            uri: format!("file:///bench/{}", source.path),
            language_id: source.language_id,
            text,
            at: body_start,
            typed,
        });
    }
    Ok(scripts)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Pace {
    Rate(f64),
    Wait,
    Burst,
}

impl Pace {
    fn label(self) -> String {
        match self {
            Pace::Rate(rate) => format!("typing {rate:.0} chars/s"),
            Pace::Wait => "waiting for each answer".into(),
            Pace::Burst => "bursts (100 chars/s, 400 ms pauses)".into(),
        }
    }

    /// When the next keystroke may go, after one that typed `previous`.
    fn gap(self, previous: Option<char>) -> Duration {
        match self {
            Pace::Rate(rate) => Duration::from_secs_f64(1.0 / rate),
            Pace::Wait => Duration::ZERO,
            Pace::Burst if previous.is_some_and(char::is_whitespace) => Duration::from_millis(400),
            Pace::Burst => Duration::from_millis(10),
        }
    }
}

struct RowConfig {
    label: String,
    env: Vec<(&'static str, &'static str)>,
    pace: Pace,
    busy_core: bool,
    /// initializationOptions.
    options: Value,
    /// Characters typed per file (all of the body when `None`).
    max_chars: Option<usize>,
}

/// The no-reuse rows type this many characters per file (every request pays a cold prompt of ~1,400 tokens).
const NO_REUSE_CHARS: usize = 15;

/// One keystroke (or acceptance) and its request.
struct Event {
    id: i64,
    /// Characters of the file's body typed before this request.
    typed_before: usize,
    sent: Instant,
    answered: Option<Instant>,
    cancelled: bool,
    shown: bool,
}

struct Row {
    label: String,
    ready_ms: u128,
    rss_mib: u64,
    events: Vec<Event>,
    typed_chars: usize,
    accepted_chars: usize,
    accepts: usize,
    cache_hits: u64,
    requests: u64,
    calls: Vec<Value>,
    cpu_ms: u64,
}

impl Row {
    fn latencies_ms(&self) -> Vec<f64> {
        let mut latencies: Vec<f64> = self
            .events
            .iter()
            .filter(|event| !event.cancelled)
            .filter_map(|event| event.answered.map(|answered| (answered - event.sent).as_secs_f64() * 1000.0))
            .collect();
        latencies.sort_by(f64::total_cmp);
        latencies
    }

    fn interactive_calls(&self) -> impl Iterator<Item = &Value> {
        self.calls.iter().filter(|call| call["background"] == false && call["stop"] != "WarmedUp")
    }
}

/// The editor side of one row: the document state, the open request and the log of events.
struct Typist<'a> {
    client: &'a mut LspClient,
    uri: String,
    text: String,
    at: usize,
    version: i32,
    events: Vec<Event>,
    /// Index in `events` of the request for the current text, while it is open or after it was answered.
    current: Option<usize>,
    suggestion: Option<String>,
    typed_before: usize,
}

impl Typist<'_> {
    fn edit(&mut self, inserted: &str) -> anyhow::Result<()> {
        let position = end_position(&self.text[..self.at]);
        self.version += 1;
        self.client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": self.uri, "version": self.version},
                   "contentChanges": [{"range": {"start": position, "end": position}, "text": inserted}]}),
        )?;
        self.text.insert_str(self.at, inserted);
        self.at += inserted.len();
        self.suggestion = None;
        Ok(())
    }

    /// Cancels the open request (VS Code cancels the previous trigger's token), then asks at the cursor.
    fn request(&mut self) -> anyhow::Result<()> {
        if let Some(open) = self.current.map(|idx| &mut self.events[idx]).filter(|event| event.answered.is_none()) {
            open.cancelled = true;
            let id = open.id;
            self.client.notify("$/cancelRequest", json!({"id": id}))?;
        }
        let id = self.client.send_request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": self.uri}, "position": end_position(&self.text[..self.at]),
                   "context": {"triggerKind": 2}}),
        )?;
        self.events.push(Event {
            id,
            typed_before: self.typed_before,
            sent: Instant::now(),
            answered: None,
            cancelled: false,
            shown: false,
        });
        self.current = Some(self.events.len() - 1);
        Ok(())
    }

    /// Takes in the responses that arrive until `until`.
    fn receive(&mut self, until: Instant) -> anyhow::Result<()> {
        for (arrived, response) in self.client.receive_until(until)? {
            let Some(idx) = self.events.iter().position(|event| response["id"] == json!(event.id)) else {
                continue;
            };
            let text = response["result"]["items"][0]["insertText"].as_str().map(str::to_owned);
            let event = &mut self.events[idx];
            event.answered = Some(arrived);
            event.shown = text.is_some();
            if Some(idx) == self.current {
                self.suggestion = text;
            }
        }
        Ok(())
    }

    fn current_answered(&self) -> bool {
        self.current.is_none_or(|idx| self.events[idx].answered.is_some())
    }
}

/// How much of `suggestion` to accept when `rest` is what the user is about to type: all of it when it matches,
/// else its longest matching prefix of complete lines; nothing under two characters.
fn accept_len(suggestion: &str, rest: &str) -> usize {
    if rest.starts_with(suggestion) {
        return if suggestion.len() >= 2 { suggestion.len() } else { 0 };
    }
    let mut best = 0;
    for (idx, _) in suggestion.match_indices('\n') {
        if rest.starts_with(&suggestion[..=idx]) {
            best = idx + 1;
        }
    }
    if best >= 2 {
        best
    } else {
        0
    }
}

fn replay(config: &RowConfig, scripts: &[Script]) -> anyhow::Result<Row> {
    let stop_hog = Arc::new(AtomicBool::new(false));
    let hog = config.busy_core.then(|| {
        let stop = stop_hog.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        })
    });

    // The server's log of each row, for reading a slow keystroke afterwards.
    let log_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/logs");
    std::fs::create_dir_all(&log_dir)?;
    let slug: String = config.label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let mut client = LspClient::start(&config.env, Some(&log_dir.join(format!("{slug}.log"))))?;
    let started = Instant::now();
    client.initialize(config.options.clone())?;
    client.wait_model_ready(Duration::from_secs(120))?;
    let ready_ms = started.elapsed().as_millis();
    let rss_mib = client.rss_kib().unwrap_or(0) / 1024;
    let cpu_at_start = cpu_time_ms(client.child.id());
    for script in scripts {
        client.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": script.uri, "languageId": script.language_id, "version": 1,
                                    "text": script.text}}),
        )?;
    }
    // Let the warm-ups of the opened files finish, as they would while the user reads the file.
    client.receive_until(Instant::now() + Duration::from_secs(3))?;

    let mut events = Vec::new();
    let (mut typed_chars, mut accepted_chars, mut accepts) = (0, 0, 0);
    for script in scripts {
        let mut typist = Typist {
            client: &mut client,
            uri: script.uri.clone(),
            text: script.text.clone(),
            at: script.at,
            version: 1,
            events: Vec::new(),
            current: None,
            suggestion: None,
            typed_before: 0,
        };
        let limit = config.max_chars.map_or(script.typed.len(), |chars| {
            script.typed.char_indices().nth(chars).map_or(script.typed.len(), |(idx, _)| idx)
        });
        let mut done = 0;
        while done < limit {
            typist.typed_before = script.typed[..done].chars().count();
            let rest = &script.typed[done..];
            let accept = typist.suggestion.as_deref().map_or(0, |suggestion| accept_len(suggestion, rest));
            let previous = if accept > 0 {
                typist.edit(&rest[..accept])?;
                done += accept;
                accepted_chars += accept;
                accepts += 1;
                rest[..accept].chars().last()
            } else {
                let ch = rest.chars().next().expect("rest is not empty");
                typist.edit(&ch.to_string())?;
                done += ch.len_utf8();
                typed_chars += 1;
                Some(ch)
            };
            typist.request()?;
            match config.pace {
                Pace::Wait => {
                    while !typist.current_answered() {
                        typist.receive(Instant::now() + Duration::from_millis(50))?;
                    }
                }
                pace => typist.receive(Instant::now() + pace.gap(previous))?,
            }
        }
        // The last request's answer, before the next file.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !typist.current_answered() && Instant::now() < deadline {
            typist.receive(Instant::now() + Duration::from_millis(50))?;
        }
        if !typist.current_answered() {
            bail!("the last request in {} was not answered within 30 s", script.uri);
        }
        events.append(&mut typist.events);
    }
    // Every request got its answer (a cancelled one too): nothing is left open.
    let deadline = Instant::now() + Duration::from_secs(30);
    while events.iter().any(|event: &Event| event.answered.is_none()) && Instant::now() < deadline {
        for (arrived, response) in client.receive_until(Instant::now() + Duration::from_millis(50))? {
            if let Some(event) = events.iter_mut().find(|event| response["id"] == json!(event.id)) {
                event.answered = Some(arrived);
            }
        }
    }
    let unanswered = events.iter().filter(|event| event.answered.is_none()).count();
    if unanswered > 0 {
        bail!("{unanswered} requests were never answered");
    }
    let status = client.request("spark/status", Value::Null, Duration::from_secs(10))?;
    let calls = client.request("spark/recentCalls", Value::Null, Duration::from_secs(10))?;
    let cpu_ms = cpu_time_ms(client.child.id()).saturating_sub(cpu_at_start);
    client.shutdown(Duration::from_secs(30))?;
    stop_hog.store(true, Ordering::Relaxed);
    if let Some(hog) = hog {
        let _ = hog.join();
    }
    let counters = &status["result"]["counters"];
    Ok(Row {
        label: config.label.clone(),
        ready_ms,
        rss_mib,
        events,
        typed_chars,
        accepted_chars,
        accepts,
        cache_hits: counters["cacheHits"].as_u64().unwrap_or(0),
        requests: counters["requests"].as_u64().unwrap_or(0),
        calls: calls["result"].as_array().cloned().unwrap_or_default(),
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

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median_of(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    pct(&values, 0.5)
}

/// The figures of one row, as printed and written to JSON.
struct Figures {
    p50: f64,
    p95: f64,
    p99: f64,
    keystrokes: usize,
    cancelled: usize,
    shown: usize,
    no_model_call: f64,
    decoded_median: f64,
    tokens_per_s: f64,
    first_token_ms: f64,
    cpu_per_keystroke: f64,
}

fn figures(row: &Row) -> Figures {
    let latencies = row.latencies_ms();
    let keystrokes = row.events.len();
    let calls: Vec<&Value> = row.interactive_calls().collect();
    let generated: u64 = calls.iter().filter_map(|call| call["nGenerated"].as_u64()).sum();
    let generate_us: u64 = calls.iter().filter_map(|call| call["generateUs"].as_u64()).sum();
    let first_tokens: Vec<f64> =
        calls.iter().filter_map(|call| call["firstTokenMs"].as_f64()).filter(|ms| *ms > 0.0).collect();
    Figures {
        p50: pct(&latencies, 0.5),
        p95: pct(&latencies, 0.95),
        p99: pct(&latencies, 0.99),
        keystrokes,
        cancelled: row.events.iter().filter(|event| event.cancelled).count(),
        shown: row.events.iter().filter(|event| event.shown).count(),
        no_model_call: 100.0 * row.cache_hits as f64 / keystrokes.max(1) as f64,
        decoded_median: median_of(calls.iter().filter_map(|call| call["nDecoded"].as_f64()).collect()),
        tokens_per_s: if generate_us == 0 { f64::NAN } else { generated as f64 / (generate_us as f64 / 1e6) },
        first_token_ms: median_of(first_tokens),
        cpu_per_keystroke: row.cpu_ms as f64 / keystrokes.max(1) as f64,
    }
}

fn plot(rows: &[Row], path: &std::path::Path) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let font = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ]
    .iter()
    .find_map(|candidate| std::fs::read(candidate).ok())
    .context("no DejaVu or Liberation font for the plot's labels (apt-get install fonts-dejavu-core)")?;
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into_boxed_slice()))
        .map_err(|_| anyhow::anyhow!("the font could not be read"))?;
    let max_ms = rows.iter().flat_map(|row| row.latencies_ms().last().copied()).fold(10.0, f64::max);
    let root = BitMapBackend::new(path, (1100, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("spark-bench: keystroke → ghost text latency (CDF)", ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((0.5f64..max_ms * 1.2).log_scale(), 0f64..100f64)?;
    chart.configure_mesh().x_desc("latency (ms, log scale)").y_desc("% of keystrokes answered").draw()?;
    for (idx, row) in rows.iter().enumerate() {
        let latencies = row.latencies_ms();
        let n = latencies.len().max(1) as f64;
        let color = Palette99::pick(idx).to_rgba();
        let points = latencies.iter().enumerate().map(|(i, ms)| (ms.max(0.5), 100.0 * (i + 1) as f64 / n));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(row.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The pause rows (`--pause`), side by side in one run; writes target/bench/spark-bench-pause.json.
/// `after_only` leaves out the rows of the server before issue 33 (notifyReady off: ~7 minutes of waiting).
fn pause_main(per_file: usize, after_only: bool) -> anyhow::Result<()> {
    use bench_pause::Setup;
    let files = bench_pause::corpus_files()?;
    let mut rows = Vec::new();
    let before = Setup { notify_ready: false, gate_open: false };
    let after = Setup { notify_ready: true, gate_open: false };
    let delivery = Setup { notify_ready: true, gate_open: true };
    let setups = if after_only { vec![after, delivery] } else { vec![before, after, delivery] };
    for setup in setups {
        eprintln!("spark-bench: pause rows, notifyReady {}, gate open {} …", setup.notify_ready, setup.gate_open);
        rows.push(bench_pause::cold_pauses(&files, per_file, setup)?);
        rows.push(bench_pause::switches(&files, 2 * per_file, setup)?);
    }
    println!(
        "last key of a burst (8-12 characters at 80 ms; 3 after a switch) → ghost text over stdio, default model and \
         settings, {} places in each of {} (evaluation corpus); percentiles over every place (nothing shown = none) \
         and over the places shown",
        per_file,
        files.iter().map(|file| file.name.as_str()).collect::<Vec<_>>().join(" and ")
    );
    let json_rows = bench_pause::print(&rows);
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("spark-bench-pause.json"), serde_json::to_string_pretty(&json_rows)?)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag_value = |name: &str| args.iter().position(|arg| arg == name).and_then(|idx| args.get(idx + 1));
    if args.iter().any(|arg| arg == "--engine") {
        let models = args
            .iter()
            .enumerate()
            .filter(|(_, arg)| *arg == "--model")
            .filter_map(|(idx, _)| args.get(idx + 1).map(std::path::PathBuf::from))
            .collect();
        return bench_engine::main(models, args.iter().any(|arg| arg == "--only-speculation"));
    }
    if args.iter().any(|arg| arg == "--pause") {
        let per_file: usize = flag_value("--places").map(|value| value.parse()).transpose()?.unwrap_or(10);
        return pause_main(per_file, args.iter().any(|arg| arg == "--after-only"));
    }
    let quick = args.iter().any(|arg| arg == "--quick");
    let rate: f64 = flag_value("--rate").map(|value| value.parse()).transpose()?.unwrap_or(15.0);
    let max_chars: usize = flag_value("--chars").map(|value| value.parse()).transpose()?.unwrap_or(110);
    let scripts = scripts(max_chars)?;

    let row = |label: &str, env: Vec<(&'static str, &'static str)>, pace: Pace, busy_core: bool| RowConfig {
        label: format!("{label}, {}", pace.label()),
        env,
        pace,
        busy_core,
        options: json!({}),
        max_chars: None,
    };
    // Without reuse a cold prompt takes seconds: those rows get a deadline that lets it finish (else they show
    // nothing at all) and type only the first characters of each body.
    let cold = |pace: Pace| RowConfig {
        label: format!("no reuse (deadline 20 s, first {NO_REUSE_CHARS} characters of each body), {}", pace.label()),
        options: json!({"inline": {"deadlineMs": 20000}, "model": {"reuse": false}}),
        max_chars: Some(NO_REUSE_CHARS),
        ..row("", vec![], pace, false)
    };
    let mut configs = vec![row("Spark", vec![], Pace::Rate(rate), false), row("Spark", vec![], Pace::Wait, false)];
    if !quick {
        configs.push(row("Spark", vec![], Pace::Burst, false));
        configs.push(cold(Pace::Rate(rate)));
        configs.push(cold(Pace::Wait));
    }
    if args.iter().any(|arg| arg == "--busy-core") {
        let passive = vec![("OMP_WAIT_POLICY", "PASSIVE")];
        let active = vec![("OMP_WAIT_POLICY", "ACTIVE")];
        configs.push(row("one core busy, Spark's default waits", vec![], Pace::Wait, true));
        configs.push(row("one core busy, OMP_WAIT_POLICY=passive", passive.clone(), Pace::Wait, true));
        configs.push(row("one core busy, OMP_WAIT_POLICY=active", active.clone(), Pace::Wait, true));
        configs.push(row("idle, OMP_WAIT_POLICY=passive", passive, Pace::Wait, false));
        configs.push(row("idle, OMP_WAIT_POLICY=active", active, Pace::Wait, false));
    }
    let mut rows = Vec::new();
    for config in &configs {
        eprintln!("spark-bench: {} …", config.label);
        rows.push(replay(config, &scripts)?);
    }

    let typed: usize = scripts.iter().map(|script| script.typed.chars().count()).sum();
    println!(
        "keystroke → ghost text over stdio, default model and settings; {typed} characters of {} typed per row \
         (function bodies of this repository), suggestions accepted when they match what comes next",
        SOURCES.iter().map(|source| source.path).collect::<Vec<_>>().join(" and ")
    );
    println!();
    println!("| configuration | p50 | p95 | p99 | requests (cancelled by the next keystroke) | shown | accepted chars | no model call | prompt tokens decoded / model call (median) | generation | first token (median) | start → ready | RSS | CPU / keystroke |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut json_rows = Vec::new();
    for row in &rows {
        let f = figures(row);
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.0} ms | {} ({}) | {} | {} of {} ({} accepts) | {:.0}% | {:.0} | {:.0} tok/s | {:.0} ms | {} ms | {} MiB | {:.0} ms |",
            row.label,
            f.p50,
            f.p95,
            f.p99,
            f.keystrokes,
            f.cancelled,
            f.shown,
            row.accepted_chars,
            row.accepted_chars + row.typed_chars,
            row.accepts,
            f.no_model_call,
            f.decoded_median,
            f.tokens_per_s,
            f.first_token_ms,
            row.ready_ms,
            row.rss_mib,
            f.cpu_per_keystroke,
        );
        json_rows.push(json!({
            "configuration": row.label, "readyMs": row.ready_ms, "rssMib": row.rss_mib,
            "p50Ms": f.p50, "p95Ms": f.p95, "p99Ms": f.p99, "requests": f.keystrokes, "cancelled": f.cancelled,
            "shown": f.shown, "typedChars": row.typed_chars, "acceptedChars": row.accepted_chars, "accepts": row.accepts,
            "noModelCallPercent": f.no_model_call, "cacheHits": row.cache_hits, "modelCalls": row.requests,
            "decodedMedian": f.decoded_median, "generationTokensPerS": f.tokens_per_s, "firstTokenMsMedian": f.first_token_ms,
            "cpuMs": row.cpu_ms, "latenciesMs": row.latencies_ms(), "calls": row.calls,
        }));
    }
    println!();
    for (fast, slow) in [(0, 3), (1, 4)] {
        if let (Some(fast), Some(slow)) = (rows.get(fast), rows.get(slow)) {
            // The same keystrokes on both sides: the first characters of each body.
            let same = |row: &Row| {
                let mut latencies: Vec<f64> = row
                    .events
                    .iter()
                    .filter(|event| !event.cancelled && event.typed_before < NO_REUSE_CHARS)
                    .filter_map(|event| event.answered.map(|answered| (answered - event.sent).as_secs_f64() * 1000.0))
                    .collect();
                latencies.sort_by(f64::total_cmp);
                pct(&latencies, 0.5)
            };
            let (slow_ms, fast_ms) = (same(slow), same(fast));
            if slow_ms.is_nan() || fast_ms.is_nan() {
                println!("median over the first {NO_REUSE_CHARS} characters of each body: {} / {}: n/a (no answered requests on one side)", slow.label, fast.label);
                continue;
            }
            println!(
                "median over the first {NO_REUSE_CHARS} characters of each body, {} / {}: {:.0} ms / {:.0} ms = {:.1}x",
                slow.label,
                fast.label,
                slow_ms,
                fast_ms,
                slow_ms / fast_ms.max(0.5)
            );
        }
    }
    let out = workspace_root().join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("spark-bench.json"), serde_json::to_string_pretty(&json_rows)?)?;
    match plot(&rows, &out.join("latency.png")) {
        Ok(()) => eprintln!("spark-bench: wrote target/bench/spark-bench.json and target/bench/latency.png"),
        Err(error) => eprintln!("spark-bench: wrote target/bench/spark-bench.json; no plot: {error}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::accept_len;

    #[test]
    fn accepts_whole_matches_and_matching_lines() {
        assert_eq!(accept_len("abc", "abcdef"), 3);
        assert_eq!(accept_len("ab\ncd\n", "ab\ncx\n"), 3);
        assert_eq!(accept_len("x", "xyz"), 0);
        assert_eq!(accept_len("abd", "abc"), 0);
    }
}
