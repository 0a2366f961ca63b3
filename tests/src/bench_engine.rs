//! `spark-bench --engine`: the engine in process (no LSP), each feature on and off side by side on the same
//! requests. Rows:
//! - switching between three open files: after each switch the user types a function body back, one
//!   ghost-text request each (225 ms deadline, as the server sends them, waiting for each answer), until the
//!   model answers with ghost text (answers from the suggestion cache are skipped: they need no prompt); KV
//!   slots on (one per file) and off (one sequence); then the same typing on in that file without a switch (the
//!   part of the wait every keystroke has: a first line the model does not finish within the deadline is not
//!   shown); and, in a second pass, the model's first token for the first keystroke after a switch with no
//!   deadline (the prompt's cost alone);
//! - the keystroke after a Spark fix: a ghost-text request, a fix-like task, then the next keystroke; slots on
//!   and off;
//! - fix-like and tests-like task prompts, greedy, with speculative decoding on and off: generation speed, the
//!   drafted and accepted tokens, and whether the outputs are identical;
//! - RSS of this process with the model and its slots beside the engine's memory estimate.
//!
//! Prompts are built from this repository's own source files (a window of text around a function), not from
//! any evaluation case.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use spark_engine::{Completion, CompletionRequest, Engine, EngineConfig, ModelInfo, ModelSource, StopMode, StopReason};
use spark_tests::workspace_root;

/// Files switched between, and the line after which the cursor sits.
const FILES: &[(&str, &str)] = &[
    ("ide/src/suggest.rs", "pub fn word_start("),
    ("engine/src/postprocess.rs", "pub fn finalize("),
    ("engine/src/suggestion_cache.rs", "pub fn lookup("),
];
/// Functions the task rows ask about.
const TASK_SOURCES: &[(&str, &str)] = &[
    ("engine/src/memory.rs", "pub fn effective_n_ctx("),
    ("engine/src/session.rs", "pub fn common_prefix_len("),
    ("engine/src/memory.rs", "fn parse_mem_available("),
];
const PREFIX_BYTES: usize = 4500;
const SUFFIX_BYTES: usize = 1200;
const SWITCHES: usize = 9;
const MAX_CHARS_PER_SWITCH: usize = 40;

/// An open file whose function body the user writes again: the body was taken out (`to_type`), and typing puts
/// it back one character at a time, so the text after the cursor stays what it was (as when a user types new code;
/// a FIM prompt's suffix then stays cached).
struct Doc {
    text: String,
    cursor: usize,
    lane: u64,
    to_type: String,
    typed: usize,
}

impl Doc {
    fn request(&self, deadline: Duration) -> CompletionRequest {
        // Whole lines, as the server's context window takes them: the window's start moves only across a line.
        let start = floor_boundary(&self.text, self.cursor.saturating_sub(PREFIX_BYTES));
        let start = if start == 0 { 0 } else { self.text[start..].find('\n').map_or(start, |idx| start + idx + 1) };
        let end = floor_boundary(&self.text, (self.cursor + SUFFIX_BYTES).min(self.text.len()));
        let prefix = &self.text[start..self.cursor];
        let line_rest = self.text[self.cursor..].split('\n').next().unwrap_or("");
        let indent: String =
            prefix.rsplit('\n').next().unwrap_or("").chars().take_while(|ch| ch.is_whitespace()).collect();
        CompletionRequest {
            lane: self.lane,
            prefix: prefix.to_owned(),
            suffix: self.text[self.cursor..end].to_owned(),
            mode: if line_rest.trim().is_empty() { StopMode::Block } else { StopMode::Line },
            indent,
            max_tokens: 48,
            max_lines: 8,
            deadline: Instant::now() + deadline,
            ..Default::default()
        }
    }

    /// The user types the next character of the body.
    fn type_one(&mut self) {
        if let Some(ch) = self.to_type[self.typed..].chars().next() {
            self.text.insert(self.cursor, ch);
            self.cursor += ch.len_utf8();
            self.typed += ch.len_utf8();
        }
    }
}

fn floor_boundary(text: &str, mut idx: usize) -> usize {
    while !text.is_char_boundary(idx) {
        idx -= 1;
    }
    idx
}

fn docs() -> anyhow::Result<Vec<Doc>> {
    FILES
        .iter()
        .enumerate()
        .map(|(idx, (path, anchor))| {
            let text = std::fs::read_to_string(workspace_root().join(path))?;
            let at = text.find(anchor).with_context(|| format!("{path}: no {anchor}"))?;
            let cursor = at + text[at..].find('\n').context("anchor line ends")? + 1;
            // The body up to the function's closing brace, which stays.
            let end = cursor + text[cursor..].find("\n}\n").with_context(|| format!("{path}: no end of {anchor}"))?;
            let to_type = text[cursor..end].to_owned();
            let text = format!("{}{}", &text[..cursor], &text[end..]);
            Ok(Doc { text, cursor, lane: 100 + idx as u64, to_type, typed: 0 })
        })
        .collect()
}

fn function_at(path: &str, anchor: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(workspace_root().join(path))?;
    let at = text.find(anchor).with_context(|| format!("{path}: no {anchor}"))?;
    let start = text[..at].rfind("\n\n").map_or(0, |idx| idx + 2);
    let end = text[at..].find("\n}\n").map_or(text.len(), |idx| at + idx + 3);
    Ok(text[start..end].to_owned())
}

/// Fix-like and tests-like task prompts, framed with the model's chat template when it has one.
fn task_prompts(info: &ModelInfo) -> anyhow::Result<Vec<(String, String)>> {
    let mut prompts = Vec::new();
    for (path, anchor) in TASK_SOURCES {
        let function = function_at(path, anchor)?;
        // A fix: the function with one character missing, to be written out whole.
        let broken = function.replacen(';', "", 1);
        let fix = format!(
            "This Rust function does not compile. Write the corrected function, whole, and nothing else.\n\n\
             ```rust\n{broken}\n```\n\nCorrected:"
        );
        let tests = format!(
            "Write Rust unit tests for this function, in a `#[cfg(test)] mod tests` module.\n\n\
             ```rust\n{function}\n```\n\nTests:"
        );
        for (kind, prompt) in [("fix", fix), ("tests", tests)] {
            // The answer's start is given (as the tasks give it): the opening of a code block.
            let framed = match &info.chat {
                Some(frame) => format!("{}```rust\n", frame.prompt(&prompt)),
                None => format!("{prompt}\n```rust\n"),
            };
            prompts.push((format!("{kind} {anchor}"), framed));
        }
    }
    Ok(prompts)
}

fn task_request(prompt: &str, max_tokens: usize) -> CompletionRequest {
    CompletionRequest {
        lane: u64::MAX,
        prefix: prompt.to_owned(),
        mode: StopMode::Free,
        max_tokens,
        max_lines: usize::MAX,
        deadline: Instant::now() + Duration::from_secs(600),
        raw_prompt: true,
        stop_strings: vec!["```".to_owned()],
        ..Default::default()
    }
}

fn config(model: &Path, kv_slots: u32, speculative: bool) -> EngineConfig {
    EngineConfig {
        kv_slots: Some(kv_slots),
        speculative,
        ..EngineConfig::new(ModelSource::Path(model.to_path_buf()), spark_engine::default_threads())
    }
}

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

fn pct(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The user types on in `doc` until the model answers with ghost text: the time that took, and the prompt tokens
/// decoded by the first model call.
async fn type_until_ghost_text(engine: &Engine, doc: &mut Doc) -> anyhow::Result<(f64, Option<f64>)> {
    let started = Instant::now();
    let mut decoded = None;
    for _ in 0..MAX_CHARS_PER_SWITCH {
        doc.type_one();
        let answer = engine.complete(doc.request(Duration::from_millis(225))).await?;
        // Answers from the suggestion cache (the user typed the start of the shown suggestion) say nothing
        // about the model's prompt: the row waits for the model's own answer.
        if answer.stop == StopReason::Cached {
            continue;
        }
        decoded.get_or_insert(answer.stats.n_decoded as f64);
        if !answer.text.is_empty() {
            break;
        }
    }
    Ok((started.elapsed().as_secs_f64() * 1000.0, decoded))
}

/// The user types on in `doc` until a keystroke is answered by the model (no deadline) rather than by the
/// suggestion cache, which needs no prompt; that answer.
async fn type_until_model_call(engine: &Engine, doc: &mut Doc) -> anyhow::Result<Option<Completion>> {
    for _ in 0..MAX_CHARS_PER_SWITCH {
        doc.type_one();
        let answer = engine.complete(doc.request(Duration::from_secs(60))).await?;
        if answer.stop != StopReason::Cached {
            return Ok(Some(answer));
        }
    }
    Ok(None)
}

/// After each switch: the time to the first ghost text and the prompt tokens decoded by the first request; then,
/// in the same file without a switch, the time to the next ghost text (what typing costs anyway: a line the model
/// does not finish within the deadline is not shown, in any file).
struct Switching {
    waits: Vec<f64>,
    decoded: Vec<f64>,
    staying: Vec<f64>,
    first_token: Vec<f64>,
}

async fn switching(engine: &Engine) -> anyhow::Result<Switching> {
    let mut docs = docs()?;
    // Every file was open and showed ghost text before (the editor's state when the user switches).
    for doc in &docs {
        engine.complete(doc.request(Duration::from_secs(60))).await?;
    }
    let mut rows = Switching { waits: Vec::new(), decoded: Vec::new(), staying: Vec::new(), first_token: Vec::new() };
    for switch in 0..SWITCHES {
        let n_docs = docs.len();
        let doc = &mut docs[switch % n_docs];
        let (wait, decoded) = type_until_ghost_text(engine, doc).await?;
        rows.waits.push(wait);
        rows.decoded.extend(decoded);
        rows.staying.push(type_until_ghost_text(engine, doc).await?.0);
    }
    // The first keystroke's own cost: the model's first token after a switch, with no deadline to hide it.
    for switch in 0..SWITCHES {
        let n_docs = docs.len();
        let doc = &mut docs[switch % n_docs];
        if let Some(answer) = type_until_model_call(engine, doc).await? {
            rows.first_token.push(answer.stats.first_token_ms as f64);
        }
    }
    Ok(rows)
}

/// Prompt tokens decoded and latency of the keystroke after a fix-like task.
async fn keystroke_after_fix(engine: &Engine, prompts: &[(String, String)]) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let mut docs = docs()?;
    let doc = &mut docs[0];
    let (mut decoded, mut latency) = (Vec::new(), Vec::new());
    for (_, prompt) in prompts.iter().filter(|(label, _)| label.starts_with("fix")) {
        doc.type_one();
        engine.complete(doc.request(Duration::from_secs(60))).await?;
        engine.complete(task_request(prompt, 32)).await?;
        let Some(answer) = type_until_model_call(engine, doc).await? else { continue };
        // Up to the first token: the prompt's cost, without the length of the answer.
        latency.push(answer.stats.first_token_ms as f64);
        decoded.push(answer.stats.n_decoded as f64);
    }
    Ok((decoded, latency))
}

struct TaskRun {
    answers: Vec<Completion>,
}

impl TaskRun {
    fn tokens_per_s(&self) -> f64 {
        let generated: usize = self.answers.iter().map(|answer| answer.stats.n_generated).sum();
        let us: u64 = self.answers.iter().map(|answer| answer.stats.generate_us).sum();
        generated as f64 / (us.max(1) as f64 / 1e6)
    }
}

async fn tasks(engine: &Engine, prompts: &[(String, String)]) -> anyhow::Result<TaskRun> {
    let mut answers = Vec::new();
    for (_, prompt) in prompts {
        answers.push(engine.complete(task_request(prompt, 160)).await?);
    }
    Ok(TaskRun { answers })
}

async fn run_model(model: PathBuf, only_speculation: bool) -> anyhow::Result<()> {
    let name = model.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    println!("### {name}");
    println!();
    println!("| row | feature on | feature off | target |");
    println!("|---|---|---|---|");
    // Slots: one engine with four, one with a single sequence; each runs the same requests.
    let mut switch_rows = Vec::new();
    let mut fix_rows = Vec::new();
    let mut memory = None;
    for slots in if only_speculation { vec![] } else { vec![4, 1] } {
        let engine = Engine::start(config(&model, slots, true));
        let info = engine.wait_ready().await.map_err(|error| anyhow::anyhow!("{error}"))?;
        let prompts = task_prompts(&info)?;
        eprintln!("spark-bench --engine: {name}, {slots} slot(s): switching between files …");
        switch_rows.push(switching(&engine).await?);
        eprintln!("spark-bench --engine: {name}, {slots} slot(s): keystroke after a fix …");
        fix_rows.push(keystroke_after_fix(&engine, &prompts).await?);
        if slots == 4 {
            memory = info.memory.map(|estimate| (estimate, rss_mib()));
        }
        engine.shutdown();
    }
    if let [on, off] = switch_rows.as_slice() {
        let p50_p95 = |values: &[f64]| format!("{:.0} / {:.0} ms", pct(values, 0.5), pct(values, 0.95));
        println!(
            "| switching between 3 open files: first ghost text after a switch, p50 / p95 ({SWITCHES} switches, 225 ms deadline) | {} | {} | p95 ≤ 300 ms |",
            p50_p95(&on.waits),
            p50_p95(&off.waits)
        );
        println!(
            "| … the same typing on in the file without a switch (the cost of lines not finished within the deadline) | {} | {} | |",
            p50_p95(&on.staying),
            p50_p95(&off.staying)
        );
        println!(
            "| … prompt tokens decoded by the first request after a switch (median) | {:.0} | {:.0} | |",
            pct(&on.decoded, 0.5),
            pct(&off.decoded, 0.5)
        );
        println!(
            "| … the first keystroke after a switch: the model's first token, p50 / p95 (no deadline) | {} | {} | |",
            p50_p95(&on.first_token),
            p50_p95(&off.first_token)
        );
    }
    if let [on, off] = fix_rows.as_slice() {
        println!(
        "| the keystroke after a fix: prompt tokens decoded (median), first token p50 | {:.0}, {:.0} ms | {:.0}, {:.0} ms | ≤ 16 decoded |",
        pct(&on.0, 0.5), pct(&on.1, 0.5), pct(&off.0, 0.5), pct(&off.1, 0.5)
    );
    }
    if let Some((estimate, rss)) = memory {
        println!(
            "| RSS with 4 slots (after the rows above) vs the estimate | {rss} MiB measured, {} MiB estimated ({:+.0}%) | | ≤ 600 MiB, within 10% |",
            estimate.total_mib(),
            100.0 * (estimate.total_mib() as f64 - rss as f64) / rss.max(1) as f64
        );
    }
    // Speculation: the same task prompts with it on and off (two slots each).
    let mut runs = Vec::new();
    for speculative in [true, false] {
        let engine = Engine::start(config(&model, 2, speculative));
        let info = engine.wait_ready().await.map_err(|error| anyhow::anyhow!("{error}"))?;
        let mut prompts = task_prompts(&info)?;
        if only_speculation {
            prompts.truncate(2);
        }
        eprintln!("spark-bench --engine: {name}, speculative {speculative}: task prompts …");
        runs.push(tasks(&engine, &prompts).await?);
        engine.shutdown();
    }
    let (on, off) = (&runs[0], &runs[1]);
    let identical = on.answers.iter().zip(&off.answers).filter(|(a, b)| a.text == b.text).count();
    // Where an output parted from plain decoding (llama.cpp rounds a batch differently from one token).
    for (on_answer, off_answer) in on.answers.iter().zip(&off.answers).filter(|(a, b)| a.text != b.text) {
        let at = on_answer.text.bytes().zip(off_answer.text.bytes()).take_while(|(a, b)| a == b).count();
        eprintln!(
            "spark-bench --engine: speculation parted from plain decoding after {at} of {} bytes",
            off_answer.text.len()
        );
    }
    let drafted: usize = on.answers.iter().map(|answer| answer.stats.n_drafted).sum();
    let accepted: usize = on.answers.iter().map(|answer| answer.stats.n_accepted).sum();
    let generated: usize = on.answers.iter().map(|answer| answer.stats.n_generated).sum();
    println!(
        "| fix and tests prompts ({} of them, greedy): generation speed | {:.1} tok/s ({:.2}x) | {:.1} tok/s | ≥ 2x |",
        on.answers.len(),
        on.tokens_per_s(),
        on.tokens_per_s() / off.tokens_per_s(),
        off.tokens_per_s()
    );
    println!(
        "| … drafted / accepted / generated tokens; outputs identical | {drafted} / {accepted} / {generated}; {identical} of {} | | identical |",
        on.answers.len()
    );
    println!();
    Ok(())
}

/// Runs the engine rows for the default model, or each `--model PATH` given.
/// `only_speculation` runs the speculation rows alone, on the first fix and tests prompts (a quick check).
pub fn main(models: Vec<PathBuf>, only_speculation: bool) -> anyhow::Result<()> {
    let models = if models.is_empty() {
        vec![spark_engine::default_model_path().context("no HOME: pass --model PATH")?]
    } else {
        models
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    println!("engine rows (in process, no LSP), each feature on and off on the same requests");
    println!();
    for model in models {
        runtime.block_on(run_model(model, only_speculation))?;
    }
    Ok(())
}
